package cudaemu

import (
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/gozoo/gozoo/cuda"
)

func copyCall(dst, src cuda.Ptr, n int) cuda.Call {
	return cuda.Call{K: cuda.Copy32, Grid: cuda.D1(cuda.Blocks(n, 256)), Block: cuda.D1(256), Args: []any{dst, src, n}}
}

func upload(t *testing.T, d *Device, v []float32) cuda.Ptr {
	t.Helper()
	p, err := d.Alloc(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(p, unsafe.Pointer(unsafe.SliceData(v)), 4*len(v)); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDevice: copies and a launch on the arena, and the allocator's
// reuse of what is freed.
func TestDevice(t *testing.T) {
	d := New(t)
	d.Lock()
	defer d.Unlock()
	src := upload(t, d, []float32{1, 2, 3, 4, 5})
	dst, err := d.Alloc(20)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Float32s(dst, 5); slices.ContainsFunc(got, func(v float32) bool { return v == v }) {
		t.Errorf("a new allocation holds %v, want NaNs", got)
	}
	if err := d.Run(copyCall(dst, src, 5)); err != nil {
		t.Fatal(err)
	}
	if got := d.Float32s(dst, 5); !slices.Equal(got, []float32{1, 2, 3, 4, 5}) {
		t.Errorf("copy32 gave %v", got)
	}
	if err := d.Zero(dst.Add(4), 8); err != nil {
		t.Fatal(err)
	}
	if err := d.Copy(dst.Add(12), src, 8); err != nil {
		t.Fatal(err)
	}
	if got := d.Float32s(dst, 5); !slices.Equal(got, []float32{1, 0, 0, 1, 2}) {
		t.Errorf("after Zero and Copy: %v", got)
	}
	d.Free(src)
	d.Free(dst)
	if n, _ := d.Allocations(); n != 0 {
		t.Errorf("%d allocations after freeing both", n)
	}
	if p, err := d.Alloc(1000); err != nil || p != Base {
		t.Errorf("Alloc after freeing everything: %#x, %v; want the arena's start", p, err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestDeviceMisuse: what a GPU would take silently, or crash on, is an
// error that says what is wrong.
func TestDeviceMisuse(t *testing.T) {
	d := New(t)
	d.Lock()
	src := upload(t, d, []float32{1, 2, 3, 4, 5})
	dst, _ := d.Alloc(16)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"upload past the end", d.Upload(dst, unsafe.Pointer(&[5]float32{}), 20), "past its end"},
		{"copy from outside", d.Copy(dst, Base-64, 4), "outside the arena"},
		{"a kernel that writes past the end", d.Run(copyCall(dst, src, 5)), "wrote past the end of the 16-byte allocation at 0x7e0000000200 (bytes 0 to 3 after it changed)"},
		{"a pointer to freed memory", func() error { d.Free(src); return d.Run(copyCall(dst, src, 4)) }(), "not in an allocation"},
		{"a double free", func() error { d.Free(src); return d.Sync() }(), "not an allocation"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, c.err, c.want)
		}
	}
	d.Unlock()
	d.Alloc(4)
	if err := d.Sync(); err == nil || !strings.Contains(err.Error(), "without the device's lock") {
		t.Errorf("Alloc without the lock: %v", err)
	}
}

// TestDeviceFault: a kernel's fault ends the emulator process with a
// message naming the kernel; the next Run starts another on the same
// memory.
func TestDeviceFault(t *testing.T) {
	d := New(t)
	d.Lock()
	defer d.Unlock()
	src := upload(t, d, []float32{1, 2, 3, 4})
	dst, _ := d.Alloc(16)
	rows, _ := d.Alloc(4)
	row := int32(2000)
	if err := d.Upload(rows, unsafe.Pointer(&row), 4); err != nil {
		t.Fatal(err)
	}
	// Row 2000 of rows of 2^20 floats: 8 GiB past h, outside the arena.
	err := d.Run(cuda.Call{K: cuda.PickRows, Grid: cuda.D1(1), Block: cuda.D1(1), Args: []any{dst, src, rows, 1, 1 << 30, 1 << 20}})
	if err == nil || !strings.Contains(err.Error(), "segmentation fault in pick_rows block (0,0,0) thread (0,0,0)") {
		t.Fatalf("a fault: %v", err)
	}
	if err := d.Run(copyCall(dst, src, 4)); err != nil {
		t.Fatal(err)
	}
	if got := d.Float32s(dst, 4); !slices.Equal(got, []float32{1, 2, 3, 4}) {
		t.Errorf("after a restart: %v", got)
	}
}
