package layers

import (
	"math"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/internal/simd"
)

// A quantized KV cache (graphs.KVQ8_0, graphs.KVQ4_0) computes attention
// as llama.cpp does with one (src/llama-graph.cpp build_attn and ggml-cpu's
// flash attention, ggml_compute_forward_flash_attn_ext_f16_one_chunk):
//
//  1. Q and K are rotated by the normalised Sylvester-Hadamard matrix per
//     chunk of kvRotation(Dk) values when Dk is a multiple of 64, in the
//     order llama.cpp holds a head (interleaved for Llama's permuted rows);
//     V and the attention output per chunk of 64 when Dv is.
//  2. K and V rows are stored as Q8_0 (x86 quantize_row_q8_0: round half
//     to even) or Q4_0 (quantize_row_q4_0_ref: truncation) blocks.
//  3. Each query row is quantized to Q8_0; a score is the integer block
//     dot product times both scales, times the scale; an online softmax in
//     float32 accumulates the float32-widened value rows.
//
// The rotation is orthogonal, so the result is attention's up to the
// quantization; llama.cpp rotates because a rotated row has fewer
// outliers to spoil its block's scale, and matching its logits needs the
// same rotation.

// kvRotation is the chunk of the K/Q Hadamard rotation of a head of dim
// values: the largest power of two >= 64 dividing dim, or 0 (none) when
// 64 does not divide it.
func kvRotation(dim int) int {
	if dim%64 != 0 {
		return 0
	}
	n := 64
	for dim%(2*n) == 0 {
		n *= 2
	}
	return n
}

// fwht rotates x, a power-of-two length, by the normalised Hadamard matrix
// H[i][j] = (-1)^popcount(i&j) / sqrt(n) as ggml_compute_forward_fwht does:
// x·(1/sqrtf(n)) first, then log2(n) butterfly passes (u+v, u−v) from the
// narrowest, in float32. H is symmetric and H·H = I: it is its own inverse.
func fwht(x []float32) {
	n := len(x)
	scale := 1 / float32(math.Sqrt(float64(n)))
	for i := range x {
		x[i] *= scale
	}
	for h := 1; h < n; h <<= 1 {
		for i := 0; i < n; i += 2 * h {
			for j := i; j < i+h; j++ {
				u, v := x[j], x[j+h]
				x[j], x[j+h] = u+v, u-v
			}
		}
	}
}

// fwhtChunks rotates each consecutive chunk of n values of x.
func fwhtChunks(x []float32, n int) {
	for c := 0; c+n <= len(x); c += n {
		fwht(x[c : c+n])
	}
}

// toInterleaved writes a head in HF order (rotate_half's halves) into dst
// in the order llama.cpp's GGUF holds Llama's permuted Q and K rows:
// element 2i is HF's i, element 2i+1 is HF's len/2+i.
func toInterleaved(dst, src []float32) {
	h := len(src) / 2
	for i := 0; i < h; i++ {
		dst[2*i], dst[2*i+1] = src[i], src[h+i]
	}
}

// fromInterleaved undoes toInterleaved.
func fromInterleaved(dst, src []float32) {
	h := len(src) / 2
	for i := 0; i < h; i++ {
		dst[i], dst[h+i] = src[2*i], src[2*i+1]
	}
}

// kvFormat is the block format of a quantized cache type.
func kvFormat(t graphs.KVCacheType) quant.Format {
	if t == graphs.KVQ4_0 {
		return quant.Q4_0
	}
	return quant.Q8_0
}

// quantizeKV stores x into dst as f's blocks, as llama.cpp's cache does
// (quant.QuantizeKV).
func quantizeKV(f quant.Format, x []float32, dst []byte) { quant.QuantizeKV(f, x, dst) }

// quantCache is how a layer's attention reads and writes a quantized
// cache.
type quantCache struct {
	kFmt, vFmt    quant.Format
	kRow, vRow    int  // bytes of a head's row
	rotK          int  // Q/K rotation chunk, 0: none
	rotV          bool // V and output rotated by 64-value chunks
	interleaved   bool // Q and K in llama.cpp's interleaved order
	preScale      bool // Q scaled before it is quantized, scores by 1
	scale         float32
	blockTokens   int
	dk, dv, heads int // Dk, Dv, KV heads
}

func (k cachedAttention) quantCache(d attnDims) quantCache {
	t := k.kv.Type()
	c := quantCache{kFmt: kvFormat(t), vFmt: kvFormat(t), interleaved: k.interleaved, preScale: k.preScale,
		scale: k.scale, blockTokens: d.B, dk: d.Dk, dv: d.Dv, heads: d.Hkv}
	c.kRow, _ = t.RowBytes(d.Dk)
	c.vRow, _ = t.RowBytes(d.Dv)
	c.rotK = kvRotation(d.Dk)
	c.rotV = d.Dv%64 == 0
	return c
}

// prepareKey writes key (HF order) as llama.cpp holds it before it is
// quantized: interleaved if the model's rows are permuted, rotated.
func (c *quantCache) prepareKey(dst, key []float32) {
	if c.interleaved {
		toInterleaved(dst, key)
	} else {
		copy(dst, key)
	}
	if c.rotK > 0 {
		fwhtChunks(dst, c.rotK)
	}
}

// restoreKey undoes prepareKey (up to float32 rounding).
func (c *quantCache) restoreKey(dst, held []float32) {
	tmp := append([]float32(nil), held...)
	if c.rotK > 0 {
		fwhtChunks(tmp, c.rotK)
	}
	if c.interleaved {
		fromInterleaved(dst, tmp)
	} else {
		copy(dst, tmp)
	}
}

// storeQuant writes a run's keys and values into its blocks.
func (k cachedAttention) storeQuant(c *quantCache, r graphs.SeqRun, kNew, vNew []float32, d attnDims) {
	kb, vb := make([]float32, d.Dk), make([]float32, d.Dv)
	for t := 0; t < r.Len; t++ {
		p := r.Pos + t
		blk, slot := r.Blocks[p/d.B], p%d.B
		keys, values := k.kv.QuantBlocks(blk)
		for g := 0; g < d.Hkv; g++ {
			c.prepareKey(kb, kNew[((r.Row+t)*d.Hkv+g)*d.Dk:][:d.Dk])
			quantizeKV(c.kFmt, kb, keys[(g*d.B+slot)*c.kRow:][:c.kRow])
			copy(vb, vNew[((r.Row+t)*d.Hkv+g)*d.Dv:][:d.Dv])
			if c.rotV {
				fwhtChunks(vb, 64)
			}
			quantizeKV(c.vFmt, vb, values[(g*d.B+slot)*c.vRow:][:c.vRow])
		}
	}
}

// quantTask is the attention of a forward over a quantized cache: a part
// per run and query head.
type quantTask struct {
	k     cachedAttention
	c     quantCache
	q     []float32
	out   []float32
	probs []float32
	keys  int
	runs  []graphs.SeqRun
	d     attnDims
}

func (t *quantTask) Part(i int) {
	d, k, c := t.d, t.k, &t.c
	r, h := t.runs[i/d.Hq], i%d.Hq
	g := h / (d.Hq / d.Hkv)
	qf, scaled := make([]float32, d.Dk), make([]float32, d.Dk)
	qq := make([]int8, d.Dk)
	qd := make([]float32, d.Dk/32)
	acc := make([]float32, d.Dv)
	vrow := make([]float32, d.Dv)
	var scores []float32
	scale := c.scale
	if c.preScale {
		scale = 1
	}
	for row := 0; row < r.Len; row++ {
		p := r.Pos + row
		src := t.q[((r.Row+row)*d.Hq+h)*d.Dk:][:d.Dk]
		if c.preScale {
			// Gemma3's graph multiplies Q by its scale before attention.
			for j, x := range src {
				scaled[j] = x * c.scale
			}
			src = scaled
		}
		c.prepareKey(qf, src)
		quant.QuantizeActs(quant.Q8_0, qf, qq, qd, nil)
		lo := k.lo(p)
		scores = grow(scores, p+1-lo)
		M, S := float32(math.Inf(-1)), float32(0)
		clear(acc)
		for j := lo; j <= p; j++ {
			keys, values := k.kv.QuantBlocks(r.Blocks[j/d.B])
			off := g*d.B + j%d.B
			s := quant.DotActs(c.kFmt, keys[off*c.kRow:][:c.kRow], qq, qd, nil) * scale
			scores[j-lo] = s
			ms, vs := float32(1), float32(1)
			if s > M {
				ms = float32(math.Exp(float64(M - s)))
				M = s
				for x := range acc {
					acc[x] *= ms
				}
			} else {
				vs = float32(math.Exp(float64(s - M)))
			}
			quant.DequantizeRow(c.vFmt, values[off*c.vRow:][:c.vRow], vrow)
			for x, v := range vrow {
				acc[x] += v * vs
			}
			S = S*ms + vs
		}
		var inv float32
		if S != 0 {
			inv = 1 / S
		}
		o := t.out[((r.Row+row)*d.Hq+h)*d.Dv:][:d.Dv]
		for x, v := range acc {
			o[x] = v * inv
		}
		if c.rotV {
			fwhtChunks(o, 64) // back from the rotated values' basis
		}
		if t.probs != nil {
			pr := t.probs[((r.Row+row)*d.Hq+h)*t.keys:]
			for j := lo; j <= p; j++ {
				pr[j] = float32(math.Exp(float64(scores[j-lo]-M))) * inv
			}
		}
	}
}

// cpuQuant is the forward over a quantized cache: store the forward's
// keys and values, then attend.
func (k cachedAttention) cpuQuant(q, kNew, vNew, out, probs []float32, keys int, runs []graphs.SeqRun, d attnDims) {
	c := k.quantCache(d)
	for _, r := range runs {
		k.storeQuant(&c, r, kNew, vNew, d)
	}
	t := &quantTask{k: k, c: c, q: q, out: out, probs: probs, keys: keys, runs: runs, d: d}
	simd.Parallel(len(runs)*d.Hq, t)
}
