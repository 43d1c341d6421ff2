// Package testfiles finds the fixtures tests read: the ones vendored in
// testdata/ (the large ones compressed, expanded on first use), and the
// ones that stay in ../shared beside the clone, either because they carry
// other licences (Gemma3, Llama-3 and Cohere tokenizers and templates) or
// because the Qwen3 vocabulary makes them too large to travel
// (testdata/SHARED.sha256 lists them with their digests).
package testfiles

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Root returns the repository root, the folder holding go.mod, with the
// compressed fixtures of testdata/ expanded.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := Expand(); err != nil {
		t.Fatal(err)
	}
	return dir
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
	dir := Require(t, filepath.Join(root, "..", "shared", kind, name))
	if err := checkShared(root, kind, name); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Cases lists the case folders of a kind ("golden", "gguf"): those
// vendored in testdata/<kind> and those testdata/SHARED.sha256 reads from
// ../shared/<kind> (through Fixture), sorted by name.
func Cases(t testing.TB, kind string) []string {
	t.Helper()
	root := Root(t)
	names := map[string]bool{}
	ents, err := os.ReadDir(filepath.Join(root, "testdata", kind))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			names[e.Name()] = true
		}
	}
	sums, err := ReadSums(filepath.Join(root, "testdata", sharedSums))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sums {
		if parts := strings.Split(filepath.ToSlash(d.Path), "/"); len(parts) == 3 && parts[0] == kind {
			names[parts[1]] = true
		}
	}
	var out []string
	for n := range names {
		out = append(out, Fixture(t, kind, n))
	}
	sort.Strings(out)
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
