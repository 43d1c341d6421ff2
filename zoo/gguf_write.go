package zoo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// GGUF file types `gozoo quantize` writes, with llama.cpp's llama_ftype
// numbers (general.file_type).
var ggufFileTypes = map[string]uint32{"f32": 0, "q4_0": 2, "q8_0": 7, "q4_k_m": 15}

// WriteGGUF writes a loaded model as a GGUF file of file type ftype
// ("q8_0", "q4_0", "q4_k_m" or "f32") with llama.cpp's tensor names,
// metadata and type choices: vectors, position tables and MoE routers in
// F32; the output matrix (the token embeddings when tied) in Q6_K for the
// 4-bit types; Q4_K_M's Q6_K on attn_v and ffn_down of the layers
// llama.cpp picks (use_more_bits); K-quants falling back to Q5_0 / Q8_0
// for rows that are not whole super-blocks. configJSON is the model's
// config.json; extra is written after the model's metadata (the
// tokenizer's).
func WriteGGUF(w io.Writer, m Model, configJSON []byte, ftype string, name string, extra []gguf.KV) error {
	fileType, ok := ggufFileTypes[ftype]
	if !ok {
		return fmt.Errorf("quantization type %q is not supported (supported: q8_0, q4_0, q4_k_m, f32)", ftype)
	}
	var archName string
	for n, a := range ggufArchs {
		if a.modelType == m.ModelType() {
			archName = n
		}
	}
	if archName == "" {
		return fmt.Errorf("model_type %q has no llama.cpp architecture here (supported: gemma3_text, gpt2, llama, qwen3, qwen3_moe)", m.ModelType())
	}
	arch := ggufArchs[archName]
	var cfg map[string]any
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	meta := []gguf.KV{{Key: "general.architecture", Value: archName}, {Key: "general.name", Value: name}}
	archMeta, err := ggufArchMeta(archName, cfg, m)
	if err != nil {
		return err
	}
	meta = append(meta, archMeta...)
	meta = append(meta, gguf.KV{Key: "general.file_type", Value: fileType}, gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
	meta = append(meta, extra...)
	has := map[string]bool{}
	for _, kv := range meta {
		has[kv.Key] = true
	}
	if eos := m.EOSTokenIDs(); len(eos) > 0 && !has["tokenizer.ggml.eos_token_id"] {
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(eos[0])})
	}
	if bos, ok := cfg["bos_token_id"].(float64); ok && !has["tokenizer.ggml.bos_token_id"] {
		meta = append(meta, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(bos)})
	}

	// One GGUF tensor per declared one: a MoE's experts are declared
	// stacked, [experts, out, in], as ffn_*_exps hold them.
	params := m.Params().All()
	names := make([]string, len(params))
	seen := map[string]string{}
	for i, p := range params {
		gname, ok := arch.tensor(p.Name)
		if !ok {
			return fmt.Errorf("no GGUF name for tensor %q of a %s model", p.Name, archName)
		}
		if other, dup := seen[gname]; dup {
			return fmt.Errorf("tensors %q and %q both map to GGUF tensor %q", other, p.Name, gname)
		}
		seen[gname], names[i] = p.Name, gname
	}
	layers := m.NumLayers()
	_, untied := seen["output.weight"]
	hd := intOf(cfg, "head_dim", 0)
	if hd == 0 && intOf(cfg, "num_attention_heads", 0) > 0 {
		hd = intOf(cfg, "hidden_size", 0) / intOf(cfg, "num_attention_heads", 1)
	}
	var tensors []gguf.WriteTensor
	for i, p := range params {
		gname := names[i]
		vals := p.Float32s()
		if archName == "llama" && (strings.HasSuffix(gname, ".attn_q.weight") || strings.HasSuffix(gname, ".attn_k.weight")) {
			vals = permuteRows(vals, p.Shape[0], p.Shape[1], hd)
		}
		if archName == "gemma3" && p.Role == graphs.OffsetNorm {
			w := make([]float32, len(vals))
			for i, x := range vals {
				w[i] = x + 1 // llama.cpp stores Gemma's norms as 1 + w
			}
			vals = w
		}
		// GGUF lists dimensions innermost first.
		dims := make([]uint64, 0, len(p.Shape))
		for i := len(p.Shape) - 1; i >= 0; i-- {
			dims = append(dims, uint64(p.Shape[i]))
		}
		typ := ggufTypeFor(ftype, gname, p, layers, !untied)
		data, err := encodeTensor(typ, vals)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", gname, err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: gname, Dims: dims, Type: typ, Data: data})
	}
	return gguf.Write(w, meta, tensors)
}

// ggufTypeFor is llama.cpp's choice of type for one tensor.
func ggufTypeFor(ftype, name string, p *graphs.Param, layers int, tied bool) gguf.Type {
	cols := p.Shape[len(p.Shape)-1]
	if p.Role != graphs.Matrix || len(p.Shape) < 2 || name == "position_embd.weight" || strings.Contains(name, "ffn_gate_inp") || ftype == "f32" {
		return gguf.TypeF32
	}
	base := map[string]gguf.Type{"q8_0": gguf.TypeQ8_0, "q4_0": gguf.TypeQ4_0, "q4_k_m": gguf.TypeQ4_K}[ftype]
	t := base
	output := name == "output.weight" || (tied && name == "token_embd.weight")
	switch {
	case output && ftype != "q8_0":
		t = gguf.TypeQ6_K
	case ftype == "q4_k_m" && (strings.Contains(name, ".attn_v.") || strings.Contains(name, ".ffn_down")):
		if i, ok := layerOf(name); ok && useMoreBits(i, layers) {
			t = gguf.TypeQ6_K
		}
	}
	if t.BlockSize() == 256 && cols%256 != 0 {
		// llama.cpp's fallbacks for rows that are not whole super-blocks.
		t = map[gguf.Type]gguf.Type{gguf.TypeQ4_K: gguf.TypeQ5_0, gguf.TypeQ6_K: gguf.TypeQ8_0}[t]
	}
	if cols%t.BlockSize() != 0 {
		return gguf.TypeF32
	}
	return t
}

// useMoreBits is llama.cpp's choice of the layers whose attn_v and
// ffn_down get more bits in Q4_K_M.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

func layerOf(name string) (int, bool) {
	i, _, ok := indexed(name, "blk.")
	return i, ok
}

// encodeTensor quantizes float32 values into type t.
func encodeTensor(t gguf.Type, v []float32) ([]byte, error) {
	if t == gguf.TypeF32 {
		out := make([]byte, 4*len(v))
		for i, x := range v {
			bits := math.Float32bits(x)
			out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		}
		return out, nil
	}
	f, ok := t.Format()
	if !ok || len(v)%f.BlockSize() != 0 {
		return nil, fmt.Errorf("cannot write %d values as %s", len(v), t)
	}
	out := make([]byte, len(v)/f.BlockSize()*f.BlockBytes())
	quant.QuantizeRow(f, v, out)
	return out, nil
}

// permuteRows applies convert_hf_to_gguf.py's permutation of llama's Q and
// K rows (the inverse of graphs.UnpermuteHeadRows).
func permuteRows(v []float32, rows, width, hd int) []float32 {
	out := make([]float32, len(v))
	for h := 0; h < rows/hd; h++ {
		for i := 0; i < hd/2; i++ {
			copy(out[(h*hd+2*i)*width:][:width], v[(h*hd+i)*width:][:width])
			copy(out[(h*hd+2*i+1)*width:][:width], v[(h*hd+hd/2+i)*width:][:width])
		}
	}
	return out
}

func intOf(cfg map[string]any, key string, def int) int {
	if v, ok := cfg[key].(float64); ok {
		return int(v)
	}
	return def
}

func floatOf(cfg map[string]any, key string, def float64) float64 {
	if v, ok := cfg[key].(float64); ok {
		return v
	}
	return def
}

// ggufArchMeta writes an architecture's {arch}.* keys from config.json,
// the inverse of the config functions above.
func ggufArchMeta(arch string, cfg map[string]any, m Model) ([]gguf.KV, error) {
	k := func(name string, v any) gguf.KV { return gguf.KV{Key: arch + "." + name, Value: v} }
	u := func(v int) uint32 { return uint32(v) }
	if arch == "gpt2" {
		embd := intOf(cfg, "n_embd", m.HiddenSize())
		inner := intOf(cfg, "n_inner", 4*embd)
		return []gguf.KV{
			k("block_count", u(m.NumLayers())), k("context_length", u(m.MaxPositions())), k("embedding_length", u(embd)),
			k("feed_forward_length", u(inner)), k("attention.head_count", u(intOf(cfg, "n_head", 12))),
			k("attention.layer_norm_epsilon", float32(floatOf(cfg, "layer_norm_epsilon", 1e-5))),
		}, nil
	}
	heads := intOf(cfg, "num_attention_heads", 0)
	if heads == 0 {
		return nil, fmt.Errorf("config.json has no num_attention_heads")
	}
	hd := intOf(cfg, "head_dim", m.HiddenSize()/heads)
	out := []gguf.KV{
		k("block_count", u(m.NumLayers())), k("context_length", u(m.MaxPositions())), k("embedding_length", u(m.HiddenSize())),
		k("feed_forward_length", u(intOf(cfg, "intermediate_size", 0))), k("attention.head_count", u(heads)),
		k("attention.head_count_kv", u(intOf(cfg, "num_key_value_heads", heads))),
		k("rope.freq_base", float32(floatOf(cfg, "rope_theta", 10000))),
		k("attention.layer_norm_rms_epsilon", float32(floatOf(cfg, "rms_norm_eps", 1e-6))),
	}
	switch arch {
	case "llama":
		out = append(out, k("rope.dimension_count", u(hd)), k("vocab_size", u(m.VocabSize())))
	case "qwen3", "qwen3moe", "gemma3":
		out = append(out, k("attention.key_length", u(hd)), k("attention.value_length", u(hd)))
	}
	switch arch {
	case "qwen3moe":
		if only, _ := cfg["mlp_only_layers"].([]any); len(only) > 0 || intOf(cfg, "decoder_sparse_step", 1) != 1 {
			return nil, fmt.Errorf("config.json: a qwen3_moe model with dense layers (mlp_only_layers %v, decoder_sparse_step %v) has no llama.cpp form: every qwen3moe layer is sparse there", cfg["mlp_only_layers"], cfg["decoder_sparse_step"])
		}
		out = append(out, k("expert_count", u(intOf(cfg, "num_experts", 0))), k("expert_used_count", u(intOf(cfg, "num_experts_per_tok", 0))),
			k("expert_feed_forward_length", u(intOf(cfg, "moe_intermediate_size", 0))))
	case "gemma3":
		out = append(out, k("attention.sliding_window", u(intOf(cfg, "sliding_window", 0))),
			k("rope.freq_base_swa", float32(floatOf(cfg, "rope_local_base_freq", 10000))))
		var sliding []bool
		for _, c := range m.Params().Caches() {
			sliding = append(sliding, c.Window > 0)
		}
		out = append(out, k("attention.sliding_window_pattern", sliding))
		if v, ok := cfg["final_logit_softcapping"].(float64); ok {
			out = append(out, k("final_logit_softcapping", float32(v)))
		}
	}
	return out, nil
}
