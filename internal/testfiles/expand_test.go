package testfiles

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func writeZst(t *testing.T, path string, data []byte) {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".zst", enc.EncodeAll(data, nil), 0o644); err != nil {
		t.Fatal(err)
	}
}

func digest(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestExpandAll expands fixtures from their .zst beside them, leaves a
// correct copy alone, rewrites a damaged one, and refuses bytes whose
// digest differs from SHA256SUMS, naming the file.
func TestExpandAll(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "golden", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("gozoo fixture "), 5000)
	writeZst(t, filepath.Join(dir, "golden", "c", "model.safetensors"), data)
	sums := digest(data) + "  golden/c/model.safetensors\n"
	if err := os.WriteFile(filepath.Join(dir, sumsFile), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "golden", "c", "model.safetensors")
	for _, step := range []string{"fresh", "present", "damaged"} {
		if step == "damaged" {
			if err := os.WriteFile(out, []byte("not the fixture"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := expandAll(dir); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: expanded %d bytes (%v), want %d", step, len(got), err, len(data))
		}
	}

	os.Remove(out)
	wrong := strings.Repeat("0", 64) + "  golden/c/model.safetensors\n"
	if err := os.WriteFile(filepath.Join(dir, sumsFile), []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	err := expandAll(dir)
	if err == nil || !strings.Contains(err.Error(), "model.safetensors.zst") || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("a wrong digest gave %v, want an error naming the file and its digest", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("bytes with the wrong digest were left in place")
	}
}

// TestVendoredFixtures: every fixture testdata/SHA256SUMS lists comes back
// with its digest, and every .zst under testdata is listed.
func TestVendoredFixtures(t *testing.T) {
	root := Root(t)
	sums, err := ReadSums(filepath.Join(root, "testdata", sumsFile))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, d := range sums {
		listed[d.Path+".zst"] = true
		if got, err := FileSHA256(filepath.Join(root, "testdata", d.Path)); err != nil || got != d.SHA256 {
			t.Errorf("%s: SHA-256 %s (%v), want %s", d.Path, got, err, d.SHA256)
		}
	}
	err = filepath.WalkDir(filepath.Join(root, "testdata"), func(p string, e os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".zst") {
			rel, _ := filepath.Rel(filepath.Join(root, "testdata"), p)
			if !listed[rel] {
				t.Errorf("testdata/%s is not listed in %s", rel, sumsFile)
			}
		}
		return err
	})
	if err != nil || len(sums) == 0 {
		t.Fatalf("walking testdata: %v (%d listed)", err, len(sums))
	}
}
