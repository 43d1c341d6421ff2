package layers

import (
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

// sparseMoE is a mixture-of-experts MLP as Qwen3-MoE routes it: router
// logits x·routerᵀ [T, E], a float32 softmax over ALL experts, the top k
// probabilities (divided by their sum when normTopK), and out = the sum of
// p_k * expert_k(x). Only the chosen experts run, each on the rows routed
// to it, so the cost is k experts per token, not all of them.
//
// Routing is data-dependent, which a static Gorgonia graph cannot express
// with stock ops, so it lives in one op. Inputs: x, the router [E, D], then
// the experts' stacked gate [E, F, D], up [E, F, D] and down [E, D, F],
// expert e's matrix being slice e, all in PyTorch's [out, in] layout and
// in their stored types (a quantized stack is E matrices of whole rows
// back to back).
type sparseMoE struct {
	name          string
	experts, topK int
	normTopK      bool
	act           string
	routerType    graphs.DType
	// expertTypes are the gate, up and down projections' storage (a
	// Q4_K_M file keeps some down projections in Q6_K or Q8_0).
	expertTypes [3]graphs.DType
	fast        bool // llama.cpp's arithmetic in the experts' products
	// frozen: a training step takes no gradient for the router and the
	// experts (a base under a LoRA adapter), only for x.
	frozen bool
	// sliced, when set, holds the gate, up and down experts, read once
	// when the graph is built (readExperts): the op's inputs are then x
	// and the router.
	sliced *expertSet
}

// expertSet is each projection's experts in place: slices of the
// checkpoint's mapping (graphs.Param.Slices), or shares of a stack stored
// whole (v5's down_proj beside a fused gate_up_proj).
type expertSet struct {
	w      [3][]weight
	packs  [3]*expertPacks // their packings, where they take them
	stored [3]tensor.Shape // each projection's stacked shape as stored
}

// readExperts reads the experts of gate, up and down (see expertSet), on
// their packings for decode where the kernels have them (expertPackings).
func readExperts(ps [3]*graphs.Param, fast bool) (*expertSet, error) {
	set := &expertSet{}
	for j, p := range ps {
		stored, err := p.DType.StoredShape(p.Shape)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		set.stored[j] = stored
		E := p.Shape[0]
		if p.Slices == nil {
			if p.Data == nil {
				return nil, fmt.Errorf("tensor %q was declared but has no data (not loaded)", p.Name)
			}
			whole, err := weightData(p.Data, p.DType)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			for e := range E {
				set.w[j] = append(set.w[j], whole.expert(e, E))
			}
			continue
		}
		for e, v := range p.Slices {
			w, err := weightData(v, p.DType)
			if err != nil {
				return nil, fmt.Errorf("expert %d of %s: %w", e, p.Name, err)
			}
			set.w[j] = append(set.w[j], w)
		}
	}
	for j, p := range ps {
		set.packs[j] = expertPackings(p, set.w[j], fast)
	}
	return set, nil
}

// cpuExpertPackings is the key of a stack of experts' packings among its
// prepared forms.
const cpuExpertPackings = "cpu-expert-packings"

// expertPacks are the packings of a stack's experts for decode, as
// packForDecode makes a matrix's (the first mode to read the stack
// chooses). A decode step's experts are products of a row or a few, which
// the regrouped and coded kernels run 1.5 to 2.5 times faster.
type expertPacks struct {
	fast       bool
	rows, cols int
	once       []sync.Once
	packs      []*simd.Packing // nil where an expert keeps the file's layout
}

func (ps *expertPacks) Release() {
	for _, p := range ps.packs {
		if p != nil {
			p.Release()
		}
	}
}

// on returns expert e's weight w on its packing, made at the bind
// (packAll).
func (ps *expertPacks) on(e int, w weight) weight {
	ps.once[e].Do(func() { ps.packs[e] = packWeight(w, ps.rows, ps.cols, ps.fast) })
	if pk := ps.packs[e]; pk != nil {
		w.pack, w.rows, w.cols = pk, ps.rows, ps.cols
	}
	return w
}

// expertPackings returns p's experts' packings (expertPacks), or nil for
// a stack the kernels read as it is. Every expert of the stack is packed
// (regrouped, or coded in BF12 and F28) when the graph binds it, over the
// team, as a dense matrix is, experts the routing has not picked yet
// among them: packed on first use, they cost a prefill of qwen3moe-mini
// BF16 a quarter of its speed, and the first prefill of a batch (whose
// graphs are bound before any run) a third of its speed in Q8_0. Where
// floats are not coded, float experts keep their storage: in panels they
// were slower (docs/performance.md).
func expertPackings(p *graphs.Param, experts []weight, fast bool) *expertPacks {
	_, quantized := p.DType.Quant()
	if !p.ReadOnly || len(p.Shape) != 3 || len(experts) != p.Shape[0] || !quantized && !simd.CodesFloats() {
		return nil
	}
	form := p.Prepare(cpuExpertPackings, func() graphs.Form {
		E := p.Shape[0]
		ps := &expertPacks{fast: fast, rows: p.Shape[1], cols: p.Shape[2], once: make([]sync.Once, E), packs: make([]*simd.Packing, E)}
		simd.Parallel(E, packAll{ps, experts})
		return ps
	})
	ps, _ := form.(*expertPacks)
	return ps
}

// packAll packs expert i of a stack as part i.
type packAll struct {
	ps      *expertPacks
	experts []weight
}

func (t packAll) Part(i int) { t.ps.on(i, t.experts[i]) }

func (k sparseMoE) Name() string { return "moe " + k.name }
func (k sparseMoE) String() string {
	// expertTypes takes %v: %s prints an array of uint8 types as raw bytes.
	return fmt.Sprintf("SparseMoE{%s,experts=%d,top%d,norm=%v,%s,%s,%v,fast=%v,frozen=%v}", k.name, k.experts, k.topK, k.normTopK, k.act, k.routerType, k.expertTypes, k.fast, k.frozen)
}
func (k sparseMoE) Signature() []hm.Type {
	sig := []hm.Type{ops.T(2, nil), ops.T(2, k.routerType.Storage())}
	if k.sliced != nil {
		return append(sig, ops.T(2, nil))
	}
	for _, t := range k.expertTypes {
		sig = append(sig, ops.T(3, t.Storage()))
	}
	return append(sig, ops.T(2, nil))
}
func (k sparseMoE) Shape(in []tensor.Shape) (tensor.Shape, error) {
	x, r := in[0], in[1]
	if len(x) != 2 || len(r) != 2 || logicalCols(k.routerType, r[1]) != x[1] || r[0] != k.experts {
		return nil, fmt.Errorf("x %v and router %v do not fit %d experts", x, r, k.experts)
	}
	var g, u, d tensor.Shape
	if k.sliced != nil {
		g, u, d = k.sliced.stored[0], k.sliced.stored[1], k.sliced.stored[2]
	} else {
		g, u, d = in[2], in[3], in[4]
	}
	if len(g) != 3 || len(u) != 3 || len(d) != 3 {
		return nil, fmt.Errorf("stacked experts gate %v, up %v and down %v: want [experts, out, in] each", g, u, d)
	}
	F, D := g[1], x[1]
	if g[0] != k.experts || u[0] != k.experts || d[0] != k.experts || logicalCols(k.expertTypes[0], g[2]) != D ||
		u[1] != F || logicalCols(k.expertTypes[1], u[2]) != D || d[1] != D || logicalCols(k.expertTypes[2], d[2]) != F {
		return nil, fmt.Errorf("stacked experts gate %v, up %v and down %v do not fit %d experts of x %v", g, u, d, k.experts, x)
	}
	return x.Clone(), nil
}

// stackedExperts reads the stacked gate, up and down inputs of sparseMoE.
func (k sparseMoE) stackedExperts(in []G.Value) (w [3]weight, err error) {
	for j := range w {
		if w[j], err = weightData(in[j], k.expertTypes[j]); err != nil {
			return w, fmt.Errorf("%s: stacked %s: %w", k.name, [...]string{"gate", "up", "down"}[j], err)
		}
	}
	return w, nil
}

// expert is expert e's matrix of a stacked weight of E experts: the e-th
// of E equal shares of its storage (whole rows, whole blocks), not copied.
func (w weight) expert(e, E int) weight {
	out := weight{dtype: w.dtype}
	switch w.dtype.Storage() {
	case tensor.Float32:
		n := len(w.f32) / E
		out.f32 = w.f32[e*n : (e+1)*n]
	case tensor.Uint16:
		n := len(w.u16) / E
		out.u16 = w.u16[e*n : (e+1)*n]
	default:
		n := len(w.u8) / E
		out.u8 = w.u8[e*n : (e+1)*n]
	}
	return out
}

// moeInputs are the op's inputs (x, router, the three stacked expert
// weights) as the forward and its gradient read them.
type moeInputs struct {
	x          []float32
	T, D, E, F int
	router     weight
	stacked    [3]weight
	sliced     [3][]weight // per expert, when the op holds them (sparseMoE.sliced)
	packs      [3]*expertPacks
}

// expert is expert e's matrix of projection j (gate, up, down).
func (m *moeInputs) expert(j, e int) weight {
	if m.sliced[j] != nil {
		if ps := m.packs[j]; ps != nil {
			return ps.on(e, m.sliced[j][e])
		}
		return m.sliced[j][e]
	}
	return m.stacked[j].expert(e, m.E)
}

func (k sparseMoE) inputs(in []G.Value) (m moeInputs, err error) {
	if m.x, err = ops.Float32s(in[0]); err != nil {
		return m, err
	}
	m.T, m.D = in[0].Shape()[0], in[0].Shape()[1]
	if m.router, err = weightData(in[1], k.routerType); err != nil {
		return m, err
	}
	m.E = k.experts
	if k.sliced == nil {
		m.F = in[2].Shape()[1]
		m.stacked, err = k.stackedExperts(in[2:5])
		return m, err
	}
	m.F, m.sliced, m.packs = k.sliced.stored[0][1], k.sliced.w, k.sliced.packs
	return m, nil
}

func (k sparseMoE) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	m, err := k.inputs(in)
	if err != nil {
		return nil, err
	}
	x, T, D, E, router := m.x, m.T, m.D, m.E, m.router
	logits := make([]float32, T*E)
	mulTMode(k.fast, logits, x, T, router, E, D)
	rows, weights := route(logits, T, E, k.topK, k.normTopK)

	act, err := activationFor(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	run := expertRun{k: k, m: &m, rows: rows, act: act, y: make([][]float32, E), bufs: make([]*[]float32, E)}
	if T <= expertsAtOnce {
		// A decode step's experts are small products, each split over
		// the team with its own hand-off: instead, each expert is a
		// part, its products on one thread.
		for e, r := range rows {
			if len(r) > 0 {
				run.parts = append(run.parts, e)
			}
		}
		simd.Parallel(len(run.parts), &run)
	} else {
		for e, r := range rows {
			if len(r) > 0 {
				run.expert(e)
			}
		}
	}
	out := o.Float32s(T * D)
	for e, r := range rows {
		// Experts add in ascending order, as HF's index_add_ loop does.
		for i, t := range r {
			p := weights[e][i]
			o, ye := out[t*D:(t+1)*D], run.y[e][i*D:(i+1)*D]
			for j := range o {
				o[j] += ye[j] * p
			}
		}
		if run.bufs[e] != nil {
			expertBufs.Put(run.bufs[e])
		}
	}
	return o.Tensor(out, T, D), nil
}

// expertsAtOnce is the most rows for which a MoE layer runs its experts
// side by side rather than one after another.
const expertsAtOnce = 16

// expertRun computes the routed experts of a sparseMoE forward: y[e] is
// expert e's output for its rows.
type expertRun struct {
	k     sparseMoE
	m     *moeInputs
	rows  [][]int
	act   func(float32) float32
	y     [][]float32
	bufs  []*[]float32 // each expert's buffers, y[e] among them (expertBufs)
	parts []int        // the experts that Parallel's parts stand for
}

// expertBufs are the buffers of an expert's forward in decode (its rows,
// gate, up and output), which each step would otherwise allocate.
var expertBufs = sync.Pool{New: func() any { return new([]float32) }}

func (r *expertRun) Part(i int) { r.expert(r.parts[i]) }

// expert runs expert e on the rows routed to it.
func (r *expertRun) expert(e int) {
	D, F, x, k := r.m.D, r.m.F, r.m.x, r.k
	var w [3]weight
	for j := range w {
		w[j] = r.m.expert(j, e)
	}
	n := len(r.rows[e])
	var buf []float32
	if need := n * (2*D + 2*F); r.m.T <= expertsAtOnce {
		// Pooled for decode only: a prompt's experts would keep large
		// buffers alive.
		bp := expertBufs.Get().(*[]float32)
		if cap(*bp) < need {
			*bp = make([]float32, need)
		}
		r.bufs[e], buf = bp, *bp
	} else {
		buf = make([]float32, need)
	}
	xe, g, u, y := buf[:n*D], buf[n*D:n*(D+F)], buf[n*(D+F):n*(D+2*F)], buf[n*(D+2*F):n*(2*D+2*F)]
	for i, t := range r.rows[e] {
		copy(xe[i*D:(i+1)*D], x[t*D:(t+1)*D])
	}
	mulTMode(k.fast, g, xe, n, w[0], F, D)
	mulTMode(k.fast, u, xe, n, w[1], F, D)
	if k.act == "silu" {
		// By runs of 16, the same float32 as silu lane by lane: a
		// function call a value was a sixth of a 128-token prefill.
		simd.SiLUMul(g, g, u)
	} else {
		for i := range g {
			g[i] = r.act(g[i]) * u[i]
		}
	}
	mulTMode(k.fast, y, g, n, w[2], D, F)
	r.y[e] = y
}

// softmaxExps writes exp(l[e] - max(l)) into exps and returns their sum:
// the router's softmax as the forward (route) and its gradient share it.
func softmaxExps(l []float32, exps []float64) float64 {
	m := l[0]
	for _, v := range l {
		m = max(m, v)
	}
	var sum float64
	for e, v := range l {
		exps[e] = math.Exp(float64(v - m))
		sum += exps[e]
	}
	return sum
}

// route picks each row's top-k experts from router logits [T, E]: softmax
// over all experts, top k (lower index first on ties), optionally
// renormalised. It returns, per expert, the rows routed to it and their
// weights.
func route(logits []float32, T, E, k int, norm bool) (rows [][]int, weights [][]float32) {
	rows, weights = make([][]int, E), make([][]float32, E)
	probs := make([]float32, E)
	exps := make([]float64, E)
	idx := make([]int, E)
	for t := 0; t < T; t++ {
		sum := softmaxExps(logits[t*E:(t+1)*E], exps)
		for e, p := range exps {
			probs[e] = float32(float64(float32(p)) / sum)
			idx[e] = e
		}
		sort.SliceStable(idx, func(i, j int) bool { return probs[idx[i]] > probs[idx[j]] })
		var top float32
		for _, e := range idx[:k] {
			top += probs[e]
		}
		for _, e := range idx[:k] {
			w := probs[e]
			if norm {
				w /= top
			}
			rows[e] = append(rows[e], t)
			weights[e] = append(weights[e], w)
		}
	}
	return rows, weights
}
