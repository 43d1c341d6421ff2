package layers

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/ops"
)

// RoPE is a rotary position embedding (NeoX "rotate half" form): the
// float32 inverse frequency of each dimension pair, and the factor YaRN
// puts on cos and sin.
type RoPE struct {
	InvFreq []float32
	// Scale multiplies cos and sin (YaRN's attention factor); 0 or 1:
	// none.
	Scale float32
	dyn   *dynamicNTK // dynamic NTK: InvFreq is the table up to its threshold
	id    string
	step  *stepAngles // the last step's cos and sin, shared by its layers
}

// NewRoPE returns HF's default inverse frequencies 1/theta^(2i/dim) for
// i < dim/2, computed as HF does in float32 (exponent in float32, power
// rounded to float32), divided by factor for linear scaling (factor 1:
// none).
func NewRoPE(dim int, theta, factor float64) *RoPE {
	inv := defaultInvFreq(dim, theta)
	if factor != 1 {
		for i := range inv {
			inv[i] = float32(float64(inv[i]) / factor)
		}
	}
	return &RoPE{InvFreq: inv, id: fmt.Sprintf("dim=%d,theta=%g,factor=%g", dim, theta, factor), step: &stepAngles{}}
}

// NewScaledRoPE returns the rotary embedding r describes over dim rotary
// dimensions: inv_freq as transformers v5's modeling_rope_utils.py
// computes it for r.Type, in float32 op for op, then divided by a GGUF's
// rope_freqs when r has them.
func NewScaledRoPE(dim int, r loaders.RoPE) (*RoPE, error) {
	if dim <= 0 || dim%2 != 0 {
		return nil, fmt.Errorf("rope: rotary dimension %d must be positive and even", dim)
	}
	var inv []float32
	var scale float32
	var dyn *dynamicNTK
	switch r.Type {
	case "default", "":
		inv = defaultInvFreq(dim, r.Theta)
	case "linear":
		inv = NewRoPE(dim, r.Theta, r.Factor).InvFreq
	case "llama3":
		inv = llama3InvFreq(dim, r)
	case "yarn":
		inv = yarnInvFreq(dim, r)
		if r.AttentionFactor != 1 {
			scale = float32(r.AttentionFactor)
		}
	case "dynamic":
		dyn = &dynamicNTK{dim: dim, theta: r.Theta, factor: r.Factor, maxPos: r.MaxPositions}
		inv = defaultInvFreq(dim, r.Theta)
	default:
		return nil, fmt.Errorf("rope type %q is not supported (supported: default, linear, dynamic, llama3, yarn)", r.Type)
	}
	if r.FreqFactors != nil {
		if len(r.FreqFactors) != dim/2 {
			return nil, fmt.Errorf("rope_freqs has %d divisors, the rotary dimension %d wants %d", len(r.FreqFactors), dim, dim/2)
		}
		if dyn != nil {
			return nil, fmt.Errorf("rope_freqs with dynamic scaling is not supported")
		}
		for i, d := range r.FreqFactors {
			inv[i] /= float32(d)
		}
	}
	h := fnv.New64a()
	for _, f := range inv {
		fmt.Fprintf(h, "%x,", math.Float32bits(f))
	}
	id := fmt.Sprintf("dim=%d,%s,theta=%g,table=%x,scale=%g", dim, r.Type, r.Theta, h.Sum64(), scale)
	if dyn != nil {
		id += fmt.Sprintf(",dynamic(factor=%g,max=%d)", dyn.factor, dyn.maxPos)
	}
	return &RoPE{InvFreq: inv, Scale: scale, dyn: dyn, id: id, step: &stepAngles{}}, nil
}

// Forward rotates x [T, H, Dh] by the step's positions.
func (r *RoPE) Forward(s *graphs.Step, x *G.Node) *G.Node {
	return ops.Apply(r.kernel(), x, s.Positions)
}

func (r *RoPE) kernel() rope {
	return rope{invFreq: r.InvFreq, scale: r.Scale, dyn: r.dyn, id: r.id, step: r.step}
}

// stepAngles keeps the cos and sin of one step's positions: every layer
// rotates q and k by the same angles, and a decode step of a small model
// spent 1.5% of its time recomputing them. Only the fixed table is kept
// (a dynamic table changes with the step).
type stepAngles struct {
	mu       sync.Mutex
	pos      []int
	cos, sin []float32
}

// rotate rotates x as rotate does, with the angles of positions taken
// from the last step's when its positions are the same.
func (a *stepAngles) rotate(out, x []float32, H int, invFreq []float32, scale float32, positions []int) {
	half, row := len(invFreq), H*2*len(invFreq)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Equal(a.pos, positions) {
		a.pos = append(a.pos[:0], positions...)
		a.cos = slices.Grow(a.cos[:0], len(positions)*half)[:len(positions)*half]
		a.sin = slices.Grow(a.sin[:0], len(positions)*half)[:len(positions)*half]
		for t, p := range positions {
			if p >= 0 {
				angles(a.cos[t*half:(t+1)*half], a.sin[t*half:(t+1)*half], invFreq, scale, p)
			}
		}
	}
	for t, p := range positions {
		if p >= 0 {
			rotateRow(out[t*row:(t+1)*row], x[t*row:(t+1)*row], a.cos[t*half:(t+1)*half], a.sin[t*half:(t+1)*half])
		}
	}
}

// powFreq is base^(2i/dim) as torch computes it: the exponent
// float32(2i)/float32(dim) in float32 and the power rounded to float32.
func powFreq(base float64, i, dim int) float32 {
	e := float32(2*i) / float32(dim)
	return float32(math.Pow(base, float64(e)))
}

// defaultInvFreq is _compute_default_rope_parameters: 1/theta^(2i/dim).
func defaultInvFreq(dim int, theta float64) []float32 {
	inv := make([]float32, dim/2)
	for i := range inv {
		inv[i] = 1 / powFreq(theta, i, dim)
	}
	return inv
}

// llama3InvFreq is _compute_llama3_parameters: pairs whose wavelength is
// under L/high_freq_factor keep their frequency, those over
// L/low_freq_factor are divided by factor, and those between blend
// linearly in L/wavelength. Every step is a float32 tensor op with its
// Python scalar cast to float32; the explicit conversions keep Go from
// fusing a multiply-add.
func llama3InvFreq(dim int, r loaders.RoPE) []float32 {
	inv := defaultInvFreq(dim, r.Theta)
	L := float64(r.OriginalMaxPositions)
	lowWave := float32(L / r.LowFreqFactor)
	highWave := float32(L / r.HighFreqFactor)
	factor := float32(r.Factor)
	for i, f := range inv {
		wave := float32(2*math.Pi) / f
		switch {
		case wave < highWave:
		case wave > lowWave:
			inv[i] = f / factor
		default:
			smooth := (float32(L)/wave - float32(r.LowFreqFactor)) / float32(r.HighFreqFactor-r.LowFreqFactor)
			inv[i] = float32(float32((1-smooth)*f)/factor) + float32(smooth*f)
		}
	}
	return inv
}

// yarnRange is find_correction_range: the pair indices where the ramp
// from extrapolation to interpolation starts and ends, floored and
// ceiled when truncating, clamped to [0, dim-1].
func yarnRange(dim int, r loaders.RoPE) (low, high float64) {
	corr := func(rotations float64) float64 {
		return float64(dim) * math.Log(float64(r.OriginalMaxPositions)/(rotations*2*math.Pi)) / (2 * math.Log(r.Theta))
	}
	low, high = corr(r.BetaFast), corr(r.BetaSlow)
	if r.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	return max(low, 0), min(high, float64(dim-1))
}

// yarnInvFreq is _compute_yarn_parameters' table: per pair i, a linear
// ramp over [low, high] blends 1/(factor·theta^(2i/dim)) (interpolation)
// into 1/theta^(2i/dim) (extrapolation), in float32 as HF orders it.
func yarnInvFreq(dim int, r loaders.RoPE) []float32 {
	low, high := yarnRange(dim, r)
	if low == high {
		high += 0.001 // HF's guard against a zero-width ramp
	}
	factor := float32(r.Factor)
	inv := make([]float32, dim/2)
	for i := range inv {
		pos := powFreq(r.Theta, i, dim)
		extra := 1 / pos
		interp := 1 / float32(factor*pos)
		ramp := (float32(i) - float32(low)) / float32(high-low)
		ramp = min(max(ramp, 0), 1)
		ef := 1 - ramp // extrapolation's share
		inv[i] = float32(interp*float32(1-ef)) + float32(extra*ef)
	}
	return inv
}

// dynamicNTK is _compute_dynamic_ntk_parameters, which dynamic_rope_update
// calls with seq_len = max(position_ids) + 1 whenever that outgrows
// max_position_embeddings: the base grows to theta·((factor·seq_len/max)
// - (factor-1))^(dim/(dim-2)), computed in float32 because seq_len is a
// tensor there. Up to the threshold the table is the default one.
type dynamicNTK struct {
	dim           int
	theta, factor float64
	maxPos        int
}

// table returns the inverse frequencies for a step whose largest
// position is maxPosition, or nil when the default table applies.
//
// HF keeps the table of the longest sequence seen until one shorter than
// max_position_embeddings resets it; for a sequence decoded in order (a
// session, a training step) that is this step's own largest position.
func (d *dynamicNTK) table(maxPosition int) []float32 {
	seqLen := maxPosition + 1
	if seqLen <= d.maxPos {
		return nil
	}
	f := float32(d.factor)
	a := float32(f*float32(seqLen)) / float32(d.maxPos)
	a -= float32(d.factor - 1)
	exp := float32(float64(d.dim) / float64(d.dim-2))
	base := float32(d.theta) * float32(math.Pow(float64(a), float64(exp)))
	inv := make([]float32, d.dim/2)
	for i := range inv {
		inv[i] = 1 / powFreq(float64(base), i, d.dim)
	}
	return inv
}

// tableFor is the kernel's table for positions: the dynamic one when
// the step outgrows the threshold, else the fixed one.
func (k rope) tableFor(positions []int) []float32 {
	if k.dyn == nil {
		return k.invFreq
	}
	m := -1
	for _, p := range positions {
		m = max(m, p)
	}
	if t := k.dyn.table(m); t != nil {
		return t
	}
	return k.invFreq
}
