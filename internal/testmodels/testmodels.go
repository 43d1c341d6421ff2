// Package testmodels makes the test models that are written rather than
// stored: testdata/models/qwen3-tiny's weights (a random Qwen3 over the
// real 151,936-token vocabulary, 9.8 MB that the tree need not carry) come
// from gozoo's own seeded initialisation and are checked byte for byte.
package testmodels

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/qwen3"
)

// qwen3Tiny is written by `gozoo random --config config.json --dtype bf16
// --seed 7` (its README); the digest pins the bytes the tests have always
// read.
const (
	qwen3Tiny       = "testdata/models/qwen3-tiny"
	qwen3TinySeed   = 7
	qwen3TinySHA256 = "1578d9151a1db87d5abbc56cb8afcfd8ab42c9dd0969921759e62e5f1ed78420"
)

// Prepare expands the compressed fixtures (testfiles.Expand) and writes
// the generated models that are missing or differ from their digests.
// Test processes may run it at the same time.
func Prepare() error {
	if err := testfiles.Expand(); err != nil {
		return err
	}
	root, err := testfiles.FindRoot()
	if err != nil {
		return err
	}
	return writeQwen3Tiny(filepath.Join(root, qwen3Tiny))
}

func writeQwen3Tiny(dir string) error {
	dst := filepath.Join(dir, "model.safetensors")
	if got, err := testfiles.FileSHA256(dst); err == nil && got == qwen3TinySHA256 {
		return nil
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	tmp, err := os.MkdirTemp(dir, ".random-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	defer os.RemoveAll(tmp)
	if err := zoo.WriteRandomCheckpoint(cfg, tmp, "bf16", qwen3TinySeed); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	written := filepath.Join(tmp, "model.safetensors")
	if got, err := testfiles.FileSHA256(written); err != nil || got != qwen3TinySHA256 {
		return fmt.Errorf("writing %s: SHA-256 %s (%v), want %s: the seeded initialisation changed", dst, got, err, qwen3TinySHA256)
	}
	if err := os.Rename(written, dst); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

// MustPrepare is Prepare for a TestMain: it panics with Prepare's error.
func MustPrepare() {
	if err := Prepare(); err != nil {
		panic(err)
	}
}
