package layers

import (
	"fmt"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// cachedAttention is causal grouped-query attention of one step's rows over
// a layer's KV cache, which it then extends with the step's keys and
// values.
//
// Inputs: q [T, Hq, Dk], this step's k [T, Hkv, Dk] and v [T, Hkv, Dv], the
// caches kc [Hkv, S, Dk] and vc [Hkv, S, Dv], and positions [T]. The cache
// holds earlier positions in slot p % S: S is the capacity for a
// full-attention layer and the window for a sliding one (a ring). Query row
// t at position p attends keys lo..p, where lo = 0 for full attention and
// p-window+1 for a sliding window: keys before this step come from the
// cache, this step's from k and v, so a chunk may be longer than the ring
// and stays exact across its boundary. Padding rows (position -1) come out
// zero. Query head h reads kv head h / (Hq/Hkv), HF's repeat_interleave
// mapping. Only keys a query can see are read, so a step costs what the
// context holds, not what the cache could hold.
//
// After attending, the step's real rows are written into the cache: the
// op's one side effect, on an input Gorgonia treats as read-only data.
//
// Scores and weighted sums run on internal/simd's kernels (dot-product
// tiles for the scores and for prefill's P·V through Vᵀ, a register-held
// weighted sum of value rows for decode); the softmax has a float32 exp
// and float64 sums. With a
// sink, the probabilities are also stored as [T, Hq, keys] over key
// positions 0..last (zero outside each row's window); without one they are
// never materialised beyond a scratch row block.
type cachedAttention struct {
	name   string
	scale  float32
	window int  // 0: full causal attention
	kv16   bool // caches of F16 bits (graphs.Options.KVCacheF16)
	sink   *graphs.Sink
}

func (k cachedAttention) Name() string { return "attention " + k.name }
func (k cachedAttention) String() string {
	return fmt.Sprintf("Attention{%s,scale=%g,window=%d,kv16=%v,capture=%v}", k.name, k.scale, k.window, k.kv16, k.sink != nil)
}
func (k cachedAttention) Signature() []hm.Type {
	cache := ops.T(3, nil)
	if k.kv16 {
		cache = ops.T(3, tensor.Uint16)
	}
	return []hm.Type{ops.T(3, nil), ops.T(3, nil), ops.T(3, nil), cache, cache, ops.T(1, tensor.Int), ops.T(2, nil)}
}
func (k cachedAttention) Shape(in []tensor.Shape) (tensor.Shape, error) {
	q, kk, v, kc, vc, pos := in[0], in[1], in[2], in[3], in[4], in[5]
	switch {
	case len(q) != 3 || len(kk) != 3 || len(v) != 3 || len(kc) != 3 || len(vc) != 3 || len(pos) != 1:
		return nil, fmt.Errorf("want q, k, v [T, H, D], caches [H, S, D] and positions [T]; got %v %v %v %v %v %v", q, kk, v, kc, vc, pos)
	case kk[0] != q[0] || v[0] != q[0] || pos[0] != q[0]:
		return nil, fmt.Errorf("q %v, k %v, v %v and positions %v have different rows", q, kk, v, pos)
	case kk[1] == 0 || q[1]%kk[1] != 0 || v[1] != kk[1]:
		return nil, fmt.Errorf("%d query heads do not group over %d kv heads (v has %d)", q[1], kk[1], v[1])
	case q[2] != kk[2] || kc[0] != kk[1] || kc[2] != kk[2] || vc[0] != v[1] || vc[2] != v[2] || kc[1] != vc[1]:
		return nil, fmt.Errorf("caches %v and %v do not fit keys %v and values %v", kc, vc, kk, v)
	}
	return tensor.Shape{q[0], q[1] * v[2]}, nil
}

// attnDims are one step's sizes: T rows, n of them real, from position p0.
type attnDims struct{ T, Hq, Hkv, Dk, Dv, S, p0, n int }

func (k cachedAttention) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	var f [3][]float32
	for i := range f {
		var err error
		if f[i], err = ops.Float32s(in[i]); err != nil {
			return nil, err
		}
	}
	kc, err := k.cache(in[3])
	if err != nil {
		return nil, err
	}
	vc, err := k.cache(in[4])
	if err != nil {
		return nil, err
	}
	positions, err := ops.Ints(in[5])
	if err != nil {
		return nil, err
	}
	qs, ks, vs, cs := in[0].Shape(), in[1].Shape(), in[2].Shape(), in[3].Shape()
	d := attnDims{T: qs[0], Hq: qs[1], Hkv: ks[1], Dk: qs[2], Dv: vs[2], S: cs[1]}
	if d.p0, d.n, err = ops.Rows(positions); err != nil {
		return nil, err
	}
	ring := k.window > 0 && k.window <= d.S
	if !ring && d.p0+d.n > d.S {
		return nil, fmt.Errorf("positions %d..%d do not fit a cache of %d positions", d.p0, d.p0+d.n-1, d.S)
	}
	out := o.Float32s(d.T * d.Hq * d.Dv)
	var probs []float32
	if k.sink != nil {
		probs = make([]float32, d.T*d.Hq*(d.p0+d.n))
	}
	if d.n > 0 {
		t := ops.Shared(o, func() *attnTask { return new(attnTask) })
		if d.n == 1 {
			// Decode (one real row, maybe padded): the step's key and
			// value go into the cache first, so each head reads one run
			// of keys, the new one included, in one product and one
			// weighted sum. The slot it takes held a position out of
			// view (a ring is at least the window).
			writeCache(kc, f[1], d, d.Dk)
			writeCache(vc, f[2], d, d.Dv)
			k.attend(t, out, probs, f[0], nil, nil, kc, vc, d)
		} else {
			kNew, vNew := f[1], f[2]
			if k.kv16 {
				// This step's keys and values are read as the cache will
				// hold them, so that a sequence gives the same results
				// however it is cut into steps (and as llama.cpp, which
				// attends from its F16 cache, computes).
				t.k16, t.v16 = roundF16(t.k16, kNew), roundF16(t.v16, vNew)
				kNew, vNew = t.k16, t.v16
			}
			k.attend(t, out, probs, f[0], kNew, vNew, kc, vc, d)
			writeCache(kc, f[1], d, d.Dk)
			writeCache(vc, f[2], d, d.Dv)
		}
	}
	if k.sink != nil {
		k.sink.Store(ops.NewF32(probs, d.T, d.Hq, d.p0+d.n))
	}
	return o.Tensor(out, d.T, d.Hq*d.Dv), nil
}

// segment is a run of cached keys in contiguous slots: keys at positions
// pos..pos+len-1 live in slots slot..slot+len-1.
type segment struct{ pos, slot, len int }

func (k cachedAttention) lo(p int) int {
	if k.window > 0 {
		return max(0, p-k.window+1)
	}
	return 0
}

// attend runs the step's heads. A decode step's key and value (one real
// row) are in the cache already, and kNew, vNew are unused.
func (k cachedAttention) attend(t *attnTask, out, probs, q, kNew, vNew []float32, kc, vc cacheRows, d attnDims) {
	t.k, t.out, t.probs, t.q, t.kNew, t.vNew, t.kc, t.vc, t.d = k, out, probs, q, kNew, vNew, kc, vc, d
	t.nsegs = 0
	// Keys in view: positions a..p0+n-1; those before end are read from
	// the cache: before p0, or all of them in a decode step.
	t.a = k.lo(d.p0)
	end := d.p0
	if d.n == 1 {
		end++
	}
	if t.a < end {
		start := t.a % d.S
		first := min(end-t.a, d.S-start)
		t.segs[0] = segment{t.a, start, first}
		t.nsegs = 1
		if rest := end - t.a - first; rest > 0 {
			t.segs[1] = segment{t.a + first, 0, rest}
			t.nsegs = 2
		}
	}
	t.width = d.p0 + d.n - t.a
	t.cur = d.p0 - t.a // column of this step's first key
	// Each head's scratch slot exists before the heads run in parallel:
	// a part only touches its own.
	for len(t.scores) < d.Hq {
		t.scores, t.vt = append(t.scores, nil), append(t.vt, nil)
	}
	// Heads are independent: the team takes them when there is enough
	// work to pay for the hand-over.
	if d.Hq > 1 && d.n*t.width*d.Dk*d.Hq >= attnSplitWork {
		simd.Parallel(d.Hq, t)
		return
	}
	for h := 0; h < d.Hq; h++ {
		t.Part(h)
	}
}

// attnSplitWork is the number of query-key products from which a step's
// heads are shared with the team.
const attnSplitWork = 1 << 16

// attnTask is one attention step's work, a part per query head. One
// lives in the session's shared kernel state (ops.Shared), with each
// head's scratch (scores, Vᵀ), reused by every layer and step.
type attnTask struct {
	k                         cachedAttention
	out, probs, q, kNew, vNew []float32
	kc, vc                    cacheRows
	k16, v16                  []float32 // this step's keys and values rounded to F16 (kv16)
	d                         attnDims
	segs                      [2]segment // at most two runs: a ring wraps once
	nsegs                     int
	a, width, cur             int
	scores, vt                [][]float32 // per head
}

// buffers returns head h's score block and, for a prefill, its Vᵀ.
func (t *attnTask) buffers(h, ns, nv int) ([]float32, []float32) {
	if cap(t.scores[h]) < ns {
		t.scores[h] = make([]float32, ns)
	}
	if cap(t.vt[h]) < nv {
		t.vt[h] = make([]float32, nv)
	}
	return t.scores[h][:ns], t.vt[h][:nv]
}

// Part attends query head h.
func (t *attnTask) Part(h int) {
	d, k := t.d, t.k
	a, width, cur := t.a, t.width, t.cur
	past := t.segs[:t.nsegs]
	nv := 0
	if d.n > 1 {
		nv = d.Dv * width
	}
	scores, vt := t.buffers(h, d.n*width, nv)
	rep := d.Hq / d.Hkv
	g := h / rep
	qStride, oStride := d.Hq*d.Dk, d.Hq*d.Dv
	S := blas32.General{Rows: d.n, Cols: width, Stride: width, Data: scores}
	Q := blas32.General{Rows: d.n, Cols: d.Dk, Stride: qStride, Data: t.q[h*d.Dk:]}
	for _, sg := range past {
		t.kc.dotsT(S, Q, sg.pos-a, (g*d.S+sg.slot)*d.Dk, sg.len, k.scale)
	}
	if d.n > 1 {
		// Prefill: this step's keys are not in the cache yet.
		K := blas32.General{Rows: d.n, Cols: d.Dk, Stride: d.Hkv * d.Dk, Data: t.kNew[g*d.Dk:]}
		scoreBlock(S, cur, Q, K, k.scale)
	}
	for r := 0; r < d.n; r++ {
		p := d.p0 + r
		row := scores[r*width : (r+1)*width]
		softmaxRange(row, k.lo(p)-a, p-a+1)
		if t.probs != nil {
			keys := d.p0 + d.n
			copy(t.probs[(r*d.Hq+h)*keys+a:], row)
		}
	}
	if d.n > 1 {
		// Prefill: P·V as dot products of P's rows with Vᵀ's rows, on
		// the SIMD tiles.
		transposeV(vt, t.vc, t.vNew, past, cur, a, width, g, d)
		simd.DotsT(t.out[h*d.Dv:], oStride, scores, width, d.n, vt, width, d.Dv, width, 1)
		return
	}
	// Decode: one query's weighted sum of the value rows, all in the
	// cache.
	o := t.out[h*d.Dv : (h+1)*d.Dv]
	for i, sg := range past {
		t.vc.weigh(o, scores[sg.pos-a:], (g*d.S+sg.slot)*d.Dv, d.Dv, sg.len, i > 0)
	}
}

// transposeV writes the values of kv head g for key columns 0..width-1
// (cached segments, then this step's rows from column cur) as Vᵀ
// [Dv, width].
func transposeV(vt []float32, vc cacheRows, vNew []float32, past []segment, cur, a, width, g int, d attnDims) {
	var buf [256]float32
	row := buf[:0]
	if d.Dv > len(buf) {
		row = make([]float32, d.Dv)
	} else {
		row = buf[:d.Dv]
	}
	for _, sg := range past {
		for r := 0; r < sg.len; r++ {
			src := vc.row(row, (g*d.S+sg.slot+r)*d.Dv)
			col := sg.pos - a + r
			for c, v := range src {
				vt[c*width+col] = v
			}
		}
	}
	for t := 0; t < d.n; t++ {
		src := vNew[(t*d.Hkv+g)*d.Dv:][:d.Dv]
		for c, v := range src {
			vt[c*width+cur+t] = v
		}
	}
}

// scoreBlock writes scale · Q·Kᵀ into the columns c0.. of S, with the
// SIMD dot-product tiles (one query row: a matrix-vector product).
func scoreBlock(S blas32.General, c0 int, Q, K blas32.General, scale float32) {
	simd.DotsT(S.Data[c0:], S.Stride, Q.Data, Q.Stride, Q.Rows, K.Data, K.Stride, K.Rows, Q.Cols, scale)
}

// writeCache stores the step's real rows x [T, Hkv, dim] into cache
// [Hkv, S, dim] at slot p % S. Of a chunk longer than a ring only its last
// S rows survive, so only those are written.
func writeCache(cache cacheRows, x []float32, d attnDims, dim int) {
	for t := max(0, d.n-d.S); t < d.n; t++ {
		slot := (d.p0 + t) % d.S
		for g := 0; g < d.Hkv; g++ {
			cache.store((g*d.S+slot)*dim, x[(t*d.Hkv+g)*dim:][:dim])
		}
	}
}

// cache reads a key or value cache input.
func (k cachedAttention) cache(v G.Value) (c cacheRows, err error) {
	if k.kv16 {
		c.f16, err = ops.Uint16s(v)
	} else {
		c.f32, err = ops.Float32s(v)
	}
	return c, err
}

// cacheRows is a layer's key or value cache: float32, or F16 bits
// (graphs.Options.KVCacheF16), rounded to nearest (ties to even) as they
// are stored and widened exactly as they are read.
type cacheRows struct {
	f32 []float32
	f16 []uint16
}

// dotsT writes scale · Q·Kᵀ into the columns c0.. of S for the rows keys
// from element off of the cache, with the SIMD dot-product tiles (one query
// row: a matrix-vector product).
func (c cacheRows) dotsT(S, Q blas32.General, c0, off, rows int, scale float32) {
	if c.f16 != nil {
		simd.DotsTF16(S.Data[c0:], S.Stride, Q.Data, Q.Stride, Q.Rows, c.f16[off:], Q.Cols, rows, Q.Cols, scale)
		return
	}
	simd.DotsT(S.Data[c0:], S.Stride, Q.Data, Q.Stride, Q.Rows, c.f32[off:], Q.Cols, rows, Q.Cols, scale)
}

// weigh is simd.WeighRows over rows value rows from element off.
func (c cacheRows) weigh(out, p []float32, off, ldv, rows int, add bool) {
	if c.f16 != nil {
		simd.WeighRowsF16(out, p, c.f16[off:], ldv, rows, add)
		return
	}
	simd.WeighRows(out, p, c.f32[off:], ldv, rows, add)
}

// row returns the len(buf) values from element off, widened into buf when
// the cache is F16.
func (c cacheRows) row(buf []float32, off int) []float32 {
	if c.f16 == nil {
		return c.f32[off : off+len(buf)]
	}
	simd.FromF16(buf, c.f16[off:])
	return buf
}

// roundF16 returns x rounded to F16 precision (to nearest, ties to even)
// in dst, grown as needed.
func roundF16(dst, x []float32) []float32 {
	if cap(dst) < len(x) {
		dst = make([]float32, len(x))
	}
	dst = dst[:len(x)]
	simd.RoundActs(simd.F16, dst, x)
	return dst
}

// store writes x at element off.
func (c cacheRows) store(off int, x []float32) {
	if c.f16 == nil {
		copy(c.f32[off:], x)
		return
	}
	simd.ToF16(c.f16[off:], x)
}

// softmaxRange replaces row[lo:hi] by its softmax and zeroes the rest, which
// is what an additive -inf mask outside [lo, hi) gives.
func softmaxRange(row []float32, lo, hi int) {
	in := row[lo:hi]
	inv := 1 / simd.ExpShift(in, simd.Max(in))
	clear(row[:lo])
	simd.ScaleF64(in, inv)
	clear(row[hi:])
}

// causalAttention is grouped-query self-attention of a whole sequence
// with no KV cache: the training forward. q [T, Hq, Dk], k [T, Hkv, Dk],
// v [T, Hkv, Dv]; row t sits at position t and attends keys lo..t, with
// lo = 0 (causal) or t-window+1 (a sliding window of window keys), the
// masks cachedAttention applies. Query head h reads kv head h / (Hq/Hkv).
// Scores, softmax and weighted sums are computed as cachedAttention's
// prefill computes them, so a training forward gives inference's logits.
type causalAttention struct {
	name   string
	scale  float32
	window int // 0: full causal attention
}

func (k causalAttention) Name() string { return "attention " + k.name }
func (k causalAttention) String() string {
	return fmt.Sprintf("CausalAttention{%s,scale=%g,window=%d}", k.name, k.scale, k.window)
}
func (k causalAttention) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(3, nil), ops.T(3, nil), ops.T(2, nil)}
}
func (k causalAttention) Shape(in []tensor.Shape) (tensor.Shape, error) {
	q, kk, v := in[0], in[1], in[2]
	switch {
	case len(q) != 3 || len(kk) != 3 || len(v) != 3:
		return nil, fmt.Errorf("want q, k, v [T, H, D]; got %v %v %v", q, kk, v)
	case kk[0] != q[0] || v[0] != q[0]:
		return nil, fmt.Errorf("q %v, k %v and v %v have different rows", q, kk, v)
	case kk[1] == 0 || q[1]%kk[1] != 0 || v[1] != kk[1]:
		return nil, fmt.Errorf("%d query heads do not group over %d kv heads (v has %d)", q[1], kk[1], v[1])
	case q[2] != kk[2]:
		return nil, fmt.Errorf("queries %v and keys %v differ in width", q, kk)
	}
	return tensor.Shape{q[0], q[1] * v[2]}, nil
}

// seqDims are a sequence attention's sizes.
type seqDims struct{ T, Hq, Hkv, Dk, Dv int }

func attentionDims(q, v tensor.Shape, kvHeads int) seqDims {
	return seqDims{T: q[0], Hq: q[1], Hkv: kvHeads, Dk: q[2], Dv: v[2]}
}

func (k causalAttention) lo(t int) int {
	if k.window > 0 {
		return max(0, t-k.window+1)
	}
	return 0
}

// probs writes head h's probabilities [T, T] (zero outside each row's
// keys) into p, as cachedAttention computes them.
func (k causalAttention) probs(p, q, kk []float32, h int, d seqDims) {
	g := h / (d.Hq / d.Hkv)
	simd.DotsT(p, d.T, q[h*d.Dk:], d.Hq*d.Dk, d.T, kk[g*d.Dk:], d.Hkv*d.Dk, d.T, d.Dk, k.scale)
	for t := 0; t < d.T; t++ {
		softmaxRange(p[t*d.T:(t+1)*d.T], k.lo(t), t+1)
	}
}

func (k causalAttention) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	var f [3][]float32
	for i := range f {
		var err error
		if f[i], err = ops.Float32s(in[i]); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	d := attentionDims(in[0].Shape(), in[2].Shape(), in[1].Shape()[1])
	out := o.Float32s(d.T * d.Hq * d.Dv)
	simd.Parallel(d.Hq, &seqAttnTask{k: k, q: f[0], kk: f[1], v: f[2], out: out, d: d})
	return o.Tensor(out, d.T, d.Hq*d.Dv), nil
}

// seqAttnTask is the forward's work, a part per query head.
type seqAttnTask struct {
	k        causalAttention
	q, kk, v []float32
	out      []float32
	d        seqDims
}

func (t *seqAttnTask) Part(h int) {
	d := t.d
	p := make([]float32, d.T*d.T)
	t.k.probs(p, t.q, t.kk, h, d)
	g := h / (d.Hq / d.Hkv)
	vt := make([]float32, d.Dv*d.T)
	for j := 0; j < d.T; j++ {
		for c, x := range t.v[(j*d.Hkv+g)*d.Dv:][:d.Dv] {
			vt[c*d.T+j] = x
		}
	}
	simd.DotsT(t.out[h*d.Dv:], d.Hq*d.Dv, p, d.T, d.T, vt, d.T, d.Dv, d.T, 1)
}
