package cuda

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// TestNoDriver: on a machine without a GPU, opening a device fails with
// an error that wraps ErrNoDriver and names libcuda (the library is
// missing, or present without a device).
func TestNoDriver(t *testing.T) {
	dev, err := Open(0)
	if err == nil {
		t.Skipf("a CUDA device is present: %s", dev.Name)
	}
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "libcuda") {
		t.Errorf("Open(0) = %v, want ErrNoDriver naming libcuda", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error spans lines: %q", err)
	}
}

// TestLibrarySearch: the folders of GOZOO_CUDA_LIBS come first for each
// name, then dlopen's own search, then the usual places; a library found
// nowhere gives an error naming it.
func TestLibrarySearch(t *testing.T) {
	t.Setenv(LibsEnv, "/opt/a:/opt/b")
	got := candidates([]string{"libx.so.2", "libx.so"})
	want := []string{"/opt/a/libx.so.2", "/opt/b/libx.so.2", "libx.so.2"}
	if len(got) != 2*(3+len(libDirs)) || strings.Join(got[:3], " ") != strings.Join(want, " ") || got[3] != libDirs[0]+"/libx.so.2" {
		t.Errorf("candidates = %v", got)
	}
	_, err := openLibrary("a test library", []string{"libgozoo-missing.so.7"})
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "libgozoo-missing.so.7") || !strings.Contains(err.Error(), LibsEnv) {
		t.Errorf("openLibrary = %v", err)
	}
}

func TestPackArgs(t *testing.T) {
	k := &Kernel{Module: "m", Name: "k", Params: "pifu"}
	var a Args
	if err := k.Pack(&a, Ptr(0xdead0000), -3, float32(1.5), uint32(7)); err != nil {
		t.Fatal(err)
	}
	want := []uint64{0xdead0000, uint64(uint32(0xfffffffd)), uint64(math.Float32bits(1.5)), 7}
	for i, w := range want {
		if a.Slot(i) != w {
			t.Errorf("slot %d = %#x, want %#x", i, a.Slot(i), w)
		}
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{Ptr(1), 1, float32(1)}, "takes 4 parameters"},
		{[]any{1, 1, float32(1), 1}, "parameter 0"},
		{[]any{Ptr(1), Ptr(1), float32(1), 1}, "parameter 1"},
		{[]any{Ptr(1), 1 << 40, float32(1), 1}, "does not fit an int32"},
		{[]any{Ptr(1), 1, 2, 1}, "parameter 2"},
		{[]any{Ptr(1), 1, float32(1), -1}, "does not fit a uint32"},
		{[]any{Ptr(1), 1, float32(1), "x"}, "not a kernel parameter"},
	} {
		if err := k.Pack(&a, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Pack(%v) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestCallCheck(t *testing.T) {
	k := &Kernel{Module: "m", Name: "k", Params: "p"}
	for _, tc := range []struct {
		c    Call
		want string
	}{
		{Call{K: k, Grid: D1(1), Block: D1(256), Args: []any{Ptr(1)}}, ""},
		{Call{K: k, Grid: D1(0), Block: D1(256), Args: []any{Ptr(1)}}, "must be positive"},
		{Call{K: k, Grid: D1(1), Block: Dim3{64, 32, 1}, Args: []any{Ptr(1)}}, "more than 1024"},
		{Call{K: k, Grid: D1(1), Block: D1(32), Shared: 1 << 20, Args: []any{Ptr(1)}}, "shared memory"},
		{Call{Gemm: &Gemm{Y: 1, X: 2, W: 3, T: 1, N: 4, K: 8}}, ""},
		{Call{Gemm: &Gemm{Y: 1, X: 2, W: 3, T: 0, N: 4, K: 8}}, "gemm"},
		{Call{}, "no kernel"},
	} {
		err := tc.c.Check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Check(%+v) = %v, want %q", tc.c, err, tc.want)
		}
	}
}

func TestSizeClass(t *testing.T) {
	for _, tc := range [][2]int{{1, 256}, {256, 256}, {257, 512}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {5 << 20, 6 << 20}} {
		if got := sizeClass(tc[0]); got != tc[1] {
			t.Errorf("sizeClass(%d) = %d, want %d", tc[0], got, tc[1])
		}
	}
}

func TestParseDevice(t *testing.T) {
	for _, s := range []string{"", "cpu"} {
		if d, err := ParseDevice(s); d != nil || err != nil {
			t.Errorf("ParseDevice(%q) = %v, %v", s, d, err)
		}
	}
	for _, s := range []string{"gpu", "cuda:x", "cuda:-1"} {
		if _, err := ParseDevice(s); err == nil || !strings.Contains(err.Error(), "want cpu, cuda or cuda:N") {
			t.Errorf("ParseDevice(%q) = %v", s, err)
		}
	}
}
