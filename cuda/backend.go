package cuda

import (
	"fmt"
	"unsafe"
)

// Backend is a GPU as gozoo's runtime drives it: a Device, or a host
// emulator of the kernels for tests on machines without one. Calls other
// than Lock, Unlock and String are made between Lock and Unlock.
type Backend interface {
	// String names the backend in errors.
	String() string
	// Key names the backend's copies of weights (one per device).
	Key() string
	Lock()
	Unlock()
	MemInfo() (free, total int64, err error)
	Alloc(n int) (Ptr, error)
	Free(p Ptr)
	Zero(p Ptr, n int) error
	Copy(dst, src Ptr, n int) error
	Upload(dst Ptr, src unsafe.Pointer, n int) error
	Download(dst unsafe.Pointer, src Ptr, n int) error
	// Run issues launches in order; their host steps are the caller's.
	Run(calls ...Call) error
	// Sync waits for everything issued.
	Sync() error
}

// String is the card's name and ordinal.
func (dev *Device) String() string { return fmt.Sprintf("%s (cuda:%d)", dev.Name, dev.Ordinal) }

// Key is "cuda:N".
func (dev *Device) Key() string { return fmt.Sprintf("cuda:%d", dev.Ordinal) }

var _ Backend = (*Device)(nil)
