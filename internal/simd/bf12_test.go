package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
)

// bf16Matrix is out rows of in N(0, 0.02) draws as BF16 bits, with the
// values a table of 15 high bytes cannot hold in row 1 (21 distinct high
// bytes, 6 of them once: exceptions), and in row 2 the special values:
// zeros, infinities, NaNs, subnormals, the largest finite values.
func bf16Matrix(r *rand.Rand, out, in int) []uint16 {
	w := make([]uint16, out*in)
	for i := range w {
		w[i] = uint16(math.Float32bits(float32(r.NormFloat64()*0.02)) >> 16)
	}
	if out > 2 {
		row := w[in : 2*in]
		for i := range row {
			row[i] = uint16(0x3c+i%15)<<8 | uint16(i&0xff) // 15 frequent high bytes
		}
		for i, h := range []uint16{0x50, 0xd0, 0x51, 0x52, 0x80, 0x01} {
			row[7*i+3] = h<<8 | 0x35 // 6 more, once each
		}
		special := []uint16{0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x7f81, 0x0001, 0x8001, 0x007f, 0x7f7f, 0xff7f}
		copy(w[2*in:], special)
	}
	return w
}

// TestBF12Pack checks that packing loses nothing: every weight widens to
// its BF16 bits, on the kernel and in Go, whatever the row range, and the
// exceptions are the weights outside their row's table.
func TestBF12Pack(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][2]int{{5, 64}, {16, 96}, {70, 1536}} {
		out, in := shape[0], shape[1]
		w := bf16Matrix(r, out, in)
		p := packBF12(w, out, in, nil)
		if p == nil {
			t.Fatalf("%dx%d: not packed", out, in)
		}
		if got := len(p.excIn(1, 2)); got != 6 {
			t.Errorf("%dx%d: row 1 has %d exceptions, want 6", out, in, got)
		}
		for _, path := range []bool{true, false} {
			Force(path)
			for _, rr := range [][2]int{{0, out}, {1, 3}, {out - 1, out}} {
				dst := make([]float32, (rr[1]-rr[0])*in)
				p.unpackRows(rr[0], rr[1], dst)
				for i, v := range dst {
					want := uint32(w[rr[0]*in+i]) << 16
					if math.Float32bits(v) != want {
						t.Fatalf("%dx%d on %s, rows %v: value %d is %#x, want %#x", out, in, Name(), rr, i, math.Float32bits(v), want)
					}
				}
			}
		}
	}
}

// TestBF12Refuses checks that a matrix with too many exceptions (high
// bytes spread over all 256 values) stays unpacked.
func TestBF12Refuses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	w := make([]uint16, 8*64)
	for i := range w {
		w[i] = uint16(r.Uint32())
	}
	if p := packBF12(w, 8, 64, nil); p != nil {
		t.Fatalf("packed %d exceptions in %d weights", len(p.exc), len(w))
	}
}

// TestMulTBF12 checks products with a packed weight against a float64
// reference, decode (T=1, the fused kernel with the exceptions added
// after) and prefill (the rows widened in groups), on the CPU's kernels
// and on plain Go.
func TestMulTBF12(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(7, 8))
	const out, in = 150, 288
	u := bf16Matrix(r, out, in)
	for i := range 12 {
		u[2*in+i] = 0x3c00 // no NaN, infinity or overflow in a product
	}
	p := packBF12(u, out, in, nil)
	if p == nil || len(p.exc) == 0 {
		t.Fatal("want a packed matrix with exceptions")
	}
	w := Weight{Kind: BF12, bf12: p}
	for _, path := range []bool{true, false} {
		Force(path)
		for _, T := range []int{1, 3, 40} {
			x := make([]float32, T*in)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			y := make([]float32, T*out)
			if T == 1 {
				// Row ranges as the team's chunks take them (runRows at
				// T=1 would start the team's prefetching, which reads the
				// kernels Force switches).
				mulRows(y, x, 1, w, out, in, 0, 1)
				mulRows(y, x, 1, w, out, in, 1, out/3)
				mulRows(y, x, 1, w, out, in, out/3, out)
			} else {
				runRows(y, x, T, w, out, in, nil)
			}
			for ti := 0; ti < T; ti++ {
				for j := 0; j < out; j++ {
					var want, scale float64
					for k := 0; k < in; k++ {
						v := float64(math.Float32frombits(uint32(u[j*in+k])<<16)) * float64(x[ti*in+k])
						want += v
						scale += math.Abs(v)
					}
					if got := float64(y[ti*out+j]); math.Abs(got-want) > 1e-6*scale+1e-30 {
						t.Fatalf("%s T=%d: y[%d][%d] = %g, want %g", Name(), T, ti, j, got, want)
					}
				}
			}
		}
	}
}

// TestPackBF16 checks the packing of a matrix in a file mapping: MulT
// then reads the packing (packed: the same products), the mapping's bytes still
// read back after their pages were given back, memory outside a mapping
// is never packed, and unmapping drops the packing. Without the kernels
// (plain Go, or a CPU without VBMI) nothing is packed.
func TestPackBF16(t *testing.T) {
	defer Force(true)
	for _, path := range []bool{false, true} {
		Force(path)
		t.Run(Name(), func(t *testing.T) { testPackBF16(t) })
	}
}

func testPackBF16(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const out, in = 64, 1024 // 128 KB: above packMin
	u := bf16Matrix(r, out, in)
	for i := range 12 {
		u[2*in+i] = 0 // no NaN, infinity or overflow in a product
	}
	// A second matrix follows, its high bytes spread over all 256 values:
	// too many exceptions to pack.
	file := append([]uint16(nil), u...)
	for range out * in {
		file = append(file, uint16(r.Uint32()))
	}
	b := mapTemp(t, unsafe.Slice((*byte)(unsafe.Pointer(&file[0])), 2*len(file)))
	mappedU := unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(u))
	spread := unsafe.Slice((*uint16)(unsafe.Pointer(&b[2*len(u)])), len(u))

	heap := append([]uint16(nil), u...)
	PackBF16(heap, out, in)
	if _, ok := packed(Weight{Kind: BF16, U16s: heap}, out, in); ok {
		t.Fatal("packed a matrix outside any file mapping")
	}
	PackBF16(mappedU, out, in)
	if _, ok := packed(Weight{Kind: BF16, U16s: mappedU}, out, in); ok {
		t.Fatal("packed a matrix of a mapping not declared with Mapped")
	}
	Mapped(b)
	defer Unmapped(b)
	PackBF16(mappedU, out, in)
	if _, ok := packed(Weight{Kind: BF16, U16s: mappedU}, out, in); ok != canBF12() {
		t.Fatalf("a matrix of a mapping packed: %v, with kernels for it: %v", ok, canBF12())
	}
	if !canBF12() {
		return
	}
	PackBF16(spread, out, in)
	if _, ok := packed(Weight{Kind: BF16, U16s: spread}, out, in); ok {
		t.Fatal("packed a matrix of too many exceptions")
	}
	if v, ok := packs.Load(uintptr(unsafe.Pointer(&spread[0]))); !ok || v.(*bf12) != nil {
		t.Fatal("the refusal was not kept: every graph built would try the matrix again")
	}
	if _, ok := packed(Weight{Kind: BF16, U16s: mappedU}, in, out); ok {
		t.Fatal("the packing served another shape")
	}
	for i := range u {
		if mappedU[i] != u[i] {
			t.Fatalf("weight %d reads %#x after its pages were given back, want %#x", i, mappedU[i], u[i])
		}
	}
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	got, want := make([]float32, out), make([]float32, out)
	pw, _ := packed(Weight{Kind: BF16, U16s: mappedU}, out, in) // as MulT puts it in place
	mulRows(got, x, 1, pw, out, in, 0, out)
	mulRows(want, x, 1, Weight{Kind: BF16, U16s: heap}, out, in, 0, out)
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*math.Abs(float64(want[j]))+1e-5 {
			t.Fatalf("row %d: packed %g, BF16 %g", j, got[j], want[j])
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		pw, _ := packed(Weight{Kind: BF16, U16s: mappedU}, out, in)
		mulRows(got, x, 1, pw, out, in, 0, out)
	}); a != 0 {
		t.Errorf("a decode product on the packing allocates %.0f times", a)
	}
	Unmapped(b)
	if _, ok := packed(Weight{Kind: BF16, U16s: mappedU}, out, in); ok {
		t.Fatal("the packing outlived its mapping")
	}
}

// mapTemp writes data to a temporary file and maps it read-only, as the
// loaders map a checkpoint; the mapping goes when the test ends.
func mapTemp(t *testing.T, data []byte) []byte {
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	return b
}

// BenchmarkDecodeBF12 is BenchmarkDecodeLayers' BF16 step on packed
// weights: GB/s of the BF16 bytes they stand for.
func BenchmarkDecodeBF12(b *testing.B) {
	if !canBF12() {
		b.Skip("no BF12 kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 12))
	var ws []Weight
	bytes := 0
	for l := 0; l < 30; l++ {
		for _, s := range smolLM2Layer {
			u := bf16Matrix(r, s[1], s[0])
			ws = append(ws, Weight{Kind: BF12, bf12: packBF12(u, s[1], s[0], nil)})
			bytes += 2 * len(u)
		}
	}
	x, y := make([]float32, 1536), make([]float32, 1536)
	b.Run(fmt.Sprintf("bf12/%s", Name()), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for k, w := range ws {
				s := smolLM2Layer[k%len(smolLM2Layer)]
				runRows(y, x, 1, w, s[1], s[0], nil)
			}
		}
		b.ReportMetric(float64(bytes)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
	})
}
