//go:build !linux

package cudaemu

import (
	"errors"
	"os"
)

const supported = false

type arena struct{ mem []byte }

func newArena(int) (*arena, error) { return nil, errors.New("the CUDA emulator runs on Linux only") }

func (a *arena) files() []*os.File { return nil }

func (a *arena) close() error { return nil }
