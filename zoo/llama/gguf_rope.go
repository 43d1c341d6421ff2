package llama

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

// RoPE scaling in a GGUF, as llama.cpp's llama-arch.cpp names the keys and
// convert_hf_to_gguf.py writes them: rope.scaling.type ("linear", "yarn")
// with rope.scaling.factor, rope.scaling.original_context_length and
// rope.scaling.yarn_{beta_fast,beta_slow,attn_factor}; llama3 scaling has
// no keys but a rope_freqs.weight tensor of per-pair divisors of the
// default frequencies, which the llama architecture reads.

// ggufRopeFreqs is the tensor holding llama3 scaling's divisors.
const ggufRopeFreqs = "rope_freqs.weight"

// ggufRoPEConfig fills config.json's rope_scaling (and the GGUF-only
// rope_freqs) from the file's scaling keys and rope_freqs.weight.
func ggufRoPEConfig(m zoo.GGUFMeta, c zoo.ConfigMap) error {
	typ := "none"
	if m.Has("rope.scaling.type") {
		var err error
		if typ, err = m.File.String(m.Key("rope.scaling.type")); err != nil {
			return err
		}
	}
	switch typ {
	case "none", "":
		// Older files carry a linear factor alone.
		if f, err := m.FloatOr("rope.scale_linear", 1); err != nil {
			return err
		} else if f != 1 {
			c["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": f}
		}
	case "linear":
		f, err := m.Float("rope.scaling.factor")
		if err != nil {
			return err
		}
		c["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": f}
	case "yarn":
		f, err := m.Float("rope.scaling.factor")
		if err != nil {
			return err
		}
		orig, err := m.Uint("rope.scaling.original_context_length")
		if err != nil {
			return err
		}
		s := map[string]any{"rope_type": "yarn", "factor": f, "original_max_position_embeddings": orig}
		for key, field := range map[string]string{"rope.scaling.yarn_beta_fast": "beta_fast", "rope.scaling.yarn_beta_slow": "beta_slow", "rope.scaling.yarn_attn_factor": "attention_factor"} {
			if m.Has(key) {
				v, err := m.Float(key)
				if err != nil {
					return err
				}
				s[field] = v
			}
		}
		// What HF's yarn has no counterpart for.
		if v, err := m.FloatOr("rope.scaling.yarn_log_multiplier", 0); err != nil {
			return err
		} else if v != 0 {
			return fmt.Errorf("%s: %s = %g is not supported (HF's yarn has no log multiplier)", m.File.Path, m.Key("rope.scaling.yarn_log_multiplier"), v)
		}
		if v, err := m.FloatOr("rope.scaling.yarn_ext_factor", -1); err != nil {
			return err
		} else if v >= 0 && v != 1 {
			return fmt.Errorf("%s: %s = %g is not supported (only 1: HF extrapolates fully)", m.File.Path, m.Key("rope.scaling.yarn_ext_factor"), v)
		}
		c["rope_scaling"] = s
	default:
		return fmt.Errorf("%s: %s %q is not supported (supported: none, linear, yarn)", m.File.Path, m.Key("rope.scaling.type"), typ)
	}
	t, ok := m.File.Tensor(ggufRopeFreqs)
	if !ok {
		return nil
	}
	if len(t.Dims) != 1 {
		return fmt.Errorf("%s: tensor %q has shape %v, want one divisor per dimension pair", m.File.Path, ggufRopeFreqs, t.Shape())
	}
	data := m.File.Data(t)
	if data == nil {
		return fmt.Errorf("%s: tensor %q lies outside the data section", m.File.Path, ggufRopeFreqs)
	}
	vals := make([]float32, t.Elements())
	if err := gguf.Dequantize(t.Type, data, vals); err != nil {
		return fmt.Errorf("%s: tensor %q: %w", m.File.Path, ggufRopeFreqs, err)
	}
	freqs := make([]float64, len(vals))
	for i, v := range vals {
		freqs[i] = float64(v)
	}
	c["rope_freqs"] = freqs
	return nil
}

// resolveRoPE is the full-attention RoPE config.json cfg describes.
func resolveRoPE(cfg zoo.ConfigMap) (loaders.RoPE, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return loaders.RoPE{}, err
	}
	var f struct {
		loaders.RoPEFields
		MaxPositions int `json:"max_position_embeddings"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return loaders.RoPE{}, fmt.Errorf("config.json: %w", err)
	}
	return f.Resolve("full_attention", cfg.Float("rope_theta", 10000), f.MaxPositions)
}

// ggufRoPEMetadata is the inverse of ggufRoPEConfig's keys for cfg.
// withFreqs tells whether the architecture stores rope_freqs.weight (only
// llama's reads it), which llama3 scaling and a GGUF's own divisors need.
func ggufRoPEMetadata(cfg zoo.ConfigMap, withFreqs bool) ([]gguf.KV, error) {
	r, err := resolveRoPE(cfg)
	if err != nil {
		return nil, err
	}
	if (r.Type == "llama3" || r.FreqFactors != nil) && !withFreqs {
		return nil, fmt.Errorf("config.json: llama3 rope scaling is stored as %s, which only llama.cpp's llama architecture reads", ggufRopeFreqs)
	}
	switch r.Type {
	case "default", "llama3":
		return nil, nil
	case "linear":
		return []gguf.KV{{Key: "rope.scaling.type", Value: "linear"}, {Key: "rope.scaling.factor", Value: float32(r.Factor)}}, nil
	case "yarn":
		if !r.Truncate {
			return nil, fmt.Errorf("config.json: yarn with truncate false has no GGUF key (llama.cpp always truncates the ramp)")
		}
		kv := []gguf.KV{
			{Key: "rope.scaling.type", Value: "yarn"}, {Key: "rope.scaling.factor", Value: float32(r.Factor)},
			{Key: "rope.scaling.original_context_length", Value: uint32(r.OriginalMaxPositions)},
			{Key: "rope.scaling.yarn_beta_fast", Value: float32(r.BetaFast)}, {Key: "rope.scaling.yarn_beta_slow", Value: float32(r.BetaSlow)},
		}
		// Written only when it is not the one yarn derives from the
		// factor, as convert_hf_to_gguf.py writes an explicit one.
		def := 1.0
		if r.Factor > 1 {
			def = 0.1*math.Log(r.Factor) + 1
		}
		if r.AttentionFactor != def {
			kv = append(kv, gguf.KV{Key: "rope.scaling.yarn_attn_factor", Value: float32(r.AttentionFactor)})
		}
		return kv, nil
	}
	return nil, fmt.Errorf("config.json: %s rope scaling has no GGUF form (llama.cpp has none)", r.Type)
}

// ExtraTensors writes rope_freqs.weight for llama3 scaling (or a GGUF's
// own divisors): for each pair the float32 divisor d that makes
// float32(inv_freq / d) the llama3 frequency, or the nearest float32 to
// it, so that reading the file back gives the config's table.
func (ggufLlama) ExtraTensors(cfg zoo.ConfigMap) ([]gguf.WriteTensor, error) {
	r, err := resolveRoPE(cfg)
	if err != nil {
		return nil, err
	}
	divs := make([]float32, len(r.FreqFactors))
	for i, d := range r.FreqFactors {
		divs[i] = float32(d)
	}
	if r.Type == "llama3" {
		hd := cfg.Int("head_dim", 0)
		if heads := cfg.Int("num_attention_heads", 0); hd == 0 && heads > 0 {
			hd = cfg.Int("hidden_size", 0) / heads
		}
		scaled, err := layers.NewScaledRoPE(hd, r)
		if err != nil {
			return nil, fmt.Errorf("config.json: %w", err)
		}
		base := layers.NewRoPE(hd, r.Theta, 1).InvFreq
		divs = make([]float32, len(base))
		for i := range base {
			divs[i] = divisor(base[i], scaled.InvFreq[i])
		}
	}
	if len(divs) == 0 {
		return nil, nil
	}
	data := make([]byte, 4*len(divs))
	for i, d := range divs {
		bits := math.Float32bits(d)
		data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
	}
	return []gguf.WriteTensor{{Name: ggufRopeFreqs, Dims: []uint64{uint64(len(divs))}, Type: gguf.TypeF32, Data: data}}, nil
}

// divisor is the float32 d for which base/d in float32 comes nearest
// want, among the float32s around base/want: want itself when one gives
// it. A step of d moves base/d by about 1.7 of want's ulps, so some pairs
// land one ulp off; that is the precision the file format allows.
func divisor(base, want float32) float32 {
	best := float32(float64(base) / float64(want))
	miss := func(c float32) float64 { return math.Abs(float64(base/c) - float64(want)) }
	for _, dir := range []float32{float32(math.Inf(1)), float32(math.Inf(-1))} {
		c := best
		for range 8 {
			if miss(c) < miss(best) {
				best = c
			}
			c = math.Nextafter32(c, dir)
		}
	}
	return best
}
