package simd

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/quant"
)

// quantMatrix is out rows of in random N(0, 0.02) weights in f.
func quantMatrix(r *rand.Rand, f quant.Format, out, in int) []byte {
	rb, _ := f.RowBytes(in)
	buf := make([]byte, out*rb)
	src := make([]float32, in)
	for j := 0; j < out; j++ {
		for i := range src {
			src[i] = float32(r.NormFloat64() * 0.02)
		}
		quant.QuantizeRow(f, src, buf[j*rb:(j+1)*rb])
	}
	return buf
}

// formatsIn lists the formats a table by format marks, in order.
func formatsIn(set *[256]bool) []quant.Format {
	var fs []quant.Format
	for f, in := range set {
		if in {
			fs = append(fs, quant.Format(f))
		}
	}
	return fs
}

// TestX16 regroups matrices of x16Exact's formats by 16 rows: the rows
// come back byte for byte, decode's kernel matches the float64 products,
// and products of more rows match the file layout's (bit for bit where
// they rebuild its rows, to 1e-6 of Σ|w·x| on panels).
func TestX16(t *testing.T) {
	if !canX16() {
		t.Skip("no X16 kernels on this CPU") // the regrouping is never made without them
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, f := range formatsIn(&x16Exact) {
		for _, s := range [][2]int{{32, 256}, {96, 1024}} {
			out, in := s[0], s[1]
			t.Run(fmt.Sprintf("%v/%dx%d", f, out, in), func(t *testing.T) {
				w := quantMatrix(r, f, out, in)
				p := packX16(w, f, out, in, nil)
				rb, _ := f.RowBytes(in)
				row := make([]byte, rb)
				for j := 0; j < out; j++ {
					p.rowBytes(j, row)
					if !bytes.Equal(row, w[j*rb:(j+1)*rb]) {
						t.Fatalf("row %d does not come back as it was", j)
					}
				}
				plain, regrouped := Weight{Kind: Quant, Format: f, Bytes: w}, Weight{Kind: X16, x16: p}
				x := make([]float32, 3*in)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				got, want := make([]float32, 3*out), make([]float32, 3*out)
				var sums []float32
				n, _ := x16Inputs(f)
				regrouped.sums = x16Sums(x[:in], n, &sums) // as MulT sets them
				mulRows(got, x, 1, regrouped, out, in, 0, out)
				mulRows(want, x, 1, plain, out, in, 0, out)
				ref := make([]float32, in)
				for j := range out {
					quant.DequantizeRow(f, w[j*rb:(j+1)*rb], ref)
					var sum, mag float64
					for i := range ref {
						sum += float64(ref[i]) * float64(x[i])
						mag += math.Abs(float64(ref[i]) * float64(x[i]))
					}
					if d := math.Abs(float64(got[j]) - sum); d > 2e-6*mag {
						t.Fatalf("row %d: regrouped %g, float64 %g (file layout %g)", j, got[j], sum, want[j])
					}
				}
				// 16 rows from row 16: one group, as a team's chunk.
				mulRows(got, x, 1, regrouped, out, in, 16, 32)
				// More rows: on panels where a kernel widens f (another
				// summation order), else bit for bit the file layout's.
				mulRows(got, x, 3, regrouped, out, in, 0, out)
				mulRows(want, x, 3, plain, out, in, 0, out)
				for i := range got {
					var mag float64
					if canPanelX16(f) {
						quant.DequantizeRow(f, w[i%out*rb:(i%out+1)*rb], ref)
						for c, v := range ref {
							mag += math.Abs(float64(v) * float64(x[i/out*in+c]))
						}
					}
					if math.Abs(float64(got[i]-want[i])) > 1e-6*mag {
						t.Fatalf("prefill product %d: regrouped %g, file layout %g", i, got[i], want[i])
					}
				}
			})
		}
	}
}

// TestPackQuant packs only what it may: a Q4_0 matrix of whole groups
// of 16 rows; the mapping's bytes read back after their pages are given
// back, the packing serves no other format, an embedding row and a
// decode product on it equal the file's, allocating nothing, and a
// released packing serves nothing.
func TestPackQuant(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	const out, in = 240, 512 // 69 KB: above packMin
	w := quantMatrix(r, quant.Q4_0, out, in)
	odd := quantMatrix(r, quant.Q4_0, 120, in) // 120 rows: not whole groups
	file := append(append([]byte(nil), w...), odd...)
	b := mapTemp(t, file)
	mw, modd := b[:len(w)], b[len(w):]
	weight := func(bs []byte) Weight { return Weight{Kind: Quant, Format: quant.Q4_0, Bytes: bs} }
	heap := append([]byte(nil), w...)

	p := PackQuant(mw, quant.Q4_0, out, in)
	if (p != nil) != (exactX16OK(quant.Q4_0) || packAll) {
		t.Fatalf("a matrix of a mapping packed: %v, with kernels for it: %v (GOZOO_PACK=all: %v)", p != nil, exactX16OK(quant.Q4_0), packAll)
	}
	if p == nil {
		return
	}
	defer p.Release()
	if q := PackQuant(modd, quant.Q4_0, 120, in); q != nil {
		q.Release()
		t.Fatal("packed rows that are not whole groups of 16")
	}
	if (Weight{Kind: Quant, Format: quant.Q8_0, Bytes: mw}).On(p, out, in).Kind == X16 {
		t.Fatal("the packing served another format")
	}
	if !bytes.Equal(mw, w) {
		t.Fatal("the mapping reads otherwise after its pages were given back")
	}
	// An embedding row comes from the packing, as the file has it.
	rb, _ := quant.Q4_0.RowBytes(in)
	row, want0 := make([]float32, in), make([]float32, in)
	quant.DequantizeRow(quant.Q4_0, w[37*rb:38*rb], want0)
	if !Row(weight(mw).On(p, out, in), 37, in, row) {
		t.Fatal("Row did not read the packing")
	}
	for i := range row {
		if row[i] != want0[i] {
			t.Fatalf("row 37 value %d: %g from the packing, %g from the file", i, row[i], want0[i])
		}
	}
	if Row(weight(heap), 37, in, row) {
		t.Fatal("Row read a packing of a matrix that has none")
	}
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	got, want := make([]float32, out), make([]float32, out)
	pw := weight(mw).On(p, out, in)
	for r0 := 0; r0 < out; r0 += 16 { // a team's chunks: whole groups
		mulRowsAny(got, x, 1, pw, out, in, r0, r0+16, nil)
	}
	mulRows(want, x, 1, weight(heap), out, in, 0, out)
	for j := range got {
		if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*math.Abs(float64(want[j]))+1e-5 {
			t.Fatalf("row %d: packed %g, file layout %g", j, got[j], want[j])
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		mulRows(got, x, 1, weight(mw).On(p, out, in), out, in, 0, out)
	}); a != 0 && !raceOn {
		t.Errorf("a decode product on the packing allocates %.0f times", a)
	}
	p.Release()
	if weight(mw).On(p, out, in).Kind == X16 {
		t.Fatal("a released packing still serves its weight")
	}
}

// BenchmarkX16 is one thread's exact decode product of 3072 rows of 1024,
// each format that regroups for exact mode here, by row and regrouped
// by 16 rows: in cache, and streamed from memory (64 matrices in turn).
func BenchmarkX16(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	const out, in = 3072, 1024
	x, y := make([]float32, in), make([]float32, out)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, f := range []quant.Format{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.Q5_0, quant.Q5_1, quant.Q5_K} {
		if !exactX16OK(f) {
			continue
		}
		for _, copies := range []int{1, 64} {
			var plain, regrouped []Weight
			for range copies {
				w := quantMatrix(r, f, out, in)
				plain = append(plain, Weight{Kind: Quant, Format: f, Bytes: w})
				var sums []float32
				n, bcast := x16Inputs(f)
				s := x16Sums(x, n, &sums)
				if bcast {
					s = broadcastAfter(s, x, &sums)
				}
				regrouped = append(regrouped, Weight{Kind: X16, x16: packX16(w, f, out, in, nil), sums: s})
			}
			for _, c := range []struct {
				name string
				ws   []Weight
			}{{"rows", plain}, {"x16", regrouped}} {
				b.Run(fmt.Sprintf("%v/%d/%s", f, copies, c.name), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						mulRows(y, x, 1, c.ws[i%copies], out, in, 0, out)
					}
					b.ReportMetric(2*out*in/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkX16Stream is decode's product as MulT runs it (the caller and
// the team), by row and regrouped, in turn on each iteration, over K-quant
// matrices streamed from memory: 30 of Qwen3-0.6B's 3072x1024, and its
// 151936x1024 head. Two threads are bound by memory here, not by the
// vector pipes, so it reports GB/s of weights read (the file's bytes),
// which is where the regrouped kernels' prefetching shows.
func BenchmarkX16Stream(b *testing.B) {
	if !canX16() {
		b.Skip("no X16 kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(19, 20))
	for _, s := range [][3]int{{3072, 1024, 30}, {151936, 1024, 1}} {
		out, in, copies := s[0], s[1], s[2]
		for _, f := range []quant.Format{quant.Q4_K, quant.Q6_K} {
			var plain, regrouped []Weight
			for range copies {
				w := quantMatrix(r, f, out, in)
				plain = append(plain, Weight{Kind: Quant, Format: f, Bytes: w})
				regrouped = append(regrouped, Weight{Kind: X16, x16: packX16(w, f, out, in, nil)})
			}
			x, y := make([]float32, in), make([]float32, out)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			rb, _ := f.RowBytes(in)
			b.Run(fmt.Sprintf("%v/%dx%d", f, out, in), func(b *testing.B) {
				var rows, x16 time.Duration
				for i := 0; i < b.N; i++ {
					t0 := time.Now()
					MulT(y, x, 1, plain[i%copies], out, in)
					t1 := time.Now()
					MulT(y, x, 1, regrouped[i%copies], out, in)
					rows, x16 = rows+t1.Sub(t0), x16+time.Since(t1)
				}
				bytes := float64(out*rb) * float64(b.N)
				b.ReportMetric(bytes/rows.Seconds()/1e9, "rows-GB/s")
				b.ReportMetric(bytes/x16.Seconds()/1e9, "x16-GB/s")
			})
		}
	}
}

// TestQ5Bits checks that the regrouped Q5_1 fifth bits put value 4j+k's
// bit at bit j of byte k and that q5Unbits undoes it.
func TestQ5Bits(t *testing.T) {
	for v := range 32 {
		got := q5Bits(1 << v)
		if want := uint32(1) << (8*(v%4) + v/4); got != want {
			t.Errorf("value %d: bits %#08x, want %#08x", v, got, want)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		qh := r.Uint32()
		if back := q5Unbits(q5Bits(qh)); back != qh {
			t.Fatalf("%#08x comes back as %#08x", qh, back)
		}
	}
}

// BenchmarkFastX16 is one thread's fast-mode decode product of 3072 rows
// of 1024 in the formats fast decode regroups on AVX2, by row and
// regrouped by 16 rows: in cache, and streamed from memory (64 matrices
// in turn).
func BenchmarkFastX16(b *testing.B) {
	r := rand.New(rand.NewPCG(21, 22))
	const out, in = 3072, 1024
	x, y := make([]float32, in), make([]float32, out)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, f := range []quant.Format{quant.Q4_0, quant.Q8_0, quant.IQ4_NL, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.IQ4_XS, quant.Q2_K, quant.Q3_K} {
		if !fastX16OK(f) {
			continue
		}
		for _, copies := range []int{1, 64} {
			var plain, regrouped []Weight
			for range copies {
				w := quantMatrix(r, f, out, in)
				plain = append(plain, Weight{Kind: Quant, Format: f, Bytes: w})
				regrouped = append(regrouped, Weight{Kind: X16, x16: packX16(w, f, out, in, nil)})
			}
			for _, c := range []struct {
				name string
				ws   []Weight
			}{{"rows", plain}, {"x16", regrouped}} {
				b.Run(fmt.Sprintf("%v/%d/%s", f, copies, c.name), func(b *testing.B) {
					a := new(acts)
					a.quantize(f, x, 1, in)
					// The decode kernels' corrections, as MulTFast sets them.
					switch off, _ := fastGemmFormat(f); {
					case f == quant.Q4_0:
						a.corr = grow(a.corr, in/32)
						blockSums(a.corr, a.q, -8)
					case (f == quant.Q5_0 || f == quant.Q8_0) && fastGemmOK():
						a.corr = grow(a.corr, in/32)
						blockSums(a.corr, a.q, off)
					}
					for i := 0; i < b.N; i++ {
						mulRowsFast(y, 1, c.ws[i%copies], out, in, 0, out, a)
					}
					b.ReportMetric(2*out*in/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestX16RoundTrip packs every format that regroups and checks that each
// row comes back as the file had it, and that exact mode's products on a
// regrouping made for fast decode (rebuilt rows) are the file layout's:
// bit for bit in prefill, where both widen rows for the float tiles, and
// within float32 summation order in decode, where the file layout may
// have a fused kernel, and in prefill where groups are widened into
// panels (whose values must be the file's exactly). A weight has one
// packing, which both modes read.
func TestX16RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const out, in = 32, 512
	formats := slices.Sorted(maps.Keys(x16Words))
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			w := quantMatrix(r, f, out, in)
			p := packX16(w, f, out, in, nil)
			if len(p.data) < out/16*p.groupBytes() {
				t.Fatalf("%d bytes for %d groups of %d", len(p.data), out/16, p.groupBytes())
			}
			rb, _ := f.RowBytes(in)
			row := make([]byte, rb)
			for j := 0; j < out; j++ {
				p.rowBytes(j, row)
				if !bytes.Equal(row, w[j*rb:(j+1)*rb]) {
					t.Fatalf("row %d does not come back as it was", j)
				}
			}
			// Half groups (by kernel where one runs) and a ragged run.
			rows := make([]byte, out*rb)
			for _, c := range [][2]int{{0, 8}, {8, 8}, {24, 8}, {3, 5}, {0, 32}, {5, 27}} {
				r0, g := c[0], c[1]
				clear(rows)
				p.rowsBytes(r0, g, rows[:g*rb])
				if !bytes.Equal(rows[:g*rb], w[r0*rb:(r0+g)*rb]) {
					t.Fatalf("rows %d..%d do not come back as they were", r0, r0+g-1)
				}
			}
			x := make([]float32, 8*in)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			// mag[j] is Σ|w·x| of row j against x's first row: the scale of
			// float32 summation-order differences in decode.
			mag, ref := make([]float64, out), make([]float32, in)
			for j := range out {
				quant.DequantizeRow(f, w[j*rb:(j+1)*rb], ref)
				for i, v := range ref {
					mag[j] += math.Abs(float64(v) * float64(x[i]))
				}
			}
			// Where a kernel widens groups into panels, more rows run there,
			// in another summation order; the panel must hold the file's
			// values exactly.
			panels := canPanelX16(f)
			if panels {
				panel := make([]float32, 16*in)
				for g := range out / 16 {
					asmPanelX16(p, g, panel)
					for r := range 16 {
						quant.DequantizeRow(f, w[(16*g+r)*rb:(16*g+r+1)*rb], ref)
						for i, v := range ref {
							if panel[16*i+r] != v {
								t.Fatalf("row %d, value %d: %g in the panel, %g dequantized", 16*g+r, i, panel[16*i+r], v)
							}
						}
					}
				}
			}
			got, want, alone := make([]float32, 8*out), make([]float32, 8*out), make([]float32, out)
			for _, T := range []int{1, 2, 3, 4, 5, 8} {
				MulT(got, x, T, Weight{Kind: X16, x16: p}, out, in)
				MulT(want, x, T, Weight{Kind: Quant, Format: f, Bytes: w}, out, in)
				byRow := p.byRows(T) && exactX16OK(f)
				for i := range T * out {
					if d := math.Abs(float64(got[i] - want[i])); T > 1 && !panels && !byRow && d != 0 || d > 1e-6*mag[i%out] {
						t.Fatalf("T=%d, product %d: regrouped %g, file layout %g", T, i, got[i], want[i])
					}
				}
				// A few rows run row by row on the decode kernel (Q8_0's
				// four at a time): each row's result is its bits alone.
				for r := 0; byRow && r < T; r++ {
					MulT(alone, x[r*in:(r+1)*in], 1, Weight{Kind: X16, x16: p}, out, in)
					for j, v := range alone {
						if math.Float32bits(v) != math.Float32bits(got[r*out+j]) {
							t.Fatalf("T=%d row %d, product %d: %g in the rows, %g alone", T, r, j, got[r*out+j], v)
						}
					}
				}
			}
		})
	}
}
