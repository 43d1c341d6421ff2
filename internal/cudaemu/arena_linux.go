package cudaemu

import (
	"os"

	"golang.org/x/sys/unix"
)

const supported = true

// arena is the device memory: a memory file mapped here and, at Base, in
// the emulator process, so both see every write without copies.
type arena struct {
	f   *os.File
	mem []byte
}

func newArena(size int) (*arena, error) {
	fd, err := unix.MemfdCreate("gozoo-cudaemu", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "gozoo-cudaemu")
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &arena{f: f, mem: mem}, nil
}

// files are what the emulator process inherits: the memory file as fd 3.
func (a *arena) files() []*os.File { return []*os.File{a.f} }

func (a *arena) close() error {
	err := unix.Munmap(a.mem)
	a.mem = nil
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	return err
}
