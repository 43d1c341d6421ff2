package simd

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/internal/quant"
)

// randomBlocks fills rows of a quantized format with random bytes and sane
// half-float scales (random bits could be NaN).
func randomBlocks(r *rand.Rand, f quant.Format, rows, cols int) []byte {
	rb, err := f.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	b := make([]byte, rows*rb)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	scale := func(off int) {
		binary.LittleEndian.PutUint16(b[off:], float16.Fromfloat32(0.01+0.02*r.Float32()).Bits())
	}
	for blk := 0; blk < len(b)/f.BlockBytes(); blk++ {
		o := blk * f.BlockBytes()
		switch f {
		case quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.IQ4_NL, quant.IQ4_XS:
			scale(o)
		case quant.Q4_K, quant.Q4_1, quant.Q5_1, quant.Q5_K:
			scale(o)
			scale(o + 2)
		case quant.Q6_K:
			scale(o + 208)
		case quant.Q3_K:
			scale(o + 108)
		case quant.Q2_K:
			scale(o + 80)
			scale(o + 82)
		}
	}
	return b
}

// TestMulTQuant: a quantized weight multiplies exactly as its float32
// dequantization does, in decode and prefill shapes, on every path.
func TestMulTQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, f := range allQuantFormats {
		// Odd counts of blocks, so the 32-value formats' two-block loops
		// meet their last block, and the K-quant kernels (which unpack
		// the next super-block's scales while using this one's) meet rows
		// of one super-block and of an odd count.
		ins := []int{256, 512, 768}
		if f.BlockSize() == 32 {
			ins = []int{544}
		}
		for _, T := range []int{1, 3, 9} {
			for _, v := range quantVariants() {
				for _, in := range ins {
					t.Run(fmt.Sprintf("%s/T=%d/in=%d/%s", f, T, in, v.name), func(t *testing.T) {
						saved, savedGFNI := active, useGFNI
						active, useGFNI = v.is, v.gfni
						defer func() { active, useGFNI = saved, savedGFNI }()
						const out = 130
						q := randomBlocks(r, f, out, in)
						deq := make([]float32, out*in)
						quant.DequantizeRow(f, q, deq)
						x := make([]float32, T*in)
						for i := range x {
							x[i] = r.Float32()*2 - 1
						}
						got, want := make([]float32, T*out), make([]float32, T*out)
						MulT(got, x, T, Weight{Kind: Quant, Format: f, Bytes: q}, out, in)
						MulT(want, x, T, Weight{Kind: F32, F32s: deq}, out, in)
						for i := range got {
							// Fused kernels sum in another order: float32 noise,
							// bounded by the sum of the terms' magnitudes.
							tt, j := i/out, i%out
							var mag float64
							for c := 0; c < in; c++ {
								mag += math.Abs(float64(deq[j*in+c] * x[tt*in+c]))
							}
							if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*mag {
								t.Fatalf("y[%d] = %g, the dequantized weight gives %g", i, got[i], want[i])
							}
						}
					})
				}
			}
		}
	}
}

// quantVariant is a set of quantized kernels to test: an instruction set,
// and with AVX-512 whether the GFNI kernels are on.
type quantVariant struct {
	name string
	is   *isa
	gfni bool
}

// quantVariants lists every kernel set this CPU runs, then plain Go.
func quantVariants() []quantVariant {
	var out []quantVariant
	for _, is := range supported() {
		if is.lanes == 16 && useGFNI {
			out = append(out, quantVariant{isaName(is) + "+gfni", is, true})
		}
		out = append(out, quantVariant{isaName(is), is, false})
	}
	return append(out, quantVariant{"go", nil, false})
}

func isaName(is *isa) string {
	if is == nil {
		return "go"
	}
	return is.name
}

// TestDequantKernels: the assembly dequantization is bit-identical to
// ggml's order of float32 operations (quant.DequantizeRow).
func TestDequantKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, is := range supported() {
		for _, f := range allQuantFormats {
			saved := active
			active = is
			const rows, in = 5, 512
			q := randomBlocks(r, f, rows, in)
			rb, _ := f.RowBytes(in)
			got, want := make([]float32, rows*in), make([]float32, rows*in)
			ok := asmQuant(nil, Weight{Kind: Quant, Format: f, Bytes: q}, 0, rows, in, rb, nil, got)
			active = saved
			if !ok {
				t.Errorf("%s %s: no dequantizing kernel", is.name, f)
				continue
			}
			quant.DequantizeRow(f, q, want)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %s: value %d = %g, ggml's order gives %g", is.name, f, i, got[i], want[i])
				}
			}
		}
	}
}

// TestGemvKernels: every format has an exact decode kernel fused with its
// dequantization on each instruction set this CPU runs (except the ones
// listed as widening first), and it agrees with the dequantized row's
// float64 dot product within float32 summation noise.
func TestGemvKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	widened := map[quant.Format]bool{quant.Q5_0: true} // AVX2: widened then multiplied
	for _, is := range supported() {
		for _, f := range allQuantFormats {
			const rows = 7
			in := 768
			if f.BlockSize() == 32 {
				in = 544
			}
			q := randomBlocks(r, f, rows, in)
			rb, _ := f.RowBytes(in)
			x := make([]float32, in)
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			got := make([]float32, rows)
			saved := active
			active = is
			ok := asmQuant(x, Weight{Kind: Quant, Format: f, Bytes: q}, 0, rows, in, rb, got, nil)
			active = saved
			if !ok {
				if !(is.lanes == 8 && widened[f]) {
					t.Errorf("%s %s: no fused decode kernel", is.name, f)
				}
				continue
			}
			deq := make([]float32, rows*in)
			quant.DequantizeRow(f, q, deq)
			for j := 0; j < rows; j++ {
				var want, mag float64
				for c := 0; c < in; c++ {
					p := float64(deq[j*in+c]) * float64(x[c])
					want += p
					mag += math.Abs(p)
				}
				if d := math.Abs(float64(got[j]) - want); d > 1e-6*mag {
					t.Fatalf("%s %s: y[%d] = %g, want %g", is.name, f, j, got[j], want)
				}
			}
		}
	}
}

// TestExactProducts: the products that the AVX2 kernels fuse with the
// following add or subtract (exactProduct in _gen/lowbit.go) are exact in
// float32 for every finite half scale, so fusing rounds as ggml's
// separate multiply and add do: d·q (Q4_1/Q5_1, q < 32) and (d·sc)·q
// (K-quants, sc < 64, q < 32).
func TestExactProducts(t *testing.T) {
	for h := 0; h < 0x7c00; h++ { // positive finite halves; signs do not matter
		d := float16.Frombits(uint16(h)).Float32()
		for sc := 1; sc < 64; sc++ {
			ds := d * float32(sc)
			if float64(ds) != float64(d)*float64(sc) {
				t.Fatalf("d=%g sc=%d: d·sc is not exact", d, sc)
			}
			for q := 1; q < 32; q++ {
				if float64(ds*float32(q)) != float64(ds)*float64(q) {
					t.Fatalf("d=%g sc=%d q=%d: (d·sc)·q is not exact", d, sc, q)
				}
			}
		}
	}
}
