package cudaemu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/gozoo/gozoo/cuda"
)

// Base is the device address of an arena's first byte: the emulator
// process maps the arena there, so a device pointer is a host pointer in
// it. Far below where Linux places mappings on x86-64 and arm64 (near the
// top of the 47- or 48-bit address space) and far above the heap.
const Base cuda.Ptr = 0x7e0000000000

// DefaultSize is the arena of Open(0): virtual memory, backed only where
// it is used.
const DefaultSize = 1 << 30

const (
	align   = 256
	redZone = 256  // bytes at least after each allocation that no call may write
	redByte = 0xfe // their fill: -1.7e38 as a float32 or BF16, NaN as F16

	poison = 0xff // a new allocation's fill: NaN floats, -1 ints
)

// Device is emulated device memory with its emulator process: a
// cuda.Backend. Run executes the launches at once, in the emulator
// process, on the whole arena; Sync returns what went wrong since the
// last one (a bad Free). Close ends the process.
type Device struct {
	e   *Emulator
	key string
	mu  sync.Mutex // Lock and Unlock

	// st guards what follows: the allocator is also used outside Lock
	// (weights' copies are freed under their parameters' locks).
	st     sync.Mutex
	arena  *arena
	size   int
	allocs []allocation // by offset
	free   []span       // by offset
	used   int
	err    error // a misuse to report at the next Run or Sync
	closed bool

	proc   *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *os.File // an unlinked file: exec copies into no goroutine
	job    bytes.Buffer
	args   cuda.Args
	calls  int
}

type span struct{ off, n int }

// allocation is n bytes at off, then red zone up to off+span.
type allocation struct{ off, n, span int }

var devices atomic.Int64

// Open makes a device with an arena of size bytes (DefaultSize if 0).
func (e *Emulator) Open(size int) (*Device, error) {
	if size <= 0 {
		size = DefaultSize
	}
	size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	a, err := newArena(size)
	if err != nil {
		return nil, fmt.Errorf("the CUDA emulator's %d MiB arena: %w", size>>20, err)
	}
	d := &Device{e: e, arena: a, size: size, free: []span{{0, size}}, key: fmt.Sprintf("cudaemu:%d", devices.Add(1))}
	return d, nil
}

// New builds the emulator and opens a device of DefaultSize for t, closed
// when t ends; t is skipped where the emulator cannot run.
func New(t testing.TB) *Device {
	t.Helper()
	d, err := Build(t).Open(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Close ends the emulator process and unmaps the arena. Later calls fail
// (Free does nothing).
func (d *Device) Close() error {
	d.st.Lock()
	defer d.st.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.stop()
	return d.arena.close()
}

// String names the device in errors.
func (d *Device) String() string { return "the CUDA emulator (" + d.key + ")" }

// Key names the device's copies of weights: one per device.
func (d *Device) Key() string { return d.key }

// Lock implements cuda.Backend.
func (d *Device) Lock() { d.mu.Lock() }

// Unlock implements cuda.Backend.
func (d *Device) Unlock() { d.mu.Unlock() }

// MemInfo is the arena's bytes not allocated, and its size.
func (d *Device) MemInfo() (free, total int64, err error) {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("MemInfo")
	return int64(d.size - d.used), int64(d.size), nil
}

// Alloc takes n bytes from the arena, first fit, poisoned.
func (d *Device) Alloc(n int) (cuda.Ptr, error) {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Alloc")
	if d.closed {
		return 0, fmt.Errorf("%s is closed", d)
	}
	if n < 0 {
		return 0, fmt.Errorf("allocating %d bytes of device memory", n)
	}
	need := (max(n, 1)+align-1)&^(align-1) + redZone
	for i, f := range d.free {
		if f.n < need {
			continue
		}
		if f.n == need {
			d.free = append(d.free[:i], d.free[i+1:]...)
		} else {
			d.free[i] = span{f.off + need, f.n - need}
		}
		a := allocation{off: f.off, n: n, span: need}
		j := sort.Search(len(d.allocs), func(j int) bool { return d.allocs[j].off > a.off })
		d.allocs = append(d.allocs, allocation{})
		copy(d.allocs[j+1:], d.allocs[j:])
		d.allocs[j] = a
		d.used += need
		mem := d.arena.mem
		fill(mem[a.off:a.off+n], poison)
		fill(mem[a.off+n:a.off+need], redByte)
		return Base + cuda.Ptr(a.off), nil
	}
	return 0, fmt.Errorf("%s: out of memory: %d bytes asked, %d of the arena's %d MiB free (in pieces); open a larger arena",
		d, n, d.size-d.used, d.size>>20)
}

func fill(b []byte, v byte) {
	if len(b) == 0 {
		return
	}
	b[0] = v
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}

// Free returns an allocation to the arena. Freeing what is not an
// allocation is reported by the next Run or Sync.
func (d *Device) Free(p cuda.Ptr) {
	d.st.Lock()
	defer d.st.Unlock()
	if d.closed {
		return
	}
	off := int(p - Base)
	j := sort.Search(len(d.allocs), func(j int) bool { return d.allocs[j].off >= off })
	if p < Base || j == len(d.allocs) || d.allocs[j].off != off {
		d.fail(fmt.Errorf("Free(%#x): not an allocation (freed twice?)", p))
		return
	}
	a := d.allocs[j]
	d.allocs = append(d.allocs[:j], d.allocs[j+1:]...)
	d.used -= a.span
	s := span{a.off, a.span}
	i := sort.Search(len(d.free), func(i int) bool { return d.free[i].off > s.off })
	d.free = append(d.free, span{})
	copy(d.free[i+1:], d.free[i:])
	d.free[i] = s
	if i+1 < len(d.free) && d.free[i].off+d.free[i].n == d.free[i+1].off {
		d.free[i].n += d.free[i+1].n
		d.free = append(d.free[:i+1], d.free[i+2:]...)
	}
	if i > 0 && d.free[i-1].off+d.free[i-1].n == d.free[i].off {
		d.free[i-1].n += d.free[i].n
		d.free = append(d.free[:i], d.free[i+1:]...)
	}
}

// locked records a misuse when the device is not locked: cuda.Backend's
// calls other than Lock, Unlock, String, Key and Free are made between
// Lock and Unlock (a Device's context is current only there).
func (d *Device) locked(call string) {
	if d.mu.TryLock() {
		d.mu.Unlock()
		d.fail(fmt.Errorf("%s called without the device's lock", call))
	}
}

func (d *Device) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// find returns the allocation that holds [p, p+n), or an error that says
// what is wrong with the range.
func (d *Device) find(p cuda.Ptr, n int) (allocation, error) {
	if d.closed {
		return allocation{}, fmt.Errorf("%s is closed", d)
	}
	off := int(p - Base)
	if p < Base || off >= d.size || n < 0 {
		return allocation{}, fmt.Errorf("%d bytes at %#x: outside the arena", n, p)
	}
	j := sort.Search(len(d.allocs), func(j int) bool { return d.allocs[j].off > off }) - 1
	if j < 0 || off > d.allocs[j].off+d.allocs[j].n {
		return allocation{}, fmt.Errorf("%d bytes at %#x: not in an allocation (freed?)", n, p)
	}
	a := d.allocs[j]
	if off+n > a.off+a.n {
		return a, fmt.Errorf("%d bytes at offset %d of a %d-byte allocation at %#x: past its end", n, off-a.off, a.n, Base+cuda.Ptr(a.off))
	}
	return a, nil
}

// Bytes is the n bytes at p, in the arena: what the device holds there.
// It panics unless they lie in one allocation.
func (d *Device) Bytes(p cuda.Ptr, n int) []byte {
	d.st.Lock()
	defer d.st.Unlock()
	if _, err := d.find(p, n); err != nil {
		panic(fmt.Sprintf("cudaemu: %v", err))
	}
	off := int(p - Base)
	return d.arena.mem[off : off+n : off+n]
}

// Float32s is the n float32s at p.
func (d *Device) Float32s(p cuda.Ptr, n int) []float32 {
	b := d.Bytes(p, 4*n)
	out := make([]float32, n)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), 4*n), b)
	return out
}

// Zero implements cuda.Backend.
func (d *Device) Zero(p cuda.Ptr, n int) error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Zero")
	if _, err := d.find(p, n); err != nil {
		return fmt.Errorf("%s: Zero: %w", d, err)
	}
	clear(d.arena.mem[p-Base:][:n])
	return nil
}

// Copy implements cuda.Backend.
func (d *Device) Copy(dst, src cuda.Ptr, n int) error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Copy")
	if _, err := d.find(dst, n); err != nil {
		return fmt.Errorf("%s: Copy to: %w", d, err)
	}
	if _, err := d.find(src, n); err != nil {
		return fmt.Errorf("%s: Copy from: %w", d, err)
	}
	copy(d.arena.mem[dst-Base:][:n], d.arena.mem[src-Base:][:n])
	return nil
}

// Upload implements cuda.Backend.
func (d *Device) Upload(dst cuda.Ptr, src unsafe.Pointer, n int) error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Upload")
	if _, err := d.find(dst, n); err != nil {
		return fmt.Errorf("%s: Upload: %w", d, err)
	}
	if n > 0 {
		copy(d.arena.mem[dst-Base:][:n], unsafe.Slice((*byte)(src), n))
	}
	return nil
}

// Download implements cuda.Backend.
func (d *Device) Download(dst unsafe.Pointer, src cuda.Ptr, n int) error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Download")
	if _, err := d.find(src, n); err != nil {
		return fmt.Errorf("%s: Download: %w", d, err)
	}
	if n > 0 {
		copy(unsafe.Slice((*byte)(dst), n), d.arena.mem[src-Base:][:n])
	}
	return nil
}

// Allocations is the number of live allocations and their bytes.
func (d *Device) Allocations() (n int, bytes int64) {
	d.st.Lock()
	defer d.st.Unlock()
	for _, a := range d.allocs {
		bytes += int64(a.n)
	}
	return len(d.allocs), bytes
}

// Calls is the number of launches and products run so far.
func (d *Device) Calls() int {
	d.st.Lock()
	defer d.st.Unlock()
	return d.calls
}

// Sync returns a misuse (a bad Free) since the last Run or Sync: Run has
// finished its calls when it returns.
func (d *Device) Sync() error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Sync")
	err := d.err
	d.err = nil
	return err
}

// Run runs the calls' launches and products in order in the emulator
// process, after checking each against its declaration and its pointers
// against the allocations; then it checks every allocation's red zone.
// Host steps (After) are the caller's.
func (d *Device) Run(calls ...cuda.Call) error {
	d.st.Lock()
	defer d.st.Unlock()
	d.locked("Run")
	if err := d.err; err != nil {
		d.err = nil
		return err
	}
	if d.closed {
		return fmt.Errorf("%s is closed", d)
	}
	d.job.Reset()
	u64 := func(v uint64) { binary.Write(&d.job, binary.LittleEndian, v) }
	u64(0) // the number of calls, below
	n := 0
	for ci, c := range calls {
		if c.K == nil && c.Gemm == nil {
			continue
		}
		if err := c.Check(); err != nil {
			return fmt.Errorf("%s: call %d: %w", d, ci, err)
		}
		n++
		if g := c.Gemm; g != nil {
			in := 4
			if g.Half != 0 {
				in = 2
			}
			for _, r := range []struct {
				what string
				p    cuda.Ptr
				n    int
			}{{"y", g.Y, 4 * g.T * g.N}, {"x", g.X, in * g.T * g.K}, {"w", g.W, in * g.N * g.K}} {
				if _, err := d.find(r.p, r.n); err != nil {
					return fmt.Errorf("%s: call %d: gemm [%d,%d]·[%d,%d]ᵀ: %s: %w", d, ci, g.T, g.K, g.N, g.K, r.what, err)
				}
			}
			u64(4)
			d.job.WriteString("gemm")
			for _, v := range []uint64{uint64(g.Y), uint64(g.X), uint64(g.W), uint64(g.T), uint64(g.N), uint64(g.K), uint64(g.Half)} {
				u64(v)
			}
			continue
		}
		if err := c.K.Pack(&d.args, c.Args...); err != nil {
			return err
		}
		for i, kind := range c.K.Params {
			if p := cuda.Ptr(d.args.Slot(i)); kind == 'p' && p != 0 {
				if _, err := d.find(p, 0); err != nil {
					return fmt.Errorf("%s: call %d: kernel %s parameter %d: %w", d, ci, c.K.Name, i, err)
				}
			}
		}
		u64(uint64(len(c.K.Name)))
		d.job.WriteString(c.K.Name)
		for _, v := range []int{c.Grid.X, c.Grid.Y, c.Grid.Z, c.Block.X, c.Block.Y, c.Block.Z, c.Shared, len(c.K.Params)} {
			u64(uint64(v))
		}
		d.job.WriteString(c.K.Params)
		for i := range c.K.Params {
			u64(d.args.Slot(i))
		}
	}
	if n == 0 {
		return nil
	}
	binary.LittleEndian.PutUint64(d.job.Bytes(), uint64(n))
	d.calls += n
	if err := d.exec(); err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	return d.checkRed(calls)
}

// exec sends the job to the emulator process, started if it is not
// running, and waits for its answer.
func (d *Device) exec() error {
	if d.proc == nil {
		if err := d.start(); err != nil {
			return err
		}
	}
	_, err := d.stdin.Write(d.job.Bytes())
	var ok [8]byte
	if err == nil {
		_, err = io.ReadFull(d.stdout, ok[:])
	}
	if err != nil {
		// The process ended (a kernel's fault, a deadlock): its message
		// says why. The next Run starts another on the same arena.
		f := d.stderr
		d.stderr = nil // kept open for the message
		werr := d.stop()
		var msg []byte
		if _, serr := f.Seek(0, io.SeekStart); serr == nil {
			msg, _ = io.ReadAll(io.LimitReader(f, 64<<10))
		}
		f.Close()
		if werr != nil {
			err = werr
		}
		return fmt.Errorf("emulator: %v\n%s", err, strings.TrimSpace(string(msg)))
	}
	return nil
}

func (d *Device) start() error {
	cmd := exec.Command(d.e.bin, fmt.Sprint(uint64(Base)), fmt.Sprint(d.size))
	cmd.ExtraFiles = d.arena.files()
	// Pipes and files only: exec starts no goroutines to copy, so none
	// outlives a test (goleak) while the process waits for jobs.
	stderr, err := os.CreateTemp("", "gozoo-cudaemu-*.stderr")
	if err != nil {
		return err
	}
	os.Remove(stderr.Name())
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		stderr.Close()
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		stderr.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		stderr.Close()
		return fmt.Errorf("starting the emulator: %w", err)
	}
	d.stderr = stderr
	d.proc, d.stdin, d.stdout = cmd, in, bufio.NewReader(out)
	return nil
}

// stop ends the process: its input closes, so it exits.
func (d *Device) stop() error {
	if d.proc == nil {
		return nil
	}
	d.stdin.Close()
	err := d.proc.Wait()
	d.proc = nil
	if d.stderr != nil {
		d.stderr.Close()
		d.stderr = nil
	}
	return err
}

// checkRed checks that no call wrote past its buffers: every
// allocation's red zone holds its fill.
func (d *Device) checkRed(calls []cuda.Call) error {
	mem := d.arena.mem
	for ai, a := range d.allocs {
		red := mem[a.off+a.n : a.off+a.span]
		if bytes.Equal(red, redFill[:len(red)]) {
			continue
		}
		i := bytesNot(red, redByte)
		j := len(red) - 1
		for red[j] == redByte {
			j--
		}
		fill(red, redByte) // so that the device stays usable
		p := Base + cuda.Ptr(a.off)
		var who []string
		for _, c := range calls {
			if c.Gemm != nil && d.allocs[ai].off == int(c.Gemm.Y-Base) {
				who = append(who, "gemm")
			}
			if c.K == nil {
				continue
			}
			for k, v := range c.Args {
				if q, ok := v.(cuda.Ptr); ok && q >= p && q <= p.Add(a.n) {
					who = append(who, fmt.Sprintf("%s (parameter %d)", c.K.Name, k))
				}
			}
		}
		return fmt.Errorf("%s: a call wrote past the end of the %d-byte allocation at %#x (bytes %d to %d after it changed); calls given pointers into it: %s",
			d, a.n, p, i, j, strings.Join(who, ", "))
	}
	return nil
}

// redFill is a red zone's fill, as long as the longest.
var redFill = bytes.Repeat([]byte{redByte}, align+redZone)

// bytesNot is the index of the first byte of b that is not v, or -1.
func bytesNot(b []byte, v byte) int {
	for i, c := range b {
		if c != v {
			return i
		}
	}
	return -1
}

var _ cuda.Backend = (*Device)(nil)
