package layers

import (
	"math"

	"github.com/gozoo/gozoo/graphs"
)

// ropeShift moves a RoPE layer's cached keys to other positions: RoPE
// rotates each pair (i, i+Dh/2) by position·invFreq[i], so a key cached at
// position p and rotated by delta·invFreq[i] is the key at p+delta up to
// float32 rounding (llama.cpp's K-shift applies ggml_rope_ext with the
// position delta the same way). YaRN's factor on cos and sin (RoPE.Scale)
// is in the cached key already, so the shift is a pure rotation.
type ropeShift struct {
	invFreq     []float32
	interleaved bool // the layer's AttentionConfig.Interleaved
}

// ShiftKeys rotates rows of 2·len(invFreq) by delta positions. A quantized
// cache holds rows as its attention stored them (interleaved, Hadamard-
// rotated: quantCache.prepareKey): they are brought back to HF's order,
// rotated, and prepared again.
func (r *ropeShift) ShiftKeys(rows []float32, typ graphs.KVCacheType, delta int) {
	half := len(r.invFreq)
	dh := 2 * half
	cos, sin := make([]float32, half), make([]float32, half)
	for i, f := range r.invFreq {
		// The forward's arithmetic (kernels.go rotate): a float32 angle.
		a := float64(float32(delta) * f)
		cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	c := quantCache{interleaved: r.interleaved, rotK: kvRotation(dh)}
	buf := make([]float32, dh)
	for off := 0; off+dh <= len(rows); off += dh {
		row := rows[off : off+dh]
		if typ.Quantized() {
			c.restoreKey(buf, row)
			copy(row, buf)
		}
		for i := 0; i < half; i++ {
			x1, x2 := row[i], row[i+half]
			row[i] = x1*cos[i] - x2*sin[i]
			row[i+half] = x2*cos[i] + x1*sin[i]
		}
		if typ.Quantized() {
			c.prepareKey(buf, row)
			copy(row, buf)
		}
	}
}

// stillKeys are the keys of a layer without positional encoding of its
// own (SmolLM3's NoPE layers): they move unchanged.
type stillKeys struct{}

func (stillKeys) ShiftKeys([]float32, graphs.KVCacheType, int) {}

// keyShifter is how layer c's cached keys move in a context shift, or nil
// when they cannot: no RoPE and not marked NoPE (positions may enter
// elsewhere, as GPT-2's learned embeddings do), or dynamic NTK scaling
// (its frequencies depend on the context's length, so a cached key's
// angle is not position·InvFreq).
func keyShifter(c AttentionConfig) graphs.KeyShifter {
	switch {
	case c.RoPE != nil && c.RoPE.dyn != nil:
		return nil
	case c.RoPE != nil:
		return &ropeShift{invFreq: c.RoPE.InvFreq, interleaved: c.Interleaved}
	case c.NoPE:
		return stillKeys{}
	}
	return nil
}
