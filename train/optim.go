package train

import (
	"fmt"
	"math"
	"slices"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
)

// AdamWConfig holds AdamW's hyperparameters. The zero value of a field
// means its default: Beta1 0.9, Beta2 0.999, Eps 1e-8 (torch.optim.AdamW's).
type AdamWConfig struct {
	Beta1, Beta2, Eps float64
	// WeightDecay is the decoupled decay: each step multiplies a decayed
	// weight by 1 - lr*WeightDecay before the Adam update. Only matrices
	// (graphs.Matrix: linear weights, embeddings, experts) decay; norm
	// scales and biases do not, as Hugging Face's Trainer does.
	WeightDecay float64
}

func (c AdamWConfig) withDefaults() AdamWConfig {
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	return c
}

// AdamW is torch.optim.AdamW over a model's float32 weights, updated in
// place: for each weight w with gradient g at step t (from 1),
//
//	w ← w·(1 - lr·λ)                        (decayed weights only)
//	m ← β1·m + (1-β1)·g
//	v ← β2·v + (1-β2)·g²
//	w ← w - lr/(1-β1ᵗ) · m / (√v/√(1-β2ᵗ) + ε)
//
// Each element is computed in float64 and stored in float32 (weights and
// moments). The weights must be writable F32 (see Trainable).
type AdamW struct {
	cfg    AdamWConfig
	params []*graphs.Param
	m, v   map[string][]float32
	// parts finds the stacked weight a part's gradient updates (see
	// graphs.Param.Parts): Gradients names a MoE's experts so.
	parts map[string]weightPart
	t     int
}

// weightPart is slice i of a stacked weight.
type weightPart struct {
	p *graphs.Param
	i int
}

// NewAdamW makes an AdamW optimizer for params, each of which must hold
// F32 data.
func NewAdamW(params []*graphs.Param, cfg AdamWConfig) (*AdamW, error) {
	o := &AdamW{cfg: cfg.withDefaults(), m: map[string][]float32{}, v: map[string][]float32{}, parts: map[string]weightPart{}}
	for _, p := range params {
		if p.DType != graphs.F32 || p.Data == nil {
			return nil, fmt.Errorf("AdamW: weight %q is %s, not writable float32 (see train.Trainable)", p.Name, p.DType)
		}
		n := p.Numel()
		o.params = append(o.params, p)
		o.m[p.Name] = make([]float32, n)
		o.v[p.Name] = make([]float32, n)
		for i, part := range p.Parts {
			o.parts[part] = weightPart{p, i}
		}
	}
	return o, nil
}

// Steps is the number of updates made so far.
func (o *AdamW) Steps() int { return o.t }

// StateBytes is the memory of the moments: two float32 per weight value.
func (o *AdamW) StateBytes() int64 {
	var n int64
	for _, m := range o.m {
		n += 4 * int64(len(m))
	}
	for _, v := range o.v {
		n += 4 * int64(len(v))
	}
	return n
}

// Step updates every weight that has a gradient in grads (keyed by weight
// name, shaped as the weight, or for a stacked weight by the names of its
// parts, as Gradients keys them) with learning rate lr. A weight without
// a gradient is left as it is, moments included.
func (o *AdamW) Step(grads map[string]*tensor.Dense, lr float64) error {
	for name, g := range grads {
		var want int
		if m, ok := o.m[name]; ok {
			want = len(m)
		} else if pt, ok := o.parts[name]; ok {
			if _, whole := grads[pt.p.Name]; whole {
				return fmt.Errorf("AdamW step %d: gradients for both %q and its part %q", o.t+1, pt.p.Name, name)
			}
			want = len(o.m[pt.p.Name]) / len(pt.p.Parts)
		} else {
			return fmt.Errorf("AdamW step %d: a gradient for %q, which the optimizer does not hold", o.t+1, name)
		}
		if gd, ok := g.Data().([]float32); !ok || len(gd) != want {
			return fmt.Errorf("AdamW step %d: the gradient of %q is %v %v, want %d float32s", o.t+1, name, g.Dtype(), g.Shape(), want)
		}
	}
	o.t++
	c := o.cfg
	bc1 := 1 - math.Pow(c.Beta1, float64(o.t))
	bc2 := math.Sqrt(1 - math.Pow(c.Beta2, float64(o.t)))
	step := lr / bc1
	for _, p := range o.params {
		w := p.Data.Data().([]float32)
		m, v := o.m[p.Name], o.v[p.Name]
		decay := 1.0
		if p.Role == graphs.Matrix {
			decay = 1 - lr*c.WeightDecay
		}
		// update applies gradient gd to the elements from off on.
		update := func(gd []float32, off int) {
			w, m, v := w[off:], m[off:], v[off:]
			for i, gi := range gd {
				gi := float64(gi)
				mi := c.Beta1*float64(m[i]) + (1-c.Beta1)*gi
				vi := c.Beta2*float64(v[i]) + (1-c.Beta2)*gi*gi
				m[i], v[i] = float32(mi), float32(vi)
				w[i] = float32(float64(w[i])*decay - step*mi/(math.Sqrt(vi)/bc2+c.Eps))
			}
		}
		if g, ok := grads[p.Name]; ok {
			update(g.Data().([]float32), 0)
			continue
		}
		for i, part := range p.Parts {
			if g, ok := grads[part]; ok {
				update(g.Data().([]float32), i*len(w)/len(p.Parts))
			}
		}
	}
	return nil
}

// Schedule is a learning rate schedule: linear warmup from 0 to Peak over
// the first Warmup steps, then cosine decay from Peak to Min at step
// Total. Steps count from 1.
type Schedule struct {
	Peak, Min     float64
	Warmup, Total int
}

// LR is the learning rate of step (1-based). Past Total it stays at Min.
func (s Schedule) LR(step int) float64 {
	if step <= s.Warmup {
		return s.Peak * float64(step) / float64(s.Warmup)
	}
	if step >= s.Total {
		return s.Min
	}
	progress := float64(step-s.Warmup) / float64(s.Total-s.Warmup)
	return s.Min + (s.Peak-s.Min)*0.5*(1+math.Cos(math.Pi*progress))
}

// ClipGradNorm scales every gradient in grads by max/norm when their
// global L2 norm exceeds max (torch.nn.utils.clip_grad_norm_), and
// returns the norm before clipping. max <= 0 only measures.
func ClipGradNorm(grads map[string]*tensor.Dense, max float64) float64 {
	names := make([]string, 0, len(grads))
	for n := range grads {
		names = append(names, n)
	}
	slices.Sort(names) // a fixed summation order: the same norm every run
	var ss float64
	for _, n := range names {
		for _, x := range grads[n].Data().([]float32) {
			ss += float64(x) * float64(x)
		}
	}
	norm := math.Sqrt(ss)
	if max > 0 && norm > max {
		scale := float32(max / (norm + 1e-6))
		for _, g := range grads {
			d := g.Data().([]float32)
			for i := range d {
				d[i] *= scale
			}
		}
	}
	return norm
}
