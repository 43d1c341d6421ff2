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

// Grad is causalAttention's gradient (the kernel itself, the training
// forward, is in attention_kernel.go): causalAttentionGrad computes dq,
// dk and dv together and unpack splits them.
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
