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

// f32Matrix is bf16Matrix for F32 bits: the same high bytes, with
// random low bytes, and float32's special values in row 2.
func f32Matrix(r *rand.Rand, out, in int) []uint32 {
	w := make([]uint32, out*in)
	for i, h := range bf16Matrix(r, out, in) {
		w[i] = uint32(h&0xff00)<<16 | r.Uint32()>>8
	}
	if out > 2 {
		special := []uint32{0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x00000001, 0x80000001, 0x007fffff, 0x7f7fffff, 0xff7fffff}
		copy(w[2*in:], special)
	}
	return w
}

// codedCase is a matrix to pack: its packing (release as packCoded takes
// it), and the float32 bits of its weights.
type codedCase struct {
	kind Kind
	pack func(release func([]byte)) *coded
	bits []uint32
	file []byte // the weights as a checkpoint stores them
}

// codedCases is a BF16 and an F32 matrix [out, in]; tame puts 1.0 in
// place of row 2's special values, so that no product overflows.
func codedCases(r *rand.Rand, out, in int, tame bool) []codedCase {
	u := bf16Matrix(r, out, in)
	f := f32Matrix(r, out, in)
	if tame && out > 2 {
		for i := range 12 {
			u[2*in+i], f[2*in+i] = 0x3f80, 0x3f800000
		}
	}
	widened := make([]uint32, len(u))
	for i, v := range u {
		widened[i] = uint32(v) << 16
	}
	return []codedCase{
		{BF16, func(rel func([]byte)) *coded { return packCoded(u, out, in, rel) }, widened,
			unsafe.Slice((*byte)(unsafe.Pointer(&u[0])), 2*len(u))},
		{F32, func(rel func([]byte)) *coded { return packCoded(f, out, in, rel) }, f,
			unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))},
	}
}

// TestCodedPack checks that packing loses nothing: every weight widens to
// its float32 bits, on the kernel and in Go, whatever the row range, and
// the exceptions are the weights outside their row's table.
func TestCodedPack(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][2]int{{5, 64}, {16, 96}, {70, 1536}} {
		out, in := shape[0], shape[1]
		for _, c := range codedCases(r, out, in, false) {
			p := c.pack(nil)
			if p == nil {
				t.Fatalf("%v %dx%d: not packed", c.kind, out, in)
			}
			if len(p.data) != out*codedStride(in, p.low) || p.low != map[Kind]int{BF16: 1, F32: 3}[c.kind] {
				t.Fatalf("%v %dx%d: %d bytes of %d low bytes a weight", c.kind, out, in, len(p.data), p.low)
			}
			if got := len(p.excIn(1, 2)); got != 6 {
				t.Errorf("%v %dx%d: row 1 has %d exceptions, want 6", c.kind, out, in, got)
			}
			for _, path := range []bool{true, false} {
				Force(path)
				for _, rr := range [][2]int{{0, out}, {1, 3}, {out - 1, out}} {
					dst := make([]float32, (rr[1]-rr[0])*in)
					p.unpackRows(rr[0], rr[1], dst)
					for i, v := range dst {
						if want := c.bits[rr[0]*in+i]; math.Float32bits(v) != want {
							t.Fatalf("%v %dx%d on %s, rows %v: value %d is %#x, want %#x", c.kind, out, in, Name(), rr, i, math.Float32bits(v), want)
						}
					}
				}
			}
		}
	}
}

// TestCodedRefuses checks that a matrix with too many exceptions (high
// bytes spread over all 256 values) stays unpacked.
func TestCodedRefuses(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	u, f := make([]uint16, 8*64), make([]uint32, 8*64)
	for i := range u {
		u[i], f[i] = uint16(r.Uint32()), r.Uint32()
	}
	if p := packCoded(u, 8, 64, nil); p != nil {
		t.Fatalf("BF16: packed %d exceptions in %d weights", len(p.exc), len(u))
	}
	if p := packCoded(f, 8, 64, nil); p != nil {
		t.Fatalf("F32: packed %d exceptions in %d weights", len(p.exc), len(f))
	}
}

// TestMulTCoded checks products with a packed weight against a float64
// reference, decode (T=1, the fused kernel with the exceptions added
// after), a batched decode's few rows (each row's product as one row
// alone gives it, bit for bit) and prefill (the rows widened in groups),
// on the CPU's kernels and on plain Go.
func TestMulTCoded(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(7, 8))
	const out, in = 150, 288
	for _, c := range codedCases(r, out, in, true) {
		p := c.pack(nil)
		if p == nil || len(p.exc) == 0 {
			t.Fatalf("%v: want a packed matrix with exceptions", c.kind)
		}
		w := Weight{Kind: Coded, coded: p}
		for _, path := range []bool{true, false} {
			Force(path)
			for _, T := range []int{1, 2, 3, 5, 8, 9, 14, 40} {
				x := make([]float32, T*in)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				y := make([]float32, T*out)
				if T == 1 {
					// Row ranges as the team's chunks take them (runRows
					// at T=1 would start the team's prefetching, which
					// reads the kernels Force switches).
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
							v := float64(math.Float32frombits(c.bits[j*in+k])) * float64(x[ti*in+k])
							want += v
							scale += math.Abs(v)
						}
						if got := float64(y[ti*out+j]); math.Abs(got-want) > 1e-6*scale+1e-30 {
							t.Fatalf("%v on %s T=%d: y[%d][%d] = %g, want %g", c.kind, Name(), T, ti, j, got, want)
						}
					}
				}
				// A few rows (a batched decode) take each row's product as
				// one row alone does, bit for bit, where the kernels run.
				if path && canCoded() && T <= codedFewRows {
					y1 := make([]float32, out)
					for ti := 0; ti < T; ti++ {
						mulRows(y1, x[ti*in:(ti+1)*in], 1, w, out, in, 0, out)
						for j, v := range y1 {
							if math.Float32bits(v) != math.Float32bits(y[ti*out+j]) {
								t.Fatalf("%v T=%d: y[%d][%d] = %g, alone %g", c.kind, T, ti, j, y[ti*out+j], v)
							}
						}
					}
				}
			}
		}
	}
}

// TestPackFloat checks the packing of a matrix of a file mapping: the
// products on it (Weight.On) are the same, the mapping's bytes still read
// back after their pages were given back, a packing serves no other kind
// or shape, a refusal is nil, and a released packing serves nothing.
// Without the kernels (plain Go, or a CPU without VBMI) nothing is packed.
func TestPackFloat(t *testing.T) {
	defer Force(true)
	for _, path := range []bool{false, true} {
		Force(path)
		r := rand.New(rand.NewPCG(9, 10))
		const out, in = 64, 1024 // 128 KB and more: above packMin
		for _, c := range codedCases(r, out, in, true) {
			t.Run(fmt.Sprintf("%s/%v", Name(), c.kind), func(t *testing.T) { testPackFloat(t, r, c, out, in) })
		}
	}
}

// fileWeight is the weight over the checkpoint bytes b of kind k.
func fileWeight(k Kind, b []byte) Weight {
	if k == F32 {
		return Weight{Kind: F32, F32s: unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)}
	}
	return Weight{Kind: BF16, U16s: unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)}
}

// packWeight offers w to the coded packing of PackBF16 or PackF32 (on
// AVX2 they lay a matrix out in panels instead: TestPackPanels).
func packWeight(w Weight, out, in int) *Packing {
	if w.Kind == F32 {
		return packFloat(unsafe.Slice((*uint32)(unsafe.Pointer(&w.F32s[0])), len(w.F32s)), out, in)
	}
	return packFloat(w.U16s, out, in)
}

func testPackFloat(t *testing.T, r *rand.Rand, c codedCase, out, in int) {
	// A second matrix follows, its bytes random, its high bytes spread
	// over all 256 values: too many exceptions to pack.
	file := append([]byte(nil), c.file...)
	for range c.file {
		file = append(file, byte(r.Uint32()))
	}
	b := mapTemp(t, file)
	n := len(c.file)
	mapped, spread := fileWeight(c.kind, b[:n]), fileWeight(c.kind, b[n:])
	heap := fileWeight(c.kind, append([]byte(nil), c.file...))

	p := packWeight(mapped, out, in)
	if (p != nil) != (canCoded() || packAll) {
		t.Fatalf("a matrix of a mapping packed: %v, with kernels for it: %v (GOZOO_PACK=all: %v)", p != nil, canCoded(), packAll)
	}
	if p == nil {
		return
	}
	defer p.Release()
	if pw := mapped.On(p, out, in); pw.Kind != Coded {
		t.Fatalf("the packing does not serve its own weight (%v)", pw.Kind)
	}
	other := fileWeight(map[Kind]Kind{F32: BF16, BF16: F32}[c.kind], b[:n])
	if other.On(p, out, in).Kind == Coded {
		t.Fatal("the packing served a weight of another kind")
	}
	if mapped.On(p, in, out).Kind == Coded {
		t.Fatal("the packing served another shape")
	}
	if q := packWeight(spread, out, in); q != nil {
		q.Release()
		t.Fatal("packed a matrix of too many exceptions")
	}
	for i := range c.file {
		if b[i] != c.file[i] {
			t.Fatalf("byte %d reads %#x after its pages were given back, want %#x", i, b[i], c.file[i])
		}
	}
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	row := make([]float32, in)
	if !Row(mapped.On(p, out, in), 5, in, row) {
		t.Fatal("no embedding row from the packing")
	}
	for i, v := range row {
		if math.Float32bits(v) != c.bits[5*in+i] {
			t.Fatalf("embedding row 5, value %d: %#x, want %#x", i, math.Float32bits(v), c.bits[5*in+i])
		}
	}
	if Row(heap, 5, in, row) {
		t.Fatal("Row read a packing of a weight that has none")
	}
	got, want := make([]float32, out), make([]float32, out)
	mulRows(got, x, 1, mapped.On(p, out, in), out, in, 0, out)
	mulRows(want, x, 1, heap, out, in, 0, out)
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*math.Abs(float64(want[j]))+1e-5 {
			t.Fatalf("row %d: packed %g, unpacked %g", j, got[j], want[j])
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		mulRows(got, x, 1, mapped.On(p, out, in), out, in, 0, out)
	}); a != 0 {
		t.Errorf("a decode product on the packing allocates %.0f times", a)
	}
	p.Release()
	if mapped.On(p, out, in).Kind == Coded {
		t.Fatal("a released packing still serves its weight")
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

// BenchmarkDecodeCoded is BenchmarkDecodeLayers' BF16 and F32 steps on
// packed weights: GB/s of the BF16 or F32 bytes they stand for.
func BenchmarkDecodeCoded(b *testing.B) {
	if !canCoded() {
		b.Skip("no kernels for coded matrices on this CPU")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, kind := range []Kind{BF16, F32} {
		var ws []Weight
		bytes := 0
		for l := 0; l < 30; l++ {
			for _, s := range smolLM2Layer {
				c := codedCases(r, s[1], s[0], false)[map[Kind]int{BF16: 0, F32: 1}[kind]]
				ws = append(ws, Weight{Kind: Coded, coded: c.pack(nil)})
				bytes += len(c.file)
			}
		}
		benchCoded(b, kind, ws, bytes)
	}
}

func benchCoded(b *testing.B, kind Kind, ws []Weight, bytes int) {
	x, y := make([]float32, 1536), make([]float32, 1536)
	b.Run(fmt.Sprintf("%s/%s", map[Kind]string{BF16: "bf12", F32: "f28"}[kind], Name()), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for k, w := range ws {
				s := smolLM2Layer[k%len(smolLM2Layer)]
				runRows(y, x, 1, w, s[1], s[0], nil)
			}
		}
		b.ReportMetric(float64(bytes)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
	})
}

// BenchmarkPackCoded is packing's speed, GB/s of the BF16 or F32 bytes
// packed: a model's matrices are packed as its graph binds them.
func BenchmarkPackCoded(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	const out, in = 3072, 1024
	for _, c := range codedCases(r, out, in, false) {
		b.Run(c.kind.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if p := c.pack(nil); p != nil {
					freePacking(p.data)
				}
			}
			b.ReportMetric(float64(len(c.file))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
