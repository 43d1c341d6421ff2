// Package layering holds the test that keeps gozoo's packages in layers:
// a package imports only packages of its own layer or of lower ones. The
// layers, lowest first, are in layering_test.go; a new package must be
// placed in one before the test passes. The package has no code.
package layering
