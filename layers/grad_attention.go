package layers

import (
	"fmt"
	"slices"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/ops"
)

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

func (k causalAttention) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	packed, err := node(causalAttentionGrad{k}, in[0], in[1], in[2], grad)
	if err != nil {
		return nil, err
	}
	var res G.Nodes
	off := 0
	for i := 0; i < 3; i++ {
		s := in[i].Shape()
		n, err := node(unpack{from: off, shape: slices.Clone([]int(s)), what: [...]string{"dq", "dk", "dv"}[i] + " " + k.name}, packed)
		if err != nil {
			return nil, err
		}
		res = append(res, n)
		off += s.TotalSize()
	}
	return res, nil
}

// causalAttentionGrad computes the gradients of causalAttention with
// respect to q, k and v at once (they share the probabilities), packed
// one after the other in a flat vector that unpack splits. With P the
// probabilities and dO the output's gradient, per head: dP = dO·Vᵀ,
// dV = Pᵀ·dO, dS = P ∘ (dP - rowsum(P ∘ dP)), dQ = scale·dS·K,
// dK = scale·dSᵀ·Q; kv heads sum over their group of query heads.
// Masked scores have P = 0 and take no gradient.
type causalAttentionGrad struct{ k causalAttention }

func (k causalAttentionGrad) Name() string { return "attention gradient " + k.k.name }
func (k causalAttentionGrad) String() string {
	return fmt.Sprintf("CausalAttentionGrad{%s,scale=%g,window=%d}", k.k.name, k.k.scale, k.k.window)
}
func (k causalAttentionGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(3, nil), ops.T(3, nil), ops.T(3, nil), ops.T(2, nil), ops.T(1, nil)}
}
func (k causalAttentionGrad) Shape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0].TotalSize() + in[1].TotalSize() + in[2].TotalSize()}, nil
}
func (k causalAttentionGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	var f [4][]float32
	for i := range f {
		var err error
		if f[i], err = ops.Float32s(in[i]); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	d := attentionDims(in[0].Shape(), in[2].Shape(), in[1].Shape()[1])
	nq, nk := d.T*d.Hq*d.Dk, d.T*d.Hkv*d.Dk
	out := o.Float32s(nq + nk + d.T*d.Hkv*d.Dv)
	t := &seqAttnGradTask{k: k.k, q: f[0], kk: f[1], v: f[2], dout: f[3], dq: out[:nq], dk: out[nq : nq+nk], dv: out[nq+nk:], d: d}
	// kv groups are independent: each writes its own dk, dv and its
	// query heads' dq.
	simd.Parallel(d.Hkv, t)
	return o.Tensor(out, len(out)), nil
}

type seqAttnGradTask struct {
	k              causalAttention
	q, kk, v, dout []float32
	dq, dk, dv     []float32
	d              seqDims
}

func (t *seqAttnGradTask) Part(g int) {
	d := t.d
	rep := d.Hq / d.Hkv
	p := make([]float32, d.T*d.T)
	ds := make([]float64, d.T)
	dk := make([]float64, d.T*d.Dk)
	dv := make([]float64, d.T*d.Dv)
	dq := make([]float64, d.Dk)
	kRow := func(j int) []float32 { return t.kk[(j*d.Hkv+g)*d.Dk:][:d.Dk] }
	vRow := func(j int) []float32 { return t.v[(j*d.Hkv+g)*d.Dv:][:d.Dv] }
	for h := g * rep; h < (g+1)*rep; h++ {
		t.k.probs(p, t.q, t.kk, h, d)
		for r := 0; r < d.T; r++ {
			lo := t.k.lo(r)
			pr := p[r*d.T : (r+1)*d.T]
			do := t.dout[(r*d.Hq+h)*d.Dv:][:d.Dv]
			var sum float64
			for j := lo; j <= r; j++ {
				var dp float64
				vr := vRow(j)
				for c, x := range do {
					dp += float64(x) * float64(vr[c])
					dv[j*d.Dv+c] += float64(pr[j]) * float64(x)
				}
				ds[j] = dp
				sum += float64(pr[j]) * dp
			}
			clear(dq)
			qr := t.q[(r*d.Hq+h)*d.Dk:][:d.Dk]
			for j := lo; j <= r; j++ {
				s := float64(pr[j]) * (ds[j] - sum) * float64(t.k.scale)
				kr := kRow(j)
				for c := range dq {
					dq[c] += s * float64(kr[c])
					dk[j*d.Dk+c] += s * float64(qr[c])
				}
			}
			narrow(t.dq[(r*d.Hq+h)*d.Dk:][:d.Dk], dq)
		}
	}
	for j := 0; j < d.T; j++ {
		narrow(t.dk[(j*d.Hkv+g)*d.Dk:][:d.Dk], dk[j*d.Dk:(j+1)*d.Dk])
		narrow(t.dv[(j*d.Hkv+g)*d.Dv:][:d.Dv], dv[j*d.Dv:(j+1)*d.Dv])
	}
}

// unpack copies values from.. of a flat vector out as a tensor of shape:
// one of the gradients a backward kernel computed together.
type unpack struct {
	from  int
	shape []int
	what  string
}

func (k unpack) Name() string { return "unpack " + k.what }
func (k unpack) String() string {
	return fmt.Sprintf("Unpack{%s,from=%d,shape=%v}", k.what, k.from, k.shape)
}
func (k unpack) Signature() []hm.Type { return []hm.Type{ops.T(1, nil), ops.T(len(k.shape), nil)} }
func (k unpack) Shape(in []tensor.Shape) (tensor.Shape, error) {
	s := tensor.Shape(slices.Clone(k.shape))
	if k.from+s.TotalSize() > in[0].TotalSize() {
		return nil, fmt.Errorf("values %d.. of shape %v overrun %v", k.from, k.shape, in[0])
	}
	return s, nil
}
func (k unpack) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	x, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	n := tensor.Shape(k.shape).TotalSize()
	out := o.Float32s(n)
	copy(out, x[k.from:k.from+n])
	return o.Tensor(out, k.shape...), nil
}
