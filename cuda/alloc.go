package cuda

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"
)

// allocator caches device memory by size class, so a step's buffers come
// back from a free list instead of cuMemAlloc, which synchronises the
// device. Small requests round up to a power of two, large ones to a
// multiple of 2 MiB, so a freed block fits the next request of its class.
type allocator struct {
	mu    sync.Mutex // weights' copies are freed outside Device.Lock
	dev   *Device
	free  map[int][]Ptr
	size  map[Ptr]int
	held  int64 // bytes from the driver: in use or cached
	inUse int64
}

const (
	minBlock   = 256
	largeBlock = 1 << 20
	largeGrain = 2 << 20
)

// sizeClass is the bytes a request of n bytes takes.
func sizeClass(n int) int {
	switch {
	case n <= minBlock:
		return minBlock
	case n <= largeBlock:
		return 1 << bits.Len(uint(n-1))
	default:
		return (n + largeGrain - 1) / largeGrain * largeGrain
	}
}

func (a *allocator) get(n int) (Ptr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n < 0 {
		return 0, fmt.Errorf("allocating %d bytes of device memory", n)
	}
	c := sizeClass(n)
	if l := a.free[c]; len(l) > 0 {
		p := l[len(l)-1]
		a.free[c] = l[:len(l)-1]
		a.inUse += int64(c)
		return p, nil
	}
	var p Ptr
	err := a.dev.d.check("cuMemAlloc", call(a.dev.d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(c)))
	if err != nil {
		// Cached blocks of other classes may be what the driver lacks.
		if a.trimLocked() == nil {
			err = a.dev.d.check("cuMemAlloc", call(a.dev.d.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(c)))
		}
		if err != nil {
			return 0, fmt.Errorf("allocating %d bytes on %s (%d held): %w", c, a.dev.Name, a.held, err)
		}
	}
	if a.size == nil {
		a.size, a.free = map[Ptr]int{}, map[int][]Ptr{}
	}
	a.size[p] = c
	a.held += int64(c)
	a.inUse += int64(c)
	return p, nil
}

func (a *allocator) put(p Ptr) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.size[p]
	if !ok {
		panic(fmt.Sprintf("cuda: freeing %#x, which the allocator did not give", uintptr(p)))
	}
	a.free[c] = append(a.free[c], p)
	a.inUse -= int64(c)
}

// trim frees every cached block.
func (a *allocator) trim() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.trimLocked()
}

func (a *allocator) trimLocked() error {
	var first error
	for c, l := range a.free {
		for _, p := range l {
			if err := a.dev.d.check("cuMemFree", call(a.dev.d.cuMemFree, uintptr(p))); err != nil && first == nil {
				first = err
			}
			delete(a.size, p)
			a.held -= int64(c)
		}
		delete(a.free, c)
	}
	return first
}
