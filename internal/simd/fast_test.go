package simd

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/x448/float16"
	"testing"
	"unsafe"

	"github.com/gozoo/gozoo/internal/quant"
)

// allQuantFormats are every block format, those with kernels and those
// that run the plain-Go paths.
var allQuantFormats = []quant.Format{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.Q4_K, quant.Q6_K,
	quant.Q4_1, quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.Q5_K, quant.IQ4_NL, quant.IQ4_XS}

// TestFastKernels checks the integer kernels of fast mode against the
// plain-Go reference (quant.DotActs) on random rows of every format: the
// integer sums are exact, so the results differ only by float32
// summation order.
func TestFastKernels(t *testing.T) {
	if len(supported()) == 0 {
		t.Skip("no SIMD kernels on this CPU: the plain-Go path is the reference itself")
	}
	// The kernels are checked even when GOZOO_SIMD=off picked plain Go.
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range []quant.Format{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.Q4_K, quant.Q6_K, quant.IQ4_NL, quant.Q4_1, quant.Q5_1, quant.Q5_K, quant.IQ4_XS, quant.Q2_K, quant.Q3_K} {
		for _, in := range []int{256, 512, 544, 1024} {
			if in%f.BlockSize() != 0 {
				continue // 544: an odd count of 32-value blocks, for the two-block loops' tail
			}
			const rows = 7
			rb, err := f.RowBytes(in)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]byte, rows*rb)
			src := make([]float32, in)
			for j := 0; j < rows; j++ {
				for i := range src {
					src[i] = float32(r.NormFloat64())
				}
				quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
			}
			x := make([]float32, in)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			x[5] = 40 // one large value sets its block's scale
			q, d, sums := make([]int8, in), make([]float32, in/quant.ActBlock(f)*quant.ActScales(f)), make([]int16, in/16)
			quant.QuantizeActs(f, x, q, d, sums)
			want := make([]float32, rows)
			var mag float64
			for j := range want {
				want[j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q, d, sums)
				mag = max(mag, math.Abs(float64(want[j])))
			}
			// Each format's AVX2-era kernel (no lanes), and the decode
			// kernel with lanes where there is one (VNNI, or AVX2's
			// fastQ4_0LanesAVX2, which must equal the first bit for bit).
			var plain []float32
			for _, vnni := range []bool{false, true} {
				got := make([]float32, rows)
				var lanes []int32
				if vnni {
					off, _ := fastGemmFormat(f)
					vnniLanes := (f == quant.Q4_0 || f == quant.Q5_0 || f == quant.Q6_K) && fastGemmOK()
					if !vnniLanes && !decodeLanesAVX2(f) {
						continue
					}
					lanes = make([]int32, in/4)
					laneSums(lanes, q, -off)
				}
				if !asmDotActs(Weight{Kind: Quant, Format: f, Bytes: w}, 0, rows, rb, q, d, sums, lanes, got) {
					t.Fatalf("%s: no kernel", f)
				}
				for j := range got {
					if diff := math.Abs(float64(got[j] - want[j])); diff > 1e-5*(mag+1) {
						t.Errorf("%s in=%d vnni=%v row %d: kernel %g, reference %g", f, in, vnni, j, got[j], want[j])
					}
					if vnni && !fastGemmOK() && got[j] != plain[j] {
						t.Errorf("%s in=%d row %d: lanes kernel %g, sign-trick kernel %g", f, in, j, got[j], plain[j])
					}
				}
				plain = got
			}
		}
	}
}

// BenchmarkMulTFast times fast mode's products at Qwen3-0.6B's MLP shape
// (1024 -> 3072), decode (T=1) and a prefill chunk (T=64), against exact
// mode on the same weights.
func BenchmarkMulTFast(b *testing.B) {
	const in, out = 1024, 3072
	r := rand.New(rand.NewPCG(1, 2))
	for _, f := range allQuantFormats {
		rb, _ := f.RowBytes(in)
		w := make([]byte, out*rb)
		src := make([]float32, in)
		for j := 0; j < out; j++ {
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
		}
		wt := Weight{Kind: Quant, Format: f, Bytes: w}
		for _, T := range []int{1, 8, 64} {
			x := make([]float32, T*in)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			y := make([]float32, T*out)
			for _, mode := range []string{"exact", "fast"} {
				b.Run(fmt.Sprintf("%s/T=%d/%s", f, T, mode), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						if mode == "fast" {
							MulTFast(y, x, T, wt, out, in)
						} else {
							MulT(y, x, T, wt, out, in)
						}
					}
					b.ReportMetric(float64(2*T*in*out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestRoundActs checks the 16-bit rounding of fast mode's activations:
// to nearest, ties to even, as ggml's FP32_TO_BF16 and FP32_TO_FP16 do.
func TestRoundActs(t *testing.T) {
	cases := []struct {
		k       Kind
		in, out float32
	}{
		{BF16, 1 + 1.0/256, 1},                  // a tie: down to the even 1
		{BF16, 1 + 3.0/256, 1 + 4.0/256},        // a tie: up to the even mantissa
		{BF16, 1 + 1.0/256 + 1e-6, 1 + 2.0/256}, // past the tie
		{BF16, -2.5, -2.5},
		{F16, 1 + 1.0/2048, 1},            // a tie: down to even
		{F16, 1 + 3.0/2048, 1 + 4.0/2048}, // a tie: up to even
		{F16, 70000, float32(math.Inf(1))},
		{F16, 1e-8, 0},
	}
	for _, c := range cases {
		got := make([]float32, 1)
		RoundActs(c.k, got, []float32{c.in})
		if got[0] != c.out {
			t.Errorf("kind %d: %g rounds to %g, want %g", c.k, c.in, got[0], c.out)
		}
	}
	nan := make([]float32, 1)
	RoundActs(BF16, nan, []float32{float32(math.NaN())})
	if !math.IsNaN(float64(nan[0])) {
		t.Errorf("BF16 rounding of NaN gave %g", nan[0])
	}
}

// TestGELUTable checks llama.cpp's F16 GELU table against the tanh GELU
// in float64: within F16 rounding of input and output, with the cutoffs.
func TestGELUTable(t *testing.T) {
	gelu := func(x float64) float64 { return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) }
	for _, x := range []float32{-12, -10, -3.7, -1, -0.01, 0, 0.3, 1, 2.25, 9.99, 10, 50} {
		got := float64(GELUTable(x))
		switch {
		case x <= -10 && got != 0, x >= 10 && got != float64(x):
			t.Errorf("GELUTable(%g) = %g past the cutoff", x, got)
		case x > -10 && x < 10 && math.Abs(got-gelu(float64(x))) > 2e-3*(math.Abs(float64(x))+1):
			t.Errorf("GELUTable(%g) = %g, GELU %g", x, got, gelu(float64(x)))
		}
	}
}

// TestMulTFast checks whole fast-mode products (the row split, the
// four-row prefill kernels and their tails) against the plain-Go
// reference, for decode and prefill shapes.
func TestMulTFast(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const in, out = 512, 37
	for _, f := range allQuantFormats {
		rb, _ := f.RowBytes(in)
		w := make([]byte, out*rb)
		src := make([]float32, in)
		for j := 0; j < out; j++ {
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
		}
		// T = 9 and 13 take the staged K-quant kernels for 8 and 12 rows.
		for _, T := range []int{1, 4, 7, 9, 13} {
			x := make([]float32, T*in)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			got := make([]float32, T*out)
			MulTFast(got, x, T, Weight{Kind: Quant, Format: f, Bytes: w}, out, in)
			q, d, sums := make([]int8, in), make([]float32, in/quant.ActBlock(f)*quant.ActScales(f)), make([]int16, in/16)
			want := make([]float32, T*out)
			var mag float64
			for tt := 0; tt < T; tt++ {
				quant.QuantizeActs(f, x[tt*in:(tt+1)*in], q, d, sums)
				for j := 0; j < out; j++ {
					want[tt*out+j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q, d, sums)
					mag = max(mag, math.Abs(float64(want[tt*out+j])))
				}
			}
			// Float32 summation order moves a result by the size of its
			// terms, not of what they cancel down to (Q4_1's min terms
			// cancel much of the rest): bound by the largest result.
			for i, g := range got {
				if diff := math.Abs(float64(g - want[i])); diff > 1e-5*(mag+1) {
					t.Fatalf("%s T=%d row %d col %d: %g, reference %g", f, T, i/out, i%out, g, want[i])
				}
			}
		}
	}
}

// TestFastGemm checks fast mode's prefill products (the VNNI kernels on
// repacked weights where the CPU has them) against the plain-Go reference
// row by row: every row count that leaves remainders of the four-row
// kernel and weight groups that are not whole eights.
func TestFastGemm(t *testing.T) {
	was := active
	Force(true)
	defer func() { active = was }()
	t.Logf("kernels %s, VNNI prefill %v", Name(), fastGemmOK())
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range allQuantFormats {
		for _, shape := range [][2]int{{256, 8}, {512, 13}, {768, 35}} {
			in, out := shape[0], shape[1]
			rb, _ := f.RowBytes(in)
			w := make([]byte, out*rb)
			src := make([]float32, in)
			for j := 0; j < out; j++ {
				for i := range src {
					src[i] = float32(r.NormFloat64())
				}
				quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
			}
			for _, T := range []int{2, 3, 4, 5, 9} {
				x := make([]float32, T*in)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 2)
				}
				y := make([]float32, T*out)
				MulTFast(y, x, T, Weight{Kind: Quant, Format: f, Bytes: w}, out, in)
				q, d, sums := make([]int8, in), make([]float32, in/quant.ActBlock(f)*quant.ActScales(f)), make([]int16, in/16)
				want := make([]float32, T*out)
				var mag float64
				for tt := 0; tt < T; tt++ {
					quant.QuantizeActs(f, x[tt*in:(tt+1)*in], q, d, sums)
					for j := 0; j < out; j++ {
						want[tt*out+j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q, d, sums)
						mag = max(mag, math.Abs(float64(want[tt*out+j])))
					}
				}
				// The integer sums are exact: the results differ by float32
				// summation order, an error of the size of the products'
				// terms, not of a result that they cancel down to (as in
				// TestFastKernels). The AVX2 K-quant kernels keep eight
				// lanes of partial sums, as ggml's do.
				for i, got := range y {
					if math.Abs(float64(got-want[i])) > 1e-5*(mag+1) {
						t.Fatalf("%s in=%d out=%d T=%d: y[%d,%d] = %g, reference %g", f, in, out, T, i/out, i%out, got, want[i])
					}
				}
			}
		}
	}
}

// TestFastPack: the gather kernels repack 16 Q4_0 and Q8_0 rows, and 8
// Q4_K and Q6_K rows, into the same words and scales as pack's and
// packK's Go loops, the last row ending the slice; so do the kernels that
// repack regrouped Q4_0 and IQ4_XS groups.
func TestFastPack(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range []quant.Format{quant.Q4_0, quant.Q5_0, quant.Q8_0} {
		for _, in := range []int{32, 1024, 3072} {
			w := quantMatrix(r, f, 16, in)
			rb, blocks := len(w)/16, in/32
			var asm, plain packedRows
			asm.pack(f, w, rb, 16, blocks)
			plain.b, plain.dw = make([]byte, len(asm.b)), make([]float32, len(asm.dw))
			plain.packRows(f, w, rb, 16, blocks, unsafe.Slice((*uint32)(unsafe.Pointer(&plain.b[0])), blocks*128))
			if !bytes.Equal(asm.b, plain.b) || !slices.Equal(asm.dw, plain.dw) {
				t.Fatalf("%v, %d columns: the kernel's repacking differs from the Go loop's", f, in)
			}
		}
	}
	// From a regrouping: each group's 16 rows as the Go loop repacks them
	// from the file's rows.
	for _, f := range []quant.Format{quant.Q4_0} {
		if !canPackX16Fast(f) {
			continue
		}
		for _, in := range []int{32, 1024} {
			w := quantMatrix(r, f, 32, in)
			rb, blocks := len(w)/32, in/32
			p := packX16(w, f, 32, in, nil)
			for g := range 2 {
				var asm, plain packedRows
				asm.b, asm.dw = make([]byte, 512*blocks), make([]float32, 16*blocks)
				asmFastPackX16(p, g, &asm)
				plain.b, plain.dw = make([]byte, len(asm.b)), make([]float32, len(asm.dw))
				plain.packRows(f, w[16*g*rb:], rb, 16, blocks, unsafe.Slice((*uint32)(unsafe.Pointer(&plain.b[0])), blocks*128))
				if !bytes.Equal(asm.b, plain.b) || !slices.Equal(asm.dw, plain.dw) {
					t.Fatalf("%v, %d columns, group %d: the regrouping's repacking differs from the Go loop's", f, in, g)
				}
			}
		}
	}
	// IQ4_XS: each group of a regrouping in its sixteen-row layout, as
	// packKRows repacks the file's rows.
	if canPackX16Fast(quant.IQ4_XS) {
		const f = quant.IQ4_XS
		for _, in := range []int{256, 1024} {
			w := quantMatrix(r, f, 32, in)
			rb, blocks := len(w)/32, in/256
			p := packX16(w, f, 32, in, nil)
			for g := range 2 {
				var asm packedRows
				asm.b = make([]byte, blocks*packKBytes(f))
				asmFastPackX16(p, g, &asm)
				plain := make([]uint32, len(asm.b)/4)
				packKRows(f, w[16*g*rb:], rb, 16, blocks, plain)
				if got := unsafe.Slice((*uint32)(unsafe.Pointer(&asm.b[0])), len(plain)); !slices.Equal(got, plain) {
					t.Fatalf("%v, %d columns, group %d: the regrouping's repacking differs from the Go loop's", f, in, g)
				}
			}
		}
	}
	for _, f := range []quant.Format{quant.Q4_K, quant.Q6_K} {
		for _, in := range []int{256, 1024, 3072} {
			rows := kLanes(f)
			w := quantMatrix(r, f, rows, in)
			rb, blocks := len(w)/rows, in/256
			var asm packedRows
			asm.packK(f, w, rb, rows, blocks)
			plain := make([]uint32, len(asm.b)/4)
			packKRows(f, w, rb, rows, blocks, plain)
			if got := unsafe.Slice((*uint32)(unsafe.Pointer(&asm.b[0])), len(plain)); !slices.Equal(got, plain) {
				i := 0
				for got[i] == plain[i] {
					i++
				}
				t.Fatalf("%v, %d columns: the kernel's repacking differs from the Go loop's at word %d: %#x, want %#x", f, in, i, got[i], plain[i])
			}
		}
	}
}

// TestQuantizeActsKernel: the AVX-512 Q8_0 activation quantizer gives
// quant.QuantizeActs's values and scales exactly, ties and all-zero blocks
// included, and the block sums times the offset.
func TestQuantizeActsKernel(t *testing.T) {
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(7, 8))
	const in = 32 * 40
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/32%7-3)))
	}
	for i := 32; i < 64; i++ {
		x[i] = 0 // an all-zero block
	}
	for i := 64; i < 96; i++ {
		x[i] = float32(i-80) * 0.5 // halves: x·127/8 hits ties
	}
	x[96] = 127 // amax 127: the values are their own roundings
	for i := 97; i < 128; i++ {
		x[i] = float32(i-112) + 0.5
	}
	q, d := make([]int8, in), make([]float32, in/32)
	corr := make([]int32, in/32)
	lanes := make([]int32, in/4)
	if !asmQuantizeActs(quant.Q8_0, x, q, d, nil, corr, lanes, 8) {
		t.Skip("no Q8_0 quantizer kernel on this CPU")
	}
	wq, wd := make([]int8, in), make([]float32, in/32)
	quant.QuantizeActs(quant.Q8_0, x, wq, wd, nil)
	for b := range wd {
		if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
			t.Fatalf("block %d: scale %g, want %g", b, d[b], wd[b])
		}
		var s int32
		for i := 32 * b; i < 32*b+32; i++ {
			if q[i] != wq[i] {
				t.Fatalf("value %d (%g): %d, want %d", i, x[i], q[i], wq[i])
			}
			s += int32(wq[i])
		}
		if corr[b] != 8*s {
			t.Fatalf("block %d: sum term %d, want %d", b, corr[b], 8*s)
		}
		for l := 8 * b; l < 8*b+8; l++ {
			ls := int32(wq[4*l]) + int32(wq[4*l+1]) + int32(wq[4*l+2]) + int32(wq[4*l+3])
			if lanes[l] != -8*ls {
				t.Fatalf("lane %d: %d, want %d", l, lanes[l], -8*ls)
			}
		}
	}
}

// TestQuantizeQ8_1Kernel: the Q8_1 quantizer (Q4_1's and Q5_1's
// activations) gives quant.QuantizeActs's values, scales and F16 sums
// bit for bit, ties and an all-zero block included.
func TestQuantizeQ8_1Kernel(t *testing.T) {
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(11, 12))
	const in = 32 * 40
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/32%7-3)))
	}
	clear(x[32:64])
	for i := 64; i < 96; i++ {
		x[i] = float32(i-80) * 0.5 // halves: x·127/8 hits ties
	}
	for i := 96; i < 128; i++ {
		x[i] = 60000 + float32(i) // d·Σq past F16's range: s is +Inf
	}
	for _, f := range []quant.Format{quant.Q4_1, quant.Q5_1} {
		q, d := make([]int8, in), make([]float32, 2*in/32)
		if !asmQuantizeActs(f, x, q, d, nil, nil, nil, 0) {
			t.Skip("no Q8_1 quantizer kernel on this CPU")
		}
		wq, wd := make([]int8, in), make([]float32, 2*in/32)
		quant.QuantizeActs(f, x, wq, wd, nil)
		for i := range wd {
			if math.Float32bits(d[i]) != math.Float32bits(wd[i]) {
				t.Fatalf("%s block %d: %s %g, want %g", f, i/2, [2]string{"scale", "sum"}[i%2], d[i], wd[i])
			}
		}
		for i := range wq {
			if q[i] != wq[i] {
				t.Fatalf("%s value %d (%g): %d, want %d", f, i, x[i], q[i], wq[i])
			}
		}
	}
}

// TestQuantizeQ8KKernel: the AVX-512 Q8_K quantizer gives
// quant.QuantizeActs's values, scales and sums of 16 exactly: the first
// value of largest magnitude sets the scale (a tie of x and -x included),
// halves round to even, and a block of zeros stays zero.
func TestQuantizeQ8KKernel(t *testing.T) {
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(9, 10))
	const in = 256 * 6
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(i/256%4-2)))
	}
	for i := 256; i < 512; i++ {
		x[i] = 0
	}
	x[600], x[700] = -9, 9 // equal magnitudes: the first (negative) one wins
	for i := 768; i < 1024; i++ {
		x[i] = float32(i-896) * 0.5
	}
	q, d, sums := make([]int8, in), make([]float32, in/256), make([]int16, in/16)
	if !asmQuantizeActs(quant.Q4_K, x, q, d, sums, nil, nil, 0) {
		t.Skip("no Q8_K quantizer kernel on this CPU")
	}
	wq, wd, ws := make([]int8, in), make([]float32, in/256), make([]int16, in/16)
	quant.QuantizeActs(quant.Q4_K, x, wq, wd, ws)
	for b := range wd {
		if math.Float32bits(d[b]) != math.Float32bits(wd[b]) {
			t.Fatalf("block %d: scale %g, want %g", b, d[b], wd[b])
		}
	}
	for i := range wq {
		if q[i] != wq[i] {
			t.Fatalf("value %d (%g): %d, want %d", i, x[i], q[i], wq[i])
		}
	}
	for g := range ws {
		if sums[g] != ws[g] {
			t.Fatalf("sum %d: %d, want %d", g, sums[g], ws[g])
		}
	}
}

// TestF16Kernel checks ToF16 and RoundActs(F16) on vectors long enough
// for the kernel against float16.Fromfloat32, bit for bit (NaN stays
// NaN): ties both ways, overflow to infinity, F16 subnormals and
// underflow, signed zeros and random values at many scales.
func TestF16Kernel(t *testing.T) {
	defer Force(true)
	x := []float32{1 + 1.0/2048, 1 + 3.0/2048, -(1 + 1.0/2048), 65504, 65520, 65519.99, 70000, -70000,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1)),
		5.960464477539063e-08, 2.9802322387695312e-08, 2.98023259e-08, 1e-10, 6.1035156e-05, 6.1e-05, 3.0517578e-05}
	r := rand.New(rand.NewPCG(11, 12))
	for len(x) < 16*9+7 {
		x = append(x, float32(r.NormFloat64()*math.Pow(10, float64(r.IntN(12)-7))))
	}
	for _, path := range []bool{true, false} {
		Force(path)
		bits := make([]uint16, len(x))
		round := make([]float32, len(x))
		ToF16(bits, x)
		RoundActs(F16, round, x)
		for i, v := range x {
			want := float16.Fromfloat32(v)
			if math.IsNaN(float64(v)) {
				if !want.IsNaN() || !float16.Frombits(bits[i]).IsNaN() || !math.IsNaN(float64(round[i])) {
					t.Fatalf("%s: NaN at %d became %#04x and %g", Name(), i, bits[i], round[i])
				}
				continue
			}
			if bits[i] != want.Bits() {
				t.Fatalf("%s: ToF16(%g) = %#04x, want %#04x", Name(), v, bits[i], want.Bits())
			}
			if math.Float32bits(round[i]) != math.Float32bits(want.Float32()) {
				t.Fatalf("%s: RoundActs(F16, %g) = %g, want %g", Name(), v, round[i], want.Float32())
			}
		}
	}
}

// TestFastKernels4 checks the four-row fast kernels (fast prefill on
// AVX2) against the plain-Go reference, row of activations by row, and
// that each format listed has one.
func TestFastKernels4(t *testing.T) {
	if len(supported()) == 0 {
		t.Skip("no SIMD kernels on this CPU")
	}
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range []quant.Format{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.Q4_1, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q2_K, quant.Q3_K, quant.IQ4_XS} {
		const rows, T = 7, 4
		in := 544
		if quant.KQuant(f) {
			in = 768
		}
		rb, _ := f.RowBytes(in)
		w := make([]byte, rows*rb)
		src := make([]float32, in)
		for j := 0; j < rows; j++ {
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
		}
		nd := in / quant.ActBlock(f) * quant.ActScales(f)
		q, d, sums := make([]int8, T*in), make([]float32, T*nd), make([]int16, T*in/16)
		want := make([]float32, T*rows)
		var mag float64
		for tt := 0; tt < T; tt++ {
			x := make([]float32, in)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			st := sums[tt*in/16 : (tt+1)*in/16]
			quant.QuantizeActs(f, x, q[tt*in:(tt+1)*in], d[tt*nd:(tt+1)*nd], st)
			for j := 0; j < rows; j++ {
				want[tt*rows+j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q[tt*in:(tt+1)*in], d[tt*nd:(tt+1)*nd], st)
				mag = max(mag, math.Abs(float64(want[tt*rows+j])))
			}
		}
		got := make([]float32, T*rows)
		if !asmDotActs4(Weight{Kind: Quant, Format: f, Bytes: w}, 0, rows, rb, q, d, sums, in, got, rows) {
			t.Fatalf("%s: no four-row kernel", f)
		}
		for i := range got {
			if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-5*(mag+1) {
				t.Errorf("%s x row %d, weight row %d: kernel %g, reference %g", f, i/rows, i%rows, got[i], want[i])
			}
		}
		if !quant.KQuant(f) {
			continue
		}
		// The staged kernels do the same operations in the same order.
		wt := Weight{Kind: Quant, Format: f, Bytes: w}
		var buf []byte
		st := aligned32(&buf, rows*in/256*kStaged)
		staged := make([]float32, T*rows)
		if !asmStageK(wt, 0, rows, rb, in, st) || !asmDotActs4Staged(wt, 0, rows, rb, st, q, d, sums, in, staged, rows) {
			t.Fatalf("%s: no staged kernels", f)
		}
		for i := range got {
			if staged[i] != got[i] {
				t.Errorf("%s staged x row %d, weight row %d: %g, four-row kernel %g", f, i/rows, i%rows, staged[i], got[i])
			}
		}
	}
}

// TestStaged8 checks the staged eight-row kernels of the Q8_0 family
// against the plain-Go reference, for each format and four rows of
// activations.
func TestStaged8(t *testing.T) {
	if len(supported()) == 0 {
		t.Skip("no SIMD kernels on this CPU")
	}
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(11, 12))
	const rows, T, in = 8, 4, 544
	for _, f := range []quant.Format{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL} {
		rb, _ := f.RowBytes(in)
		w := make([]byte, rows*rb)
		src := make([]float32, in)
		for j := 0; j < rows; j++ {
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
		}
		q, d := make([]int8, T*in), make([]float32, T*in/32)
		want := make([]float32, T*rows)
		var mag float64
		for tt := 0; tt < T; tt++ {
			x := make([]float32, in)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			quant.QuantizeActs(f, x, q[tt*in:(tt+1)*in], d[tt*in/32:(tt+1)*in/32], nil)
			for j := 0; j < rows; j++ {
				want[tt*rows+j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q[tt*in:(tt+1)*in], d[tt*in/32:(tt+1)*in/32], nil)
				mag = max(mag, math.Abs(float64(want[tt*rows+j])))
			}
		}
		var buf []byte
		st := aligned32(&buf, in/32*q8Staged)
		if !asmStage8(Weight{Kind: Quant, Format: f, Bytes: w}, 0, rb, in, st) {
			t.Fatalf("%s: no staging kernel", f)
		}
		got := make([]float32, T*rows)
		asmDotActs4Staged8(st, q, d, in, got, rows)
		for i := range got {
			if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-5*(mag+1) {
				t.Errorf("%s x row %d, weight row %d: kernel %g, reference %g", f, i/rows, i%rows, got[i], want[i])
			}
		}
	}
}

// TestFastX16 checks fast mode on matrices regrouped by 16 rows: decode by
// the regrouped kernels (Q4_0, IQ4_NL, Q8_0, Q4_1, Q5_1, IQ4_XS, Q2_K,
// Q3_K on AVX2; Q4_K and Q5_0 with VNNI) and every other row count, and
// the formats without such kernels here (rebuilt rows), against the
// plain-Go reference.
func TestFastX16(t *testing.T) {
	was := active
	Force(true)
	defer func() { active = was }()
	r := rand.New(rand.NewPCG(13, 14))
	const out, in = 48, 768
	for _, f := range []quant.Format{quant.Q4_0, quant.IQ4_NL, quant.Q8_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_XS, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q6_K} {
		rb, _ := f.RowBytes(in)
		w := make([]byte, out*rb)
		src := make([]float32, in)
		for j := 0; j < out; j++ {
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			quant.QuantizeRow(f, src, w[j*rb:(j+1)*rb])
		}
		p := packX16(w, f, out, in, nil)
		if p == nil {
			t.Fatalf("%s: not regrouped", f)
		}
		for _, T := range []int{1, 3, 9} {
			x := make([]float32, T*in)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			got := make([]float32, T*out)
			MulTFast(got, x, T, Weight{Kind: X16, x16: p}, out, in)
			q, d, sums := make([]int8, in), make([]float32, in/quant.ActBlock(f)*quant.ActScales(f)), make([]int16, in/16)
			var mag float64
			want := make([]float32, T*out)
			for tt := 0; tt < T; tt++ {
				quant.QuantizeActs(f, x[tt*in:(tt+1)*in], q, d, sums)
				for j := 0; j < out; j++ {
					want[tt*out+j] = quant.DotActs(f, w[j*rb:(j+1)*rb], q, d, sums)
					mag = max(mag, math.Abs(float64(want[tt*out+j])))
				}
			}
			for i := range got {
				if diff := math.Abs(float64(got[i] - want[i])); diff > 1e-5*(mag+1) {
					t.Fatalf("%s T=%d row %d col %d: %g, reference %g", f, T, i/out, i%out, got[i], want[i])
				}
			}
			if T == 1 && fastX16OK(f) {
				// The kernel itself, on the last row's activations (q, d).
				corr := make([]int32, in/32)
				off, _ := fastGemmFormat(f)
				if f == quant.Q4_0 {
					off = -8 // fastX16Q4_0AVX2's
				}
				blockSums(corr, q, off)
				y := make([]float32, out)
				if !asmFastX16(p, q, d, sums, corr, 0, out, y) {
					t.Fatalf("%s: no regrouped decode kernel", f)
				}
				for j, v := range y {
					if diff := math.Abs(float64(v - want[j])); diff > 1e-5*(mag+1) {
						t.Fatalf("%s kernel, row %d: %g, reference %g", f, j, v, want[j])
					}
				}
			}
		}
	}
}

// TestFastX16InPlace: on VNNI machines fast mode keeps Q4_K and Q5_0
// regrouped (elsewhere they stay in the file's layout), and their kernels
// and Q8_0's and IQ4_NL's read the regrouping in place with the repacked
// kernels' arithmetic (packK's, pack's), lane for lane: a row's result is
// the same bits alone (decode), in a batch of any size, and on the file's
// layout repacked (fastGemmQ4_K, fastGemm16).
func TestFastX16InPlace(t *testing.T) {
	for _, f := range []quant.Format{quant.Q4_K, quant.Q5_0, quant.Q8_0, quant.IQ4_NL} {
		t.Run(f.String(), func(t *testing.T) { testFastX16InPlace(t, f) })
	}
}

func testFastX16InPlace(t *testing.T, f quant.Format) {
	const out, in = 48, 1024
	r := rand.New(rand.NewPCG(15, 16))
	w := quantMatrix(r, f, out, in)
	// PackQuantFast gives its source's pages back: a copy's.
	pk := PackQuantFast(append([]byte(nil), w...), f, out, in)
	if !fastGemmOK() {
		if pk != nil && !packAll && (f == quant.Q4_K || f == quant.Q5_0) {
			t.Fatalf("%s regrouped for fast mode without VNNI kernels (%s)", f, Name())
		}
		return
	}
	if pk == nil || pk.x16 == nil {
		t.Fatalf("%s not regrouped for fast mode on a VNNI machine", f)
	}
	rows := Weight{Kind: Quant, Format: f, Bytes: w}
	x16 := Weight{Kind: X16, x16: packX16(w, f, out, in, nil)}
	for _, T := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16} {
		x := make([]float32, T*in)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 2)
		}
		got, file := make([]float32, T*out), make([]float32, T*out)
		MulTFast(got, x, T, x16, out, in)
		MulTFast(file, x, T, rows, out, in)
		alone := make([]float32, out)
		for tt := 0; tt < T; tt++ {
			MulTFast(alone, x[tt*in:(tt+1)*in], 1, x16, out, in)
			for j := 0; j < out; j++ {
				g := got[tt*out+j]
				if math.Float32bits(g) != math.Float32bits(alone[j]) {
					t.Fatalf("T=%d row %d col %d: %g in the batch, %g alone", T, tt, j, g, alone[j])
				}
				if T > 1 && math.Float32bits(g) != math.Float32bits(file[tt*out+j]) {
					t.Fatalf("T=%d row %d col %d: %g regrouped, %g repacked", T, tt, j, g, file[tt*out+j])
				}
			}
		}
	}
}
