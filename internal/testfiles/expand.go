package testfiles

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// The vendored fixtures over 64 KiB are tracked as NAME.zst, so that the
// tree stays small enough to travel; Expand writes NAME beside each one
// (git ignores it, testdata/.gitignore) and checks it byte for byte
// against the digest testdata/SHA256SUMS records for it.
const (
	sumsFile   = "SHA256SUMS"
	sharedSums = "SHARED.sha256"
	// maxFixture bounds one expanded fixture, so a damaged frame header
	// cannot make a test allocate or write without limit.
	maxFixture = 64 << 20
)

var (
	expandOnce sync.Once
	expandErr  error
)

// Expand expands every compressed fixture of testdata/ that is missing or
// differs from its recorded digest, once per process. Test processes may
// run it at the same time: each writes a temporary file and renames it.
func Expand() error {
	expandOnce.Do(func() {
		root, err := FindRoot()
		if err != nil {
			expandErr = err
			return
		}
		expandErr = expandAll(filepath.Join(root, "testdata"))
	})
	return expandErr
}

// MustExpand is Expand for helpers without a testing.TB: it panics with
// Expand's error.
func MustExpand() {
	if err := Expand(); err != nil {
		panic(err)
	}
}

// Digest is one line of a sha256sum file: a file's path (relative to the
// file's folder) and its SHA-256 in hex.
type Digest struct{ Path, SHA256 string }

// ReadSums reads a file in sha256sum's format ("HEX  PATH" a line).
func ReadSums(path string) ([]Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Digest
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 || name == "" || filepath.IsAbs(name) || strings.Contains(name, "..") {
			return nil, fmt.Errorf("%s:%d: want \"<sha256>  <relative path>\", got %q", path, n, line)
		}
		out = append(out, Digest{Path: filepath.FromSlash(name), SHA256: sum})
	}
	return out, sc.Err()
}

func expandAll(testdata string) error {
	sums, err := ReadSums(filepath.Join(testdata, sumsFile))
	if err != nil {
		return fmt.Errorf("reading the fixture digests: %w", err)
	}
	for _, d := range sums {
		if err := expandOne(filepath.Join(testdata, d.Path), d.SHA256); err != nil {
			return err
		}
	}
	return nil
}

// expandOne makes dst hold the bytes whose digest is want, from dst.zst.
func expandOne(dst, want string) error {
	if got, err := FileSHA256(dst); err == nil && got == want {
		return nil
	}
	src := dst + ".zst"
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("expanding fixture %s: %w", dst, err)
	}
	defer in.Close()
	dec, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxFixture))
	if err != nil {
		return fmt.Errorf("expanding fixture %s: %w", src, err)
	}
	defer dec.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".expand-*")
	if err != nil {
		return fmt.Errorf("expanding fixture %s: %w", dst, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(dec, maxFixture+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return fmt.Errorf("expanding fixture %s: %w", src, err)
	case n > maxFixture:
		return fmt.Errorf("expanding fixture %s: more than %d bytes", src, maxFixture)
	case hex.EncodeToString(h.Sum(nil)) != want:
		return fmt.Errorf("expanding fixture %s: SHA-256 %x, want %s (testdata/%s)", src, h.Sum(nil), want, sumsFile)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("expanding fixture %s: %w", dst, err)
	}
	return nil
}

// FileSHA256 is the hex SHA-256 of a file's bytes.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// FindRoot is the folder holding go.mod, from the working directory up.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

var (
	sharedOnce sync.Map // folder -> *sharedCheck
)

type sharedCheck struct {
	once sync.Once
	err  error
}

// checkShared compares the files of a ../shared folder that
// testdata/SHARED.sha256 lists with their recorded digests, once per
// folder and process, so a changed ground truth fails by name.
func checkShared(root, kind, name string) error {
	key := kind + "/" + name
	v, _ := sharedOnce.LoadOrStore(key, &sharedCheck{})
	c := v.(*sharedCheck)
	c.once.Do(func() {
		sums, err := ReadSums(filepath.Join(root, "testdata", sharedSums))
		if err != nil {
			c.err = fmt.Errorf("reading the digests of ../shared fixtures: %w", err)
			return
		}
		prefix := filepath.Join(kind, name) + string(filepath.Separator)
		for _, d := range sums {
			if !strings.HasPrefix(d.Path, prefix) {
				continue
			}
			p := filepath.Join(root, "..", "shared", d.Path)
			got, err := FileSHA256(p)
			if err != nil {
				c.err = err
				return
			}
			if got != d.SHA256 {
				c.err = fmt.Errorf("fixture %s has SHA-256 %s, want %s (testdata/%s)", p, got, d.SHA256, sharedSums)
				return
			}
		}
	})
	return c.err
}
