package cuda

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Ptr is an address in a device's memory (a CUdeviceptr).
type Ptr uintptr

// Add is p advanced by n bytes.
func (p Ptr) Add(n int) Ptr { return p + Ptr(n) }

// Device is one GPU: its primary context, one stream that every launch
// and copy of gozoo goes to (so their order is the program's), a caching
// allocator, the loaded kernel modules and a cuBLAS handle. Devices are
// shared by every session of the process; a session's forward holds
// Lock while it issues work.
type Device struct {
	Ordinal int
	Name    string
	Memory  int64 // total bytes
	SMs     int
	// CC is the compute capability, major*10+minor (90 on an H100).
	CC int

	d      *driver
	handle int32
	ctx    uintptr
	stream uintptr

	mu      sync.Mutex
	alloc   allocator
	modules map[string]uintptr
	funcs   map[*Kernel]uintptr
	blas    *blas
	pin     runtime.Pinner
}

var (
	devicesMu sync.Mutex
	devices   = map[int]*Device{}
)

// Open returns device ordinal, opening it the first time: the driver is
// loaded, the primary context retained and a stream created. On a machine
// without a driver the error wraps ErrNoDriver and names libcuda.
func Open(ordinal int) (*Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	devicesMu.Lock()
	defer devicesMu.Unlock()
	if dev, ok := devices[ordinal]; ok {
		return dev, nil
	}
	dev, err := openDevice(loaded, ordinal)
	if err != nil {
		return nil, fmt.Errorf("opening CUDA device %d: %w", ordinal, err)
	}
	devices[ordinal] = dev
	return dev, nil
}

// Device attributes (CUdevice_attribute).
const (
	attrSMs      = 16
	attrCCMajor  = 75
	attrCCMinor  = 76
	attrMemClock = 36 // kHz
	attrBusWidth = 37 // bits
)

func openDevice(d *driver, ordinal int) (*Device, error) {
	var n int32
	if err := d.check("cuDeviceGetCount", call(d.cuDeviceGetCount, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= int(n) {
		return nil, fmt.Errorf("no device %d: the driver sees %d", ordinal, n)
	}
	var dev int32
	if err := d.check("cuDeviceGet", call(d.cuDeviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	out := &Device{Ordinal: ordinal, d: d, handle: dev, modules: map[string]uintptr{}, funcs: map[*Kernel]uintptr{}}
	name := make([]byte, 256)
	if err := d.check("cuDeviceGetName", call(d.cuDeviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(dev))); err != nil {
		return nil, err
	}
	out.Name = goString(&name[0])
	var mem uint64
	if err := d.check("cuDeviceTotalMem", call(d.cuDeviceTotalMem, uintptr(unsafe.Pointer(&mem)), uintptr(dev))); err != nil {
		return nil, err
	}
	out.Memory = int64(mem)
	attr := func(a int) (int, error) {
		var v int32
		err := d.check("cuDeviceGetAttribute", call(d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev)))
		return int(v), err
	}
	var err error
	if out.SMs, err = attr(attrSMs); err != nil {
		return nil, err
	}
	major, err := attr(attrCCMajor)
	if err != nil {
		return nil, err
	}
	minor, err := attr(attrCCMinor)
	if err != nil {
		return nil, err
	}
	out.CC = major*10 + minor
	if err := d.check("cuDevicePrimaryCtxRetain", call(d.cuDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(&out.ctx)), uintptr(dev))); err != nil {
		return nil, err
	}
	defer out.enter()()
	const nonBlocking = 1
	if err := d.check("cuStreamCreate", call(d.cuStreamCreate, uintptr(unsafe.Pointer(&out.stream)), nonBlocking)); err != nil {
		return nil, err
	}
	out.alloc.dev = out
	return out, nil
}

// enter makes the device's context current on this OS thread, which it
// locks until the returned function runs: the driver keeps the current
// context per thread, and goroutines move between threads.
func (dev *Device) enter() func() {
	runtime.LockOSThread()
	call(dev.d.cuCtxSetCurrent, dev.ctx)
	return runtime.UnlockOSThread
}

// Lock takes the device for a sequence of launches and copies, with its
// context current; Unlock gives it back. Every method below but Lock and
// Unlock must be called between them.
func (dev *Device) Lock() {
	dev.mu.Lock()
	runtime.LockOSThread()
	call(dev.d.cuCtxSetCurrent, dev.ctx)
}

// Unlock ends what Lock began.
func (dev *Device) Unlock() {
	runtime.UnlockOSThread()
	dev.mu.Unlock()
}

// Bandwidth is the card's memory bandwidth in bytes a second, from its
// memory clock and bus width (double data rate), or 0 if unknown.
func (dev *Device) Bandwidth() float64 {
	get := func(a int) int {
		var v int32
		if call(dev.d.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(dev.handle)) != 0 {
			return 0
		}
		return int(v)
	}
	return 2 * float64(get(attrMemClock)) * 1e3 * float64(get(attrBusWidth)) / 8
}

// Alloc returns n bytes of device memory from the caching allocator.
func (dev *Device) Alloc(n int) (Ptr, error) { return dev.alloc.get(n) }

// Free returns memory from Alloc to the allocator's cache.
func (dev *Device) Free(p Ptr) { dev.alloc.put(p) }

// Trim gives the allocator's cached blocks back to the driver.
func (dev *Device) Trim() error { return dev.alloc.trim() }

// Held is the bytes the allocator holds: in use and cached.
func (dev *Device) Held() int64 { return dev.alloc.held }

// Upload copies host bytes to dst, in stream order. The host memory may
// be reused when it returns.
func (dev *Device) Upload(dst Ptr, src unsafe.Pointer, n int) error {
	if n == 0 {
		return nil
	}
	err := dev.d.check("cuMemcpyHtoDAsync", call(dev.d.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), dev.stream))
	if err == nil {
		// A copy from pageable memory may still read it after returning.
		err = dev.Sync()
	}
	return err
}

// Download copies n bytes from src to host memory, waiting for the work
// before it on the stream.
func (dev *Device) Download(dst unsafe.Pointer, src Ptr, n int) error {
	if n == 0 {
		return nil
	}
	if err := dev.d.check("cuMemcpyDtoHAsync", call(dev.d.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), dev.stream)); err != nil {
		return err
	}
	return dev.Sync()
}

// Copy copies n bytes between device buffers, in stream order.
func (dev *Device) Copy(dst, src Ptr, n int) error {
	if n == 0 {
		return nil
	}
	return dev.d.check("cuMemcpyDtoDAsync", call(dev.d.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), dev.stream))
}

// Zero sets n bytes at p to zero, in stream order.
func (dev *Device) Zero(p Ptr, n int) error {
	if n == 0 {
		return nil
	}
	return dev.d.check("cuMemsetD8Async", call(dev.d.cuMemsetD8Async, uintptr(p), 0, uintptr(n), dev.stream))
}

// Sync waits for everything issued on the device's stream.
func (dev *Device) Sync() error {
	return dev.d.check("cuStreamSynchronize", call(dev.d.cuStreamSynchronize, dev.stream))
}

// Free and total device memory, as the driver reports them.
func (dev *Device) MemInfo() (free, total int64, err error) {
	var f, t uint64
	err = dev.d.check("cuMemGetInfo", call(dev.d.cuMemGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t))))
	return int64(f), int64(t), err
}

// Event marks a point in the stream, for timing.
type Event struct {
	dev *Device
	e   uintptr
}

// Record records a new event at the stream's current end.
func (dev *Device) Record() (*Event, error) {
	ev := &Event{dev: dev}
	if err := dev.d.check("cuEventCreate", call(dev.d.cuEventCreate, uintptr(unsafe.Pointer(&ev.e)), 0)); err != nil {
		return nil, err
	}
	if err := dev.d.check("cuEventRecord", call(dev.d.cuEventRecord, ev.e, dev.stream)); err != nil {
		ev.Release()
		return nil, err
	}
	return ev, nil
}

// Since is the time in milliseconds from start to e, once e has passed.
func (e *Event) Since(start *Event) (float32, error) {
	if err := e.dev.d.check("cuEventSynchronize", call(e.dev.d.cuEventSynchronize, e.e)); err != nil {
		return 0, err
	}
	var ms float32
	err := e.dev.d.check("cuEventElapsedTime", call(e.dev.d.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start.e, e.e))
	return ms, err
}

// Release destroys the event.
func (e *Event) Release() {
	if e.e != 0 {
		call(e.dev.d.cuEventDestroy, e.e)
		e.e = 0
	}
}

// Graph is a captured sequence of launches, replayed as one.
type Graph struct {
	dev  *Device
	g    uintptr
	exec uintptr
}

// Capture records the launches and device copies fn issues on the stream
// into a graph instead of running them. fn must not upload or download.
func (dev *Device) Capture(fn func() error) (*Graph, error) {
	const relaxed = 2 // CU_STREAM_CAPTURE_MODE_RELAXED: other threads may allocate
	if err := dev.d.check("cuStreamBeginCapture", call(dev.d.cuStreamBeginCapture, dev.stream, relaxed)); err != nil {
		return nil, err
	}
	ferr := fn()
	g := &Graph{dev: dev}
	err := dev.d.check("cuStreamEndCapture", call(dev.d.cuStreamEndCapture, dev.stream, uintptr(unsafe.Pointer(&g.g))))
	if ferr != nil {
		g.Release()
		return nil, ferr
	}
	if err != nil {
		g.Release()
		return nil, err
	}
	if err := dev.d.check("cuGraphInstantiate", call(dev.d.cuGraphInstantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0)); err != nil {
		g.Release()
		return nil, err
	}
	return g, nil
}

// Launch replays the graph on the stream.
func (g *Graph) Launch() error {
	return g.dev.d.check("cuGraphLaunch", call(g.dev.d.cuGraphLaunch, g.exec, g.dev.stream))
}

// Release destroys the graph.
func (g *Graph) Release() {
	if g.exec != 0 {
		call(g.dev.d.cuGraphExecDestroy, g.exec)
		g.exec = 0
	}
	if g.g != 0 {
		call(g.dev.d.cuGraphDestroy, g.g)
		g.g = 0
	}
}

// ParseDevice opens the device a command line names: "cuda" or "cuda:N"
// (N the ordinal). "" and "cpu" are the CPU, returned as nil.
func ParseDevice(s string) (*Device, error) {
	switch {
	case s == "" || s == "cpu":
		return nil, nil
	case s == "cuda":
		return Open(0)
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(s[len("cuda:"):])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
		}
		return Open(n)
	}
	return nil, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
}
