//go:build unix

package loaders

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pipeGuard is how long a call on a named pipe may run before the test
// says it blocked.
const pipeGuard = 3 * time.Minute

// TestNamedPipesAreRefused: opening a named pipe blocks until a writer
// comes, and reading one may never end; config.json, an index and a
// safetensors file that are pipes are refused before they are opened.
// A call that blocks on the pipe never returns, so a hang guard of
// minutes tells that apart, however loaded the machine.
func TestNamedPipesAreRefused(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"config.json", "model.safetensors"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
			t.Skip(err)
		}
	}
	for name, open := range map[string]func() error{
		"ReadConfig":      func() error { _, _, err := ReadConfig(dir); return err },
		"OpenFolder":      func() error { _, err := OpenFolder(dir); return err },
		"OpenSafetensors": func() error { _, err := OpenSafetensors(filepath.Join(dir, "model.safetensors")); return err },
		"OpenCheckpoint":  func() error { _, err := OpenCheckpoint(dir); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- open() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), dir) {
				t.Errorf("%s of a named pipe: got %v", name, err)
			}
		case <-time.After(pipeGuard):
			t.Fatalf("%s of a named pipe blocked (still running after %v)", name, pipeGuard)
		}
	}
}
