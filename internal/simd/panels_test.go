package simd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// panelWeight lays raw [out, in] out as panels of kind (values rounded to
// it) and returns the packed weight, the weight as stored, and its values.
func panelWeight(t testing.TB, raw []float32, kind Kind, out, in int) (Weight, Weight, []float32) {
	w, vals := weightOf(raw, kind)
	var p *panels
	if kind == F32 {
		p = layPanels(F32, w.F32s, out, in, nil)
	} else {
		p = layPanels(kind, w.U16s, out, in, nil)
	}
	if p == nil {
		t.Fatal("no panel memory")
	}
	pk := newPacking(nil, nil, p)
	t.Cleanup(pk.Release)
	pw := w.On(pk, out, in)
	if pw.Kind != Panels {
		t.Fatalf("Weight.On gave %v, want Panels", pw.Kind)
	}
	return pw, w, vals
}

// TestPanels checks the products on panels against float64 for every
// kernel shape (rows 1..6 and past, decode's four panels and one), on the
// kernels and on plain Go, and that a row's result is the same bits
// whatever the number of rows beside it: alone, or anywhere in a batch.
func TestPanels(t *testing.T) {
	defer Force(true)
	r := rand.New(rand.NewPCG(11, 12))
	for _, path := range []bool{true, false} {
		Force(path)
		for _, kind := range []Kind{F32, BF16, F16} {
			for _, sz := range [][2]int{{7, 16}, {64, 48}, {100, 80}, {576, 96}} {
				in, out := sz[0], sz[1]
				raw := make([]float32, out*in)
				for i := range raw {
					raw[i] = float32(r.NormFloat64() * 0.1)
				}
				pw, _, vals := panelWeight(t, raw, kind, out, in)
				const T = 37
				x := make([]float32, T*in)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				alone := make([][]float32, T)
				for tt := range T {
					alone[tt] = make([]float32, out)
					MulT(alone[tt], x[tt*in:(tt+1)*in], 1, pw, out, in)
				}
				for _, n := range []int{2, 3, 5, 6, 7, 13, T} {
					y := make([]float32, n*out)
					for i := range y {
						y[i] = float32(math.NaN()) // every value must be written
					}
					MulT(y, x, n, pw, out, in)
					for tt := 0; tt < n; tt++ {
						row := y[tt*out : (tt+1)*out]
						if !slices.Equal(row, alone[tt]) {
							t.Fatalf("%s %v in=%d out=%d: row %d of %d differs from the row alone", Name(), kind, in, out, tt, n)
						}
					}
				}
				for tt := range T {
					for o := range out {
						var want float64
						for c := range in {
							want += float64(x[tt*in+c]) * float64(vals[o*in+c])
						}
						if d := math.Abs(float64(alone[tt][o]) - want); !(d <= 1e-5*math.Sqrt(float64(in))) {
							t.Fatalf("%s %v in=%d out=%d: y[%d,%d] = %g, want %g", Name(), kind, in, out, tt, o, alone[tt][o], want)
						}
					}
				}
				// Embedding rows come back as stored.
				row := make([]float32, in)
				for _, j := range []int{0, 5, out - 1} {
					if !Row(pw, j, in, row) || !slices.Equal(row, vals[j*in:(j+1)*in]) {
						t.Fatalf("%v in=%d out=%d: Row(%d) is not the stored row", kind, in, out, j)
					}
				}
			}
		}
	}
}

// TestPanelsFast checks fast mode on panels: activations rounded to the
// weights' 16 bits, then the same products as on the stored rows.
func TestPanelsFast(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	const in, out, T = 64, 32, 9
	raw := make([]float32, out*in)
	for i := range raw {
		raw[i] = float32(r.NormFloat64())
	}
	x := make([]float32, T*in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, kind := range []Kind{BF16, F16} {
		pw, w, _ := panelWeight(t, raw, kind, out, in)
		got, want := make([]float32, T*out), make([]float32, T*out)
		MulTFast(got, x, T, pw, out, in)
		MulTFast(want, x, T, w, out, in)
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-4 {
				t.Fatalf("%v: fast value %d on panels %g, on rows %g", kind, i, got[i], want[i])
			}
		}
	}
}

// BenchmarkPanels compares the products on panels with those on the
// stored rows (dot tiles and the decode stream) for SmolLM2-135M's MLP up
// projection, from decode to prefill.
func BenchmarkPanels(b *testing.B) {
	const in, out = 576, 1536
	raw := make([]float32, out*in)
	for i := range raw {
		raw[i] = float32(i%7) * 0.01
	}
	for _, kind := range []Kind{F32, BF16} {
		pw, w, _ := panelWeight(b, raw, kind, out, in)
		for _, T := range []int{1, 4, 8, 16, 32, 128} {
			x := make([]float32, T*in)
			y := make([]float32, T*out)
			for _, c := range []struct {
				name string
				w    Weight
			}{{"rows", w}, {"panels", pw}} {
				b.Run(fmt.Sprintf("%v/T=%d/%s", kindName(kind), T, c.name), func(b *testing.B) {
					for b.Loop() {
						MulT(y, x, T, c.w, out, in)
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(2*float64(T*in*out)/sec/1e9, "GFLOP/s")
					b.ReportMetric(float64(in*out)*float64(unsafe.Sizeof(raw[0]))/sec/1e9, "GB/s(f32)")
				})
			}
		}
	}
}

// TestPackPanels lays matrices of a file mapping out in panels through
// PackF32, PackBF16 and PackF16 where the panel kernels run (AVX2 without
// the coded packings' kernels, or GOZOO_PACK=all): the products follow,
// and the mapping still reads the file's bytes after its pages were given
// back.
func TestPackPanels(t *testing.T) {
	const out, in = 32, 2048 // 128 KB in 16 bits, past packMin
	r := rand.New(rand.NewPCG(15, 16))
	for _, kind := range []Kind{F32, BF16, F16} {
		raw := make([]float32, out*in)
		for i := range raw {
			raw[i] = float32(r.NormFloat64())
		}
		w, vals := weightOf(raw, kind)
		var file []byte
		if kind == F32 {
			file = unsafe.Slice((*byte)(unsafe.Pointer(&w.F32s[0])), 4*len(w.F32s))
		} else {
			file = unsafe.Slice((*byte)(unsafe.Pointer(&w.U16s[0])), 2*len(w.U16s))
		}
		file = slices.Clone(file)
		b := mapTemp(t, file)
		mapped := Weight{Kind: kind}
		var p *Packing
		switch kind {
		case F32:
			mapped.F32s = unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), out*in)
			p = PackF32(mapped.F32s, out, in)
		case BF16:
			mapped.U16s = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), out*in)
			p = PackBF16(mapped.U16s, out, in)
		default:
			mapped.U16s = unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), out*in)
			p = PackF16(mapped.U16s, out, in)
		}
		// F32 and BF16 go to the coded packing first where it runs.
		coded := kind != F16 && (canCoded() || packAll)
		wantPanels := (canPanels() || packAll) && !coded
		if got := p != nil && p.panels != nil; got != wantPanels && !(coded && p != nil) {
			t.Fatalf("%v: laid out in panels: %v, want %v", kind, got, wantPanels)
		}
		if p == nil || p.panels == nil {
			p.Release()
			continue
		}
		pw := mapped.On(p, out, in)
		if pw.Kind != Panels || mapped.On(p, in, out).Kind == Panels {
			t.Fatalf("%v: the packing serves %v for its shape", kind, pw.Kind)
		}
		if !slices.Equal(b, file) {
			t.Fatalf("%v: the mapping reads other bytes after its pages were given back", kind)
		}
		x := make([]float32, in)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		y := make([]float32, out)
		MulT(y, x, 1, pw, out, in)
		for o := range out {
			var want float64
			for c := range in {
				want += float64(x[c]) * float64(vals[o*in+c])
			}
			if d := math.Abs(float64(y[o]) - want); !(d <= 1e-5*math.Sqrt(in)) {
				t.Fatalf("%v: y[%d] = %g, want %g", kind, o, y[o], want)
			}
		}
		p.Release()
	}
}
