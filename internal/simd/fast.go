package simd

import (
	"math"
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/internal/quant"
)

// MulTFast is MulT as llama.cpp's CPU backend computes it, the zoo's fast
// mode: activations are quantized to 8 bits (Q8_0 or Q8_K blocks, see
// quant.QuantizeActs) for products with block-quantized weights, which
// then run as integer dot products; they are rounded to F16 or BF16 for
// products with 16-bit weights; F32 weights are multiplied exactly as
// MulT does. Results follow llama.cpp's to float32 rounding, not
// transformers' float32 forward.
func MulTFast(y, x []float32, T int, w Weight, out, in int) {
	switch k := w.storedKind(); k {
	case F32:
		MulT(y, x, T, w, out, in)
		return
	case BF16, F16:
		bp := rowBuf.Get().(*[]float32)
		if cap(*bp) < T*in {
			*bp = make([]float32, T*in)
		}
		r := (*bp)[:T*in]
		RoundActs(k, r, x[:T*in])
		MulT(y, r, T, w, out, in)
		rowBuf.Put(bp)
		return
	}
	f := w.Format
	if w.Kind == X16 {
		f = w.x16.f
	}
	a := actsPool.Get().(*acts)
	a.quantize(f, x, T, in)
	if w.Kind == X16 && f == quant.Q4_0 && fastX16OK(f) && !(T > 1 && a.gemm && canPackX16Fast(f)) {
		// fastX16Q4_0AVX2 takes the nibbles' offset off per block, for
		// the rows it runs one at a time (mulRowsFastX16): all of a
		// decode, the last T%4 of a prefill of eight rows or more (not
		// on the VNNI kernels, whose corr quantize set).
		first := 0
		if T >= 8 {
			first = T &^ 3
		}
		a.corr = grow(a.corr, T*in/32)
		blockSums(a.corr[first*in/32:], a.q[first*in:T*in], -8)
	}
	if w.Kind == X16 && (f == quant.Q5_0 || f == quant.Q8_0 || f == quant.IQ4_NL) && fastGemmOK() && len(a.corr) == 0 {
		// fastX16{Q5_0,Q8_0,IQ4_NL}VNNI take the weights' offset times Σx a block
		// off, as the rows' kernels do from the corrections a prefill's
		// quantizing sets.
		off, _ := fastGemmFormat(f)
		a.corr = grow(a.corr, T*in/32)
		blockSums(a.corr, a.q[:T*in], off)
	}
	runRows(y, nil, T, w, out, in, a)
	actsPool.Put(a)
}

// mulRowsFastX16 is mulRowsFast on a regrouped weight: Q4_0, IQ4_NL and
// Q8_0 by the regrouped kernels (every four rows of activations against
// each half group staged once, the rest row by row), Q4_1 and Q5_1 row by
// row below eight rows, and the rest on groups of 8 rows rebuilt in the
// file's layout.
func mulRowsFastX16(y []float32, T int, w Weight, out, in, r0, r1 int, a *acts) {
	p := w.x16
	if T > 1 && a.gemm && a.f == p.f && gemmFastX16(y, T, p, out, in, r0, r1, a) {
		return
	}
	if fastX16OK(p.f) && r0%16 == 0 && r1%16 == 0 && (T < 8 || stagesX16(p.f)) {
		t := 0
		if T >= 8 {
			// Each half of a group is four values of eight rows side by
			// side already: staged straight from the regrouping.
			buf := stagePool.Get().(*[]byte)
			st := aligned32(buf, in/32*q8Staged)
			for g := r0 / 16; g < r1/16; g++ {
				for h := 0; h < 2; h++ {
					asmStageX16(p, g, h, st)
					for t = 0; t+4 <= T; t += 4 {
						q, d, _ := a.row(t)
						asmDotActs4Staged8(st, q, d, in, y[t*out+16*g+8*h:], out)
					}
				}
			}
			stagePool.Put(buf)
			t = T &^ 3
		}
		for ; t < T; t++ {
			q, d, sums := a.row(t)
			var corr []int32
			if len(a.corr) > 0 {
				corr = a.corr[t*in/32 : (t+1)*in/32]
			}
			asmFastX16(p, q, d, sums, corr, r0, r1, y[t*out:])
		}
		return
	}
	rb := in / p.f.BlockSize() * p.f.BlockBytes()
	bp := byteBuf.Get().(*[]byte)
	defer byteBuf.Put(bp)
	*bp = grow(*bp, fastGroup*rb)
	for j0 := r0; j0 < r1; j0 += fastGroup {
		g := min(fastGroup, r1-j0)
		p.rowsBytes(j0, g, (*bp)[:g*rb])
		rows := Weight{Kind: Quant, Format: p.f, Bytes: (*bp)[:g*rb]}
		mulRowsFast(y[j0:], T, rows, out, in, 0, g, a)
	}
}

// storedKind is the kind of the checkpoint's weight that w is, or is a
// packing of (Weight.On).
func (w Weight) storedKind() Kind {
	switch {
	case w.Kind == Coded && w.coded.low == 1:
		return BF16
	case w.Kind == Coded:
		return F32
	case w.Kind == X16:
		return Quant
	case w.Kind == Panels:
		return w.panels.kind
	}
	return w.Kind
}

// ToF16 writes x as F16 bits into dst (to nearest, ties to even).
func ToF16(dst []uint16, x []float32) {
	dst = dst[:len(x)]
	done := asmToF16(x, dst)
	for i, v := range x[done:] {
		dst[done+i] = float16.Fromfloat32(v).Bits()
	}
}

// RoundActs rounds x to the 16-bit kind's precision (to nearest, ties to
// even), as llama.cpp converts activations for F16 and BF16 weights.
func RoundActs(k Kind, dst, x []float32) {
	if k == F16 {
		done := asmRoundF16(x, dst)
		for i, v := range x[done:] {
			dst[done+i] = float16.Fromfloat32(v).Float32()
		}
		return
	}
	for i, v := range x {
		u := math.Float32bits(v)
		if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet
			dst[i] = math.Float32frombits((u | 0x00400000) &^ 0xffff)
			continue
		}
		u = (u + 0x7fff + (u >> 16 & 1)) &^ 0xffff
		dst[i] = math.Float32frombits(u)
	}
}

// acts is the quantized activations of one product: per row of x, the
// 8-bit values, one scale per block (Q8_1: a scale and its f16 sum) and
// (Q8_K) the sums of every 16.
type acts struct {
	f    quant.Format // the weight format they are quantized for
	in   int
	q    []int8
	d    []float32
	sums []int16
	// corr is, for a prefill on the VNNI kernels, each block's sum times
	// the repacked weights' offset (see gemmFast); empty otherwise.
	corr   []int32
	offset int32
	gemm   bool      // a prefill for the repacked kernels (fastgemm.go)
	lanes  []int32   // a decode's -offset·(sum of every 4 values), for fastQ4VNNI
	x      []float32 // the rows being quantized
}

var actsPool = sync.Pool{New: func() any { return new(acts) }}

func (a *acts) quantize(f quant.Format, x []float32, T, in int) {
	bs := quant.ActBlock(f)
	a.f, a.in = f, in
	a.q = grow(a.q, T*in)
	a.d = grow(a.d, T*in/bs*quant.ActScales(f))
	if quant.KQuant(f) {
		a.sums = grow(a.sums, T*in/16)
	}
	a.corr, a.lanes = a.corr[:0], a.lanes[:0]
	a.gemm = false
	if off, ok := fastGemmFormat(f); ok && fastGemmOK() {
		a.offset = off
		switch {
		case T > 1:
			a.gemm = true
			if !quant.KQuant(f) {
				a.corr = grow(a.corr, T*in/32)
			}
		case f == quant.Q4_0 || f == quant.Q5_0 || f == quant.Q6_K:
			// Decode's VNNI kernels (fastQ4VNNI, fastQ6KVNNI) start their
			// lanes here.
			a.lanes = grow(a.lanes, in/4)
		}
	} else if T == 1 && decodeLanesAVX2(f) {
		a.offset = 8
		a.lanes = grow(a.lanes, in/4)
	}
	a.x = x
	if T > 1 {
		// A prompt's rows are quantized by the team: alone, this was a
		// tenth of a Qwen3-0.6B prefill with the second core idle.
		Parallel(T, a)
	} else {
		a.Part(0)
	}
	a.x = nil
}

// laneSums sets lanes[i] = scale · (q[4i] + … + q[4i+3]).
func laneSums(lanes []int32, q []int8, scale int32) {
	for i := range lanes {
		lanes[i] = scale * (int32(q[4*i]) + int32(q[4*i+1]) + int32(q[4*i+2]) + int32(q[4*i+3]))
	}
}

// Part quantizes row t of the activations in a.x (and, for the VNNI
// prefill, sums its blocks).
func (a *acts) Part(t int) {
	in := a.in
	q, d, s := a.row(t)
	var corr []int32
	if len(a.corr) > 0 {
		corr = a.corr[t*in/32 : (t+1)*in/32]
	}
	if asmQuantizeActs(a.f, a.x[t*in:(t+1)*in], q, d, s, corr, a.lanes, a.offset) {
		if a.f == quant.Q6_K && len(a.lanes) > 0 {
			// The Q8_K quantizer leaves these to Go: Q6_K's offset 32.
			laneSums(a.lanes, q, -32)
		}
		return
	}
	quant.QuantizeActs(a.f, a.x[t*in:(t+1)*in], q, d, s)
	if len(corr) > 0 {
		blockSums(corr, q, a.offset)
	}
	if len(a.lanes) > 0 {
		laneSums(a.lanes, q, -a.offset)
	}
}

// row returns row t's values, scales and sums.
func (a *acts) row(t int) ([]int8, []float32, []int16) {
	in, nb := a.in, a.in/quant.ActBlock(a.f)*quant.ActScales(a.f)
	q, d := a.q[t*in:(t+1)*in], a.d[t*nb:(t+1)*nb]
	if !quant.KQuant(a.f) {
		return q, d, nil
	}
	return q, d, a.sums[t*in/16 : (t+1)*in/16]
}

func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// kStaged is the bytes of one staged K-quant super-block (fastKStage in
// _gen/fast.go).
const kStaged = 768

// q8Staged is the bytes of one staged block of eight Q8_0-family rows
// (fastStage8 in _gen/stage8.go).
const q8Staged = 544

// stagePool holds the buffers of staged weight groups (asmStageK).
var stagePool = sync.Pool{New: func() any { return new([]byte) }}

// aligned32 returns n bytes of *buf from a 32-byte boundary, so that the
// staged vectors never straddle cache lines.
func aligned32(buf *[]byte, n int) []byte {
	*buf = grow(*buf, n+32)
	off := int(-uintptr(unsafe.Pointer(&(*buf)[0])) & 31)
	return (*buf)[off : off+n]
}

// fastGroup is how many weight rows a prefill product takes at a time:
// their blocks stay in L1 while every row of activations passes.
const fastGroup = 8

// mulRowsFast computes the columns [r0, r1) of y from the quantized
// activations: integer dot products block by block.
func mulRowsFast(y []float32, T int, w Weight, out, in, r0, r1 int, a *acts) {
	if w.Kind == X16 {
		mulRowsFastX16(y, T, w, out, in, r0, r1, a)
		return
	}
	if T > 1 && a.gemm && a.f == w.Format {
		gemmFast(y, T, w, out, in, r0, r1, a)
		return
	}
	rb := w.bytes(in)
	step := r1 - r0
	if T > 1 {
		step = fastGroup
	}
	// With eight or more rows of activations, a K-quant group's weight
	// side is staged once for all of them, not once per four rows.
	// The Q8_0 family's whole groups of eight are staged as int8 values
	// with a weight row in each lane.
	var staged []byte
	q8Family := quant.ActBlock(w.Format) == 32 && quant.ActScales(w.Format) == 1
	if T >= 8 && (quant.KQuant(w.Format) || q8Family) {
		buf := stagePool.Get().(*[]byte)
		staged = aligned32(buf, max(fastGroup*in/256*kStaged, in/32*q8Staged))
		defer stagePool.Put(buf)
	}
	for j0 := r0; j0 < r1; j0 += step {
		j1 := min(r1, j0+step)
		t := 0
		if staged != nil && q8Family && j1-j0 == 8 && asmStage8(w, j0, rb, in, staged) {
			for ; t+4 <= T; t += 4 {
				q, d, _ := a.row(t)
				asmDotActs4Staged8(staged, q, d, in, y[t*out+j0:], out)
			}
		}
		if staged != nil && !q8Family && asmStageK(w, j0, j1-j0, rb, in, staged) {
			for ; t+4 <= T; t += 4 {
				q, d, s := a.row(t)
				asmDotActs4Staged(w, j0, j1-j0, rb, staged, q, d, s, in, y[t*out+j0:], out)
			}
		}
		// Four rows of activations at a time share each weight block.
		for ; t+4 <= T; t += 4 {
			q, d, s := a.row(t)
			if !asmDotActs4(w, j0, j1-j0, rb, q, d, s, in, y[t*out+j0:], out) {
				break
			}
		}
		for ; t < T; t++ {
			q, d, s := a.row(t)
			yt := y[t*out:] // columns j0..j1-1 (mulRowsFastX16 shifts y)
			var lanes []int32
			if T == 1 {
				lanes = a.lanes
			}
			if asmDotActs(w, j0, j1-j0, rb, q, d, s, lanes, yt[j0:j1]) {
				continue
			}
			for j := j0; j < j1; j++ {
				yt[j] = quant.DotActs(w.Format, w.Bytes[j*rb:(j+1)*rb], q, d, s)
			}
		}
	}
}

// GELUTable is GELU (tanh form) as llama.cpp's CPU backend computes it:
// the input rounded to F16 and looked up in a table of F16 results, 0 below
// -10 and x above 10.
func GELUTable(x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	geluOnce.Do(fillGELU)
	return geluTable[float16.Fromfloat32(x)]
}

var (
	geluOnce  sync.Once
	geluTable []float32
)

func fillGELU() {
	geluTable = make([]float32, 1<<16)
	for i := range geluTable {
		x := float16.Frombits(uint16(i)).Float32()
		// ggml_gelu_f32 in float32: 0.5x(1 + tanh(√(2/π)·x·(1 + 0.044715x²))).
		u := float32(math.Sqrt(2/math.Pi)) * x * (1 + 0.044715*x*x)
		g := 0.5 * x * (1 + float32(math.Tanh(float64(u))))
		geluTable[i] = float16.Fromfloat32(g).Float32()
	}
}
