// Package testfiles finds the fixtures tests read: the ones vendored in
// testdata/ and the ones that stay in ../shared beside the clone because
// they carry other licences (Gemma3, Llama-3 and Cohere tokenizers and
// templates).
package testfiles

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the repository root, the folder holding go.mod.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// Require returns path if it exists. A missing fixture fails the test under
// CI=true (CI has ../shared beside the clone) and skips it elsewhere,
// saying why.
func Require(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture %s is missing and CI=true requires ../shared beside the clone: %v", path, err)
		}
		t.Skipf("fixture %s is not present (files under other licences stay in ../shared, outside the repository): %v", path, err)
	}
	return path
}

// Fixture returns testdata/<kind>/<name> when it is vendored, else
// ../shared/<kind>/<name> (through Require).
func Fixture(t testing.TB, kind, name string) string {
	t.Helper()
	root := Root(t)
	if dir := filepath.Join(root, "testdata", kind, name); exists(dir) {
		return dir
	}
	return Require(t, filepath.Join(root, "..", "shared", kind, name))
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
