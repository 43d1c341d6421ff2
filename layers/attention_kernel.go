package layers

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/chewxy/hm"
	"gonum.org/v1/gonum/blas/blas32"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// cachedAttention is causal grouped-query attention of one forward's rows
// over their sequences' keys and values in the KV pool, which it first
// extends with the forward's own keys and values.
//
// Inputs: q [T, Hq, Dk], this forward's k [T, Hkv, Dk] and v [T, Hkv, Dv],
// and positions [T] (read for the order of the ops: the rows' sequences and
// positions come from the pool's plan, kv.Runs()). A run of rows of one
// sequence at positions p0..p0+n-1 writes its keys and values into its
// blocks, then query row t at position p attends keys lo..p of its own
// sequence, where lo = 0 for full attention and p-window+1 for a sliding
// window. Rows outside every run (padding) come out zero. Query head h
// reads kv head h / (Hq/Hkv), HF's repeat_interleave mapping. Only keys a
// query can see are read, so a step costs what the sequences hold, not
// what the pool could hold.
//
// Scores and weighted sums run on internal/simd's kernels (dot-product
// tiles for the scores and for prefill's P·V through Vᵀ, a register-held
// weighted sum of value rows for decode); the softmax has a float32 exp
// and float64 sums. A prefill attends by tiles of query rows with an
// online softmax over chunks of keys (attnTask.tile): no more scores
// exist at once than a tile's over one chunk. With a sink, the probabilities are also
// stored as [T, Hq, keys] over each row's key positions 0..last (zero
// outside its window), from a score block per run and head
// (attnTask.whole).
type cachedAttention struct {
	name   string
	scale  float32
	window int // 0: full causal attention
	kv     *graphs.LayerKV
	sink   *graphs.Sink
	// How llama.cpp holds the layer, which a quantized cache follows
	// (kvquant.go): AttentionConfig.Interleaved and PreScale.
	interleaved, preScale bool
}

func (k cachedAttention) Name() string { return "attention " + k.name }
func (k cachedAttention) String() string {
	return fmt.Sprintf("Attention{%s,scale=%g,window=%d,kv=%s,interleaved=%v,prescale=%v,capture=%v}", k.name, k.scale, k.window, k.kv.Type(), k.interleaved, k.preScale, k.sink != nil)
}
func (k cachedAttention) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(3, nil), ops.T(3, nil), ops.T(1, tensor.Int), ops.T(2, nil)}
}
func (k cachedAttention) Shape(in []tensor.Shape) (tensor.Shape, error) {
	q, kk, v, pos := in[0], in[1], in[2], in[3]
	c := k.kv.Cache
	switch {
	case len(q) != 3 || len(kk) != 3 || len(v) != 3 || len(pos) != 1:
		return nil, fmt.Errorf("want q, k, v [T, H, D] and positions [T]; got %v %v %v %v", q, kk, v, pos)
	case kk[0] != q[0] || v[0] != q[0] || pos[0] != q[0]:
		return nil, fmt.Errorf("q %v, k %v, v %v and positions %v have different rows", q, kk, v, pos)
	case kk[1] == 0 || q[1]%kk[1] != 0 || v[1] != kk[1]:
		return nil, fmt.Errorf("%d query heads do not group over %d kv heads (v has %d)", q[1], kk[1], v[1])
	case q[2] != kk[2] || c.KVHeads != kk[1] || c.KeyDim != kk[2] || c.ValueDim != v[2]:
		return nil, fmt.Errorf("the KV cache (%d heads of %d and %d) does not fit keys %v and values %v", c.KVHeads, c.KeyDim, c.ValueDim, kk, v)
	}
	return tensor.Shape{q[0], q[1] * v[2]}, nil
}

// attnDims are one forward's sizes.
type attnDims struct{ T, Hq, Hkv, Dk, Dv, B int }

func (k cachedAttention) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	var f [3][]float32
	for i := range f {
		var err error
		if f[i], err = ops.Float32s(in[i]); err != nil {
			return nil, err
		}
	}
	qs, vs := in[0].Shape(), in[2].Shape()
	d := attnDims{T: qs[0], Hq: qs[1], Hkv: in[1].Shape()[1], Dk: qs[2], Dv: vs[2], B: k.kv.BlockTokens()}
	runs := k.kv.Runs()
	out := o.Float32s(d.T * d.Hq * d.Dv)
	clear(out)
	keys := 0
	for _, r := range runs {
		if r.Row < 0 || r.Len < 1 || r.Row+r.Len > d.T || r.Pos < 0 || (r.Pos+r.Len+d.B-1)/d.B > len(r.Blocks) {
			return nil, fmt.Errorf("rows %d..%d at positions from %d do not fit %d rows and %d blocks", r.Row, r.Row+r.Len-1, r.Pos, d.T, len(r.Blocks))
		}
		keys = max(keys, r.Pos+r.Len)
		if !k.kv.Type().Quantized() {
			k.store(r, f[1], f[2], d)
		}
	}
	if d.T == 1 && len(runs) == 1 {
		k.logReads(runs[0], d)
	}
	var probs []float32
	if k.sink != nil {
		keys = max(keys, k.kv.Keys())
		probs = make([]float32, d.T*d.Hq*keys)
	}
	if k.kv.Type().Quantized() {
		k.cpuQuant(f[0], f[1], f[2], out, probs, keys, runs, d)
		if k.sink != nil {
			k.sink.StoreKeyed(ops.NewF32(probs, d.T, d.Hq, keys))
		}
		return o.Tensor(out, d.T, d.Hq*d.Dv), nil
	}
	t := ops.Shared(o, func() *attnTask { return new(attnTask) })
	t.k, t.out, t.probs, t.q, t.runs, t.d, t.keys = k, out, probs, f[0], runs, d, keys
	t.plan()
	work := 0
	for _, r := range runs {
		work += r.Len * (r.Pos + r.Len - k.lo(r.Pos)) * d.Dk * d.Hq
	}
	// Sequences, heads and query tiles are independent: the team takes
	// them when there is enough work to pay for the hand-over. Each thread
	// takes parts from a shared counter until none is left: a static split
	// would leave the team waiting on its slowest thread, as in simd's
	// runRows.
	t.next.Store(0)
	if work >= attnSplitWork {
		simd.Parallel(min(len(t.parts), runtime.GOMAXPROCS(0)), t)
	} else {
		t.Part(0)
	}
	t.out, t.probs, t.q, t.runs = nil, nil, nil, nil
	if k.sink != nil {
		k.sink.StoreKeyed(ops.NewF32(probs, d.T, d.Hq, keys))
	}
	return o.Tensor(out, d.T, d.Hq*d.Dv), nil
}

// store writes a run's keys and values, x [T, Hkv, dim] rows Row.., into
// its blocks.
func (k cachedAttention) store(r graphs.SeqRun, kNew, vNew []float32, d attnDims) {
	for t := 0; t < r.Len; t++ {
		p := r.Pos + t
		blk, slot := r.Blocks[p/d.B], p%d.B
		kb, vb := k.blockRows(blk)
		for g := 0; g < d.Hkv; g++ {
			kb.store((g*d.B+slot)*d.Dk, kNew[((r.Row+t)*d.Hkv+g)*d.Dk:][:d.Dk])
			vb.store((g*d.B+slot)*d.Dv, vNew[((r.Row+t)*d.Hkv+g)*d.Dv:][:d.Dv])
		}
	}
}

// logReads logs the blocks a decode row reads with the decode order, so
// that the team prefetches them with the weights in later steps: runs of
// adjacent blocks as one read each, up to kvLogBytes a layer. Logged block
// by block, Qwen3-0.6B's cache at 3000 positions outgrew the order's 4096
// entries and its decode lost 13%.
func (k cachedAttention) logReads(r graphs.SeqRun, d attnDims) {
	var keys, values readRun
	for i := k.lo(r.Pos) / d.B; i <= (r.Pos+r.Len-1)/d.B && keys.bytes+values.bytes < kvLogBytes; i++ {
		if kq, vq := k.kv.QuantBlocks(r.Blocks[i]); kq != nil {
			keys.add(unsafe.Pointer(&kq[0]), len(kq))
			values.add(unsafe.Pointer(&vq[0]), len(vq))
			continue
		}
		kb, vb := k.blockRows(r.Blocks[i])
		kb.logTo(&keys)
		vb.logTo(&values)
	}
	keys.flush()
	values.flush()
}

// kvLogBytes is the most of a decode row's cache logReads logs a layer: a
// quarter of the worker's prefetching window (simd's prefetchAhead), so a
// long cache leaves it room for the weights. Interleaved gozoo bench
// medians against not logging: SmolLM2-135M Q2_K decode at 192 positions
// 189 -> 220 tok/s, at 1500 87.5 -> 91.1; Qwen3-0.6B Q4_K_M at 600 38.4
// -> 41.3, at 3000 unchanged.
const kvLogBytes = 4 << 20

// readRun gathers adjacent blocks into one simd.Reads.
type readRun struct {
	p     unsafe.Pointer
	n     int
	bytes int // all added
}

func (r *readRun) add(p unsafe.Pointer, n int) {
	r.bytes += n
	if r.n > 0 && uintptr(r.p)+uintptr(r.n) == uintptr(p) {
		r.n += n
		return
	}
	r.flush()
	r.p, r.n = p, n
}

func (r *readRun) flush() {
	if r.n > 0 {
		simd.Reads(r.p, r.n)
	}
	r.n = 0
}

// blockRows returns block b's keys and values.
func (k cachedAttention) blockRows(b int32) (keys, values cacheRows) {
	keys.f32, keys.f16 = k.kv.KeyBlock(b)
	values.f32, values.f16 = k.kv.ValueBlock(b)
	return keys, values
}

func (k cachedAttention) lo(p int) int {
	if k.window > 0 {
		return max(0, p-k.window+1)
	}
	return 0
}

// attnSplitWork is the number of query-key products from which a step's
// parts are shared with the team.
const attnSplitWork = 1 << 16

// A prefill attends in tiles of attnTileRows query rows (five of
// simd.GemmPanels' 6-row kernels) over chunks of about attnKeyChunk keys
// (a whole number of pool blocks): a tile's scores stay in the core's
// cache, and a long run's rows are shared among the team.
const (
	attnTileRows = 30
	attnKeyChunk = 512
)

// attnUntiled makes prefills attend as captured ones do, a (run, head) at
// a time over a whole score block: the benchmark's baseline.
var attnUntiled bool

// attnTask is one attention forward's work. One lives in the session's
// shared kernel state (ops.Shared), with its scratch, reused by every
// layer and step.
type attnTask struct {
	k          cachedAttention
	out, probs []float32
	q          []float32
	runs       []graphs.SeqRun
	d          attnDims
	keys       int
	parts      []attnPart
	next       atomic.Int64 // the next part to take
	kt, vr     [][]float32  // per run and kv head: Kᵀ and V in panels of 16 columns (attnTask.transpose)
	kvReady    []int64      // per run and kv head: the forward (gen) whose kt and vr are written
	gen        int64        // this forward's number
	mu         sync.Mutex
	free       []*attnScratch
}

// attnPart is query head h of rows row0..row0+rows-1 of run run, by
// tiles (attnTask.tile) or all at once (attnTask.whole), or the
// transposition of kv head h's values for a tiled run's tiles.
type attnPart struct {
	run, h, row0, rows int
	kind               int
}

// The kinds of attnPart.
const (
	attnWhole = iota
	attnTile
	attnTranspose
	attnGroup // a decode row's query heads of kv head h together
)

// attnScratch is a thread's working memory, taken from the task's free
// list while the thread takes parts (attnTask.Part).
type attnScratch struct {
	scores, vt   []float32
	max, rescale []float32 // per tile row
	sum          []float64
}

// plan lists the forward's parts: a decode run, or any run when the
// probabilities are captured, is a part per head; a prefill's rows are cut
// into tiles, and its values are transposed once per kv head, in parts
// listed before every tile (a tile waits for its Vᵀ if it is taken while
// another thread still writes it).
func (t *attnTask) plan() {
	d := t.d
	t.parts = t.parts[:0]
	t.gen++
	for len(t.kt) < len(t.runs)*d.Hkv {
		t.kt, t.vr, t.kvReady = append(t.kt, nil), append(t.vr, nil), append(t.kvReady, 0)
	}
	for ri, r := range t.runs {
		if r.Len > 1 && t.probs == nil && !attnUntiled {
			for g := 0; g < d.Hkv; g++ {
				t.parts = append(t.parts, attnPart{run: ri, h: g, kind: attnTranspose})
			}
		}
	}
	// A decode row's query heads that share a kv head read its keys and
	// values once, as one part, where the parts still outnumber the
	// threads twice.
	grouped := d.Hq > d.Hkv && t.probs == nil && (attnGroupAll || d.Hkv >= 2*runtime.GOMAXPROCS(0))
	for ri, r := range t.runs {
		if r.Len == 1 && grouped {
			for g := 0; g < d.Hkv; g++ {
				t.parts = append(t.parts, attnPart{run: ri, h: g, rows: 1, kind: attnGroup})
			}
			continue
		}
		if r.Len == 1 || t.probs != nil || attnUntiled {
			for h := 0; h < d.Hq; h++ {
				t.parts = append(t.parts, attnPart{run: ri, h: h, rows: r.Len, kind: attnWhole})
			}
			continue
		}
		// Last tiles first: they see the most keys, and the threads
		// even out on the small ones at the end.
		for h := 0; h < d.Hq; h++ {
			for row0 := (r.Len - 1) / attnTileRows * attnTileRows; row0 >= 0; row0 -= attnTileRows {
				t.parts = append(t.parts, attnPart{ri, h, row0, min(attnTileRows, r.Len-row0), attnTile})
			}
		}
	}
}

func (t *attnTask) take() *attnScratch {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.free)
	if n == 0 {
		return new(attnScratch)
	}
	s := t.free[n-1]
	t.free = t.free[:n-1]
	return s
}

func (t *attnTask) give(s *attnScratch) {
	t.mu.Lock()
	t.free = append(t.free, s)
	t.mu.Unlock()
}

// grow returns buf resized to n, reallocated if it is too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// Part is one thread's share of the forward: the parts it takes from
// t.next.
func (t *attnTask) Part(int) {
	s := t.take()
	for {
		i := int(t.next.Add(1)) - 1
		if i >= len(t.parts) {
			break
		}
		switch p := t.parts[i]; p.kind {
		case attnWhole:
			t.whole(s, p.run, p.h)
		case attnGroup:
			t.group(s, p.run, p.h)
		case attnTile:
			t.tile(s, p)
		case attnTranspose:
			t.transpose(p.run, p.h)
		}
	}
	t.give(s)
}

// transpose writes the keys and values of kv head g of run ri, over the
// width keys its rows see, as float32 in simd.GemmPanels' panels of 16
// columns: Kᵀ [Dk, width] as ceil(width/16) panels of Dk×16, and V
// [width, Dv] as ceil(Dv/16) panels of width×16.
func (t *attnTask) transpose(ri, g int) {
	d, r := t.d, t.runs[ri]
	a, end := t.k.lo(r.Pos), r.Pos+r.Len
	width := end - a
	j := ri*d.Hkv + g
	t.kt[j] = grow(t.kt[j], (width+15)/16*16*d.Dk)
	t.vr[j] = grow(t.vr[j], (d.Dv+15)/16*16*width)
	kt, vr := t.kt[j], t.vr[j]
	var buf [512]float32
	row := buf[:0]
	if n := max(d.Dk, d.Dv); n > len(buf) {
		row = make([]float32, n)
	} else {
		row = buf[:n]
	}
	for p := a; p < end; p++ {
		keys, values := t.k.blockRows(r.Blocks[p/d.B])
		slot, col := p%d.B, p-a
		kp := kt[col/16*16*d.Dk+col%16:]
		for c, x := range keys.row(row[:d.Dk], (g*d.B+slot)*d.Dk) {
			kp[c*16] = x
		}
		v := values.row(row[:d.Dv], (g*d.B+slot)*d.Dv)
		for c := 0; c < d.Dv; c += 16 {
			copy(vr[c*width+col*16:], v[c:min(c+16, d.Dv)])
		}
	}
	atomic.StoreInt64(&t.kvReady[j], t.gen)
}

// whole attends query head h of run ri at once: the scores of all its rows
// over all its keys, each row's softmax (stored when captured), then the
// weighted sum of the values.
func (t *attnTask) whole(s *attnScratch, ri, h int) {
	d, k := t.d, t.k
	r := t.runs[ri]
	a, end := k.lo(r.Pos), r.Pos+r.Len
	width := end - a
	s.scores = grow(s.scores, r.Len*width)
	scores := s.scores
	g := h / (d.Hq / d.Hkv)
	qStride, oStride := d.Hq*d.Dk, d.Hq*d.Dv
	S := blas32.General{Rows: r.Len, Cols: width, Stride: width, Data: scores}
	Q := blas32.General{Rows: r.Len, Cols: d.Dk, Stride: qStride, Data: t.q[r.Row*qStride+h*d.Dk:]}
	// Keys a..end-1 lie in runs of one block each.
	blockRuns(r, d.B, a, end, func(blk int32, slot, p, n int) {
		keys, _ := k.blockRows(blk)
		keys.dotsT(S, Q, p-a, (g*d.B+slot)*d.Dk, n, k.scale)
	})
	for row := 0; row < r.Len; row++ {
		p := r.Pos + row
		sc := scores[row*width : (row+1)*width]
		softmaxRange(sc, k.lo(p)-a, p-a+1)
		if t.probs != nil {
			copy(t.probs[((r.Row+row)*d.Hq+h)*t.keys+a:], sc)
		}
	}
	o := t.out[r.Row*oStride+h*d.Dv:]
	if r.Len > 1 {
		// Prefill: P·V as dot products of P's rows with Vᵀ's rows, on
		// the SIMD tiles.
		s.vt = grow(s.vt, d.Dv*width)
		t.transposeV(s.vt, r, a, end, g)
		simd.DotsT(o, oStride, scores, width, r.Len, s.vt, width, d.Dv, width, 1)
		return
	}
	// Decode: one query's weighted sum of the value rows.
	blockRuns(r, d.B, a, end, func(blk int32, slot, p, n int) {
		_, values := k.blockRows(blk)
		values.weigh(o[:d.Dv], scores[p-a:], (g*d.B+slot)*d.Dv, d.Dv, n, p > a)
	})
}

// blockRuns calls f for each run of positions a..end-1 of r that lies in
// one block of B positions: the block, the run's first slot in it, its
// first position and its length.
func blockRuns(r graphs.SeqRun, B, a, end int, f func(blk int32, slot, p, n int)) {
	for p := a; p < end; {
		slot := p % B
		n := min(end-p, B-slot)
		f(r.Blocks[p/B], slot, p, n)
		p += n
	}
}

// attnGroupAll groups decode's query heads whatever the kv heads and
// threads (tests run the grouped parts on their small configs).
var attnGroupAll bool

// group attends the query heads of kv head g for decode run ri (one row),
// as whole does each: the scores of all of them from each block of keys
// (a product of that many rows), then each one's weighted sum of each
// block of values while it is in cache.
func (t *attnTask) group(s *attnScratch, ri, g int) {
	d, k := t.d, t.k
	r := t.runs[ri]
	G := d.Hq / d.Hkv
	a, end := k.lo(r.Pos), r.Pos+1
	width := end - a
	s.scores = grow(s.scores, G*width)
	scores := s.scores
	qStride, oStride := d.Hq*d.Dk, d.Hq*d.Dv
	S := blas32.General{Rows: G, Cols: width, Stride: width, Data: scores}
	Q := blas32.General{Rows: G, Cols: d.Dk, Stride: d.Dk, Data: t.q[r.Row*qStride+g*G*d.Dk:]}
	blockRuns(r, d.B, a, end, func(blk int32, slot, p, n int) {
		keys, _ := k.blockRows(blk)
		keys.dotsT(S, Q, p-a, (g*d.B+slot)*d.Dk, n, k.scale)
	})
	for i := range G {
		softmaxRange(scores[i*width:(i+1)*width], 0, width)
	}
	o := t.out[r.Row*oStride+g*G*d.Dv:]
	blockRuns(r, d.B, a, end, func(blk int32, slot, p, n int) {
		_, values := k.blockRows(blk)
		for i := range G {
			values.weigh(o[i*d.Dv:(i+1)*d.Dv], scores[i*width+p-a:], (g*d.B+slot)*d.Dv, d.Dv, n, p > a)
		}
	})
}

// tile attends query head p.h of rows p.row0.. of a prefill run with an
// online softmax: key chunk by key chunk, each row keeps its running
// maximum and sum, and its output (accumulated in place) is rescaled when
// the maximum grows. Chunks that no row of the tile sees are skipped; the
// masks cut into the chunks on the diagonal and at a window's edge only.
// Both products are simd.GemmPanels', on the run's panels of Kᵀ and V
// (attnTask.transpose); a chunk's scores start at a panel's first column.
func (t *attnTask) tile(s *attnScratch, p attnPart) {
	d, k := t.d, t.k
	r := t.runs[p.run]
	g := p.h / (d.Hq / d.Hkv)
	first, rows := r.Pos+p.row0, p.rows
	a, end := k.lo(first), first+rows
	va := k.lo(r.Pos) // the first key of kt and vr
	j := p.run*d.Hkv + g
	for atomic.LoadInt64(&t.kvReady[j]) != t.gen {
		runtime.Gosched()
	}
	kt, vr, width := t.kt[j], t.vr[j], r.Pos+r.Len-va
	chunk := max(1, attnKeyChunk/d.B) * d.B
	s.scores = grow(s.scores, rows*roundUp8(min(chunk, end-a)+15))
	s.max, s.rescale, s.sum = grow(s.max, rows), grow(s.rescale, rows), grow(s.sum, rows)
	for i := range rows {
		s.max[i], s.sum[i] = float32(math.Inf(-1)), 0
	}
	qStride, oStride := d.Hq*d.Dk, d.Hq*d.Dv
	q := t.q[(r.Row+p.row0)*qStride+p.h*d.Dk:]
	out := t.out[(r.Row+p.row0)*oStride+p.h*d.Dv:]
	for c0 := a; c0 < end; {
		c1 := min(end, (c0/chunk+1)*chunk)
		// Scores from key o, the first of c0's panel, in whole blocks of
		// 8 columns (those past c1 are never read): S = scale · Q·Kᵀ.
		o := va + (c0-va)&^15
		n, ld := c1-o, roundUp8(c1-o)
		simd.GemmPanels(rows, ld, d.Dk, k.scale, q, qStride, kt[(o-va)*d.Dk:], 16*d.Dk, s.scores, ld, false)
		for i := range rows {
			pos := first + i
			lo, hi := max(k.lo(pos), c0)-o, min(pos+1, c1)-o
			sc := s.scores[i*ld : i*ld+n]
			s.rescale[i] = 1
			if lo >= hi {
				clear(sc) // a chunk this row does not see
				continue
			}
			in := sc[lo:hi]
			m := s.max[i]
			if cm := simd.Max(in); cm > m {
				s.rescale[i] = simd.Exp32(m - cm) // 0 on the row's first keys
				m = cm
			}
			s.sum[i] = s.sum[i]*float64(s.rescale[i]) + simd.ExpShift(in, m)
			s.max[i] = m
			clear(sc[:lo])
			clear(sc[hi:])
		}
		// The first chunk sets the output rows; later ones rescale them
		// and add P·V.
		if c0 != a {
			for i := range rows {
				if c := s.rescale[i]; c != 1 {
					o := out[i*oStride:][:d.Dv]
					for j := range o {
						o[j] *= c
					}
				}
			}
		}
		simd.GemmPanels(rows, d.Dv, n, 1, s.scores, ld, vr[(o-va)*16:], 16*width, out, oStride, c0 != a)
		c0 = c1
	}
	for i := range rows {
		simd.ScaleF64(out[i*oStride:][:d.Dv], 1/s.sum[i])
	}
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// transposeV writes the values of kv head g for positions a..end-1 of run
// r as Vᵀ [Dv, end-a].
func (t *attnTask) transposeV(vt []float32, r graphs.SeqRun, a, end, g int) {
	d, width := t.d, end-a
	var buf [256]float32
	row := buf[:0]
	if d.Dv > len(buf) {
		row = make([]float32, d.Dv)
	} else {
		row = buf[:d.Dv]
	}
	for p := a; p < end; p++ {
		_, values := t.k.blockRows(r.Blocks[p/d.B])
		src := values.row(row, (g*d.B+p%d.B)*d.Dv)
		col := p - a
		for c, v := range src {
			vt[c*width+col] = v
		}
	}
}

// scoreBlock writes scale · Q·Kᵀ into the columns c0.. of S, with the
// SIMD dot-product tiles (one query row: a matrix-vector product).
func scoreBlock(S blas32.General, c0 int, Q, K blas32.General, scale float32) {
	simd.DotsT(S.Data[c0:], S.Stride, Q.Data, Q.Stride, Q.Rows, K.Data, K.Stride, K.Rows, Q.Cols, scale)
}

// cacheRows is a layer's key or value cache: float32, or F16 bits
// (graphs.Options.KVCacheF16), rounded to nearest (ties to even) as they
// are stored and widened exactly as they are read.
type cacheRows struct {
	f32 []float32
	f16 []uint16
}

// logTo adds the rows to a run of reads (logReads).
func (c cacheRows) logTo(r *readRun) {
	switch {
	case len(c.f16) > 0:
		r.add(unsafe.Pointer(&c.f16[0]), 2*len(c.f16))
	case len(c.f32) > 0:
		r.add(unsafe.Pointer(&c.f32[0]), 4*len(c.f32))
	}
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
// untiled prefill computes them (attnTask.whole, which its tiles match to
// rounding), so a training forward gives inference's logits.
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
