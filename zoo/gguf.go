package zoo

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// A GGUF file (llama.cpp's format) is a checkpoint like a safetensors
// folder: its metadata becomes the family's config.json, and each tensor
// the model declares is found under its llama.cpp name. One table per
// architecture maps the names, and the few layout differences (llama's
// permuted Q/K rows, Gemma's stored 1 + w norms) are undone here; the
// families' model code is the same for both formats. Stacked experts are
// no difference: a MoE declares them stacked, as ffn_*_exps store them.

// ggufArch is what the zoo knows of one llama.cpp architecture.
type ggufArch struct {
	modelType string
	// config writes the family's config.json fields from the metadata.
	config func(m ggufMeta, c map[string]any) error
	// tensor maps a declared (Hugging Face) name to the GGUF tensor.
	tensor func(hf string) (name string, ok bool)
}

var ggufArchs = map[string]ggufArch{
	"llama":    {"llama", llamaConfig, decoderTensor(nil)},
	"qwen3":    {"qwen3", llamaConfig, decoderTensor(nil)},
	"qwen3moe": {"qwen3_moe", qwen3MoEConfig, decoderTensor(nil)},
	"gemma3": {"gemma3_text", gemma3Config, decoderTensor(map[string]string{
		"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
		"pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
	})},
	"gpt2": {"gpt2", gpt2Config, gpt2Tensor},
}

// ggufMeta reads an architecture's keys ({arch}.name) with errors naming
// the key and file.
type ggufMeta struct {
	f    *gguf.File
	arch string
}

func (m ggufMeta) uint(key string) (int, error) {
	v, err := m.f.Uint(m.arch + "." + key)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt32 {
		return 0, fmt.Errorf("%s: %s.%s = %d is beyond any model's size", m.f.Path, m.arch, key, v)
	}
	return int(v), nil
}

func (m ggufMeta) uintOr(key string, def int) (int, error) {
	if !m.f.Has(m.arch + "." + key) {
		return def, nil
	}
	return m.uint(key)
}

func (m ggufMeta) floatOr(key string, def float64) (float64, error) {
	if !m.f.Has(m.arch + "." + key) {
		return def, nil
	}
	return m.f.Float(m.arch + "." + key)
}

// rows is a 2-D tensor's first dimension in PyTorch order (the vocabulary
// of token_embd).
func (m ggufMeta) rows(name string) (int, error) {
	t, ok := m.f.Tensor(name)
	if !ok {
		return 0, fmt.Errorf("%s: missing tensor %q", m.f.Path, name)
	}
	s := t.Shape()
	if len(s) != 2 {
		return 0, fmt.Errorf("%s: tensor %q has shape %v, want 2-D", m.f.Path, name, s)
	}
	return s[0], nil
}

// commonConfig fills the fields every decoder family shares.
func commonConfig(m ggufMeta, c map[string]any) error {
	var err error
	get := func(key string) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = m.uint(key)
		return v
	}
	layers, hidden, ffn, heads := get("block_count"), get("embedding_length"), get("feed_forward_length"), get("attention.head_count")
	ctx := get("context_length")
	if err != nil {
		return err
	}
	if heads == 0 {
		return fmt.Errorf("%s: %s.attention.head_count is 0", m.f.Path, m.arch)
	}
	kv, err := m.uintOr("attention.head_count_kv", heads)
	if err != nil {
		return err
	}
	headDim, err := m.uintOr("attention.key_length", hidden/heads)
	if err != nil {
		return err
	}
	theta, err := m.floatOr("rope.freq_base", 10000)
	if err != nil {
		return err
	}
	eps, err := m.floatOr("attention.layer_norm_rms_epsilon", 1e-6)
	if err != nil {
		return err
	}
	vocab, err := m.rows("token_embd.weight")
	if err != nil {
		return err
	}
	_, untied := m.f.Tensor("output.weight")
	c["vocab_size"], c["hidden_size"], c["intermediate_size"] = vocab, hidden, ffn
	c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"] = layers, heads, kv
	c["head_dim"], c["max_position_embeddings"], c["rope_theta"] = headDim, ctx, theta
	c["rms_norm_eps"], c["tie_word_embeddings"] = eps, !untied
	return nil
}

func llamaConfig(m ggufMeta, c map[string]any) error { return commonConfig(m, c) }

func qwen3MoEConfig(m ggufMeta, c map[string]any) error {
	if err := commonConfig(m, c); err != nil {
		return err
	}
	for key, field := range map[string]string{"expert_count": "num_experts", "expert_used_count": "num_experts_per_tok", "expert_feed_forward_length": "moe_intermediate_size"} {
		v, err := m.uint(key)
		if err != nil {
			return err
		}
		c[field] = v
	}
	// llama.cpp always renormalises the chosen experts' weights.
	c["norm_topk_prob"], c["decoder_sparse_step"], c["mlp_only_layers"] = true, 1, []int{}
	return nil
}

func gemma3Config(m ggufMeta, c map[string]any) error {
	if err := commonConfig(m, c); err != nil {
		return err
	}
	window, err := m.uint("attention.sliding_window")
	if err != nil {
		return err
	}
	local, err := m.floatOr("rope.freq_base_swa", 10000)
	if err != nil {
		return err
	}
	layers := c["num_hidden_layers"].(int)
	types := make([]string, layers)
	key := m.arch + ".attention.sliding_window_pattern"
	pattern := 6
	var perLayer []bool
	if m.f.Has(key) {
		switch v := m.f.Metadata[key].(type) {
		case []bool:
			if len(v) != layers {
				return fmt.Errorf("%s: %s has %d entries for %d layers", m.f.Path, key, len(v), layers)
			}
			perLayer = v
		default:
			n, err := m.f.Uint(key)
			if err != nil {
				return err
			}
			if n == 0 || n > math.MaxInt32 {
				return fmt.Errorf("%s: %s = %d", m.f.Path, key, n)
			}
			pattern = int(n)
		}
	}
	for i := range types {
		sliding := (i+1)%pattern != 0
		if perLayer != nil {
			sliding = perLayer[i]
		}
		types[i] = "full_attention"
		if sliding {
			types[i] = "sliding_attention"
		}
	}
	c["sliding_window"], c["layer_types"], c["rope_local_base_freq"] = window, types, local
	c["query_pre_attn_scalar"], c["hidden_activation"] = c["head_dim"], "gelu_pytorch_tanh"
	if m.f.Has(m.arch + ".final_logit_softcapping") {
		v, err := m.f.Float(m.arch + ".final_logit_softcapping")
		if err != nil {
			return err
		}
		c["final_logit_softcapping"] = v
	}
	return nil
}

func gpt2Config(m ggufMeta, c map[string]any) error {
	var err error
	get := func(key string) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = m.uint(key)
		return v
	}
	c["n_layer"], c["n_embd"], c["n_inner"] = get("block_count"), get("embedding_length"), get("feed_forward_length")
	c["n_head"], c["n_positions"] = get("attention.head_count"), get("context_length")
	if err != nil {
		return err
	}
	if c["layer_norm_epsilon"], err = m.floatOr("attention.layer_norm_epsilon", 1e-5); err != nil {
		return err
	}
	if c["vocab_size"], err = m.rows("token_embd.weight"); err != nil {
		return err
	}
	_, untied := m.f.Tensor("output.weight")
	// GGUF has no key for the activation: llama.cpp's gpt2 uses GELU's tanh form.
	c["tie_word_embeddings"], c["activation_function"] = !untied, "gelu_new"
	return nil
}

// ggufConfig writes the config.json of a GGUF file's architecture.
func ggufConfig(f *gguf.File) (ggufArch, []byte, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return ggufArch{}, nil, err
	}
	a, ok := ggufArchs[arch]
	if !ok {
		return a, nil, fmt.Errorf("%s: general.architecture %q is not supported (supported: gemma3, gpt2, llama, qwen3, qwen3moe)", f.Path, arch)
	}
	c := map[string]any{"model_type": a.modelType}
	if err := a.config(ggufMeta{f, arch}, c); err != nil {
		return a, nil, err
	}
	for field, key := range map[string]string{"eos_token_id": "tokenizer.ggml.eos_token_id", "bos_token_id": "tokenizer.ggml.bos_token_id"} {
		if f.Has(key) {
			v, err := f.Uint(key)
			if err != nil {
				return a, nil, err
			}
			c[field] = v
		}
	}
	if _, ok := c["eos_token_id"]; !ok {
		return a, nil, fmt.Errorf("%s: no tokenizer.ggml.eos_token_id", f.Path)
	}
	b, err := json.Marshal(c)
	return a, b, err
}

// decoderTensor maps the Llama-style names (model.embed_tokens,
// model.layers.<i>.self_attn.q_proj, ...) to llama.cpp's (token_embd,
// blk.<i>.attn_q, ...); norms renames a family's layer norms. A MoE's
// stacked experts (mlp.experts.gate_proj, ...) are llama.cpp's
// ffn_{gate,up,down}_exps, [experts, out, in] in PyTorch order.
func decoderTensor(norms map[string]string) func(string) (string, bool) {
	layer := map[string]string{
		"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
		"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
		"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
		"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down", "mlp.gate": "ffn_gate_inp",
	}
	for k, v := range norms {
		layer[k] = v
	}
	return func(hf string) (string, bool) {
		switch hf {
		case "model.embed_tokens.weight":
			return "token_embd.weight", true
		case "model.norm.weight":
			return "output_norm.weight", true
		case "lm_head.weight":
			return "output.weight", true
		}
		i, rest, ok := indexed(hf, "model.layers.")
		if !ok {
			return "", false
		}
		if proj, ok := strings.CutPrefix(rest, "mlp.experts."); ok {
			if g, ok := map[string]string{"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}[proj]; ok {
				return fmt.Sprintf("blk.%d.%s.weight", i, g), true
			}
			return "", false
		}
		base, suffix, ok := cutLast(rest)
		if !ok {
			return "", false
		}
		g, ok := layer[base]
		if !ok {
			return "", false
		}
		return fmt.Sprintf("blk.%d.%s.%s", i, g, suffix), true
	}
}

// gpt2Tensor maps GPT-2's names (wte, h.<i>.attn.c_attn, ...) to
// llama.cpp's. llama.cpp stores the Conv1D weights in Linear layout,
// which is what the model declares: nothing is transposed.
func gpt2Tensor(hf string) (string, bool) {
	top := map[string]string{
		"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight",
		"ln_f.weight": "output_norm.weight", "ln_f.bias": "output_norm.bias", "lm_head.weight": "output.weight",
	}
	if g, ok := top[hf]; ok {
		return g, true
	}
	i, rest, ok := indexed(hf, "h.")
	if !ok {
		return "", false
	}
	base, suffix, ok := cutLast(rest)
	if !ok {
		return "", false
	}
	g, ok := map[string]string{"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}[base]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("blk.%d.%s.%s", i, g, suffix), true
}

// indexed splits "<prefix><i>.<rest>".
func indexed(s, prefix string) (int, string, bool) {
	s, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(s, ".")
	if !ok {
		return 0, "", false
	}
	i, err := strconv.Atoi(num)
	return i, rest, err == nil && i >= 0
}

// cutLast splits "a.b.weight" into "a.b" and "weight".
func cutLast(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// GGUFConfigJSON is the config.json a GGUF file's metadata gives.
func GGUFConfigJSON(path string) ([]byte, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_, b, err := ggufConfig(f)
	return b, err
}

// GGUFPath returns the GGUF file a model path names: the path itself when
// it ends in .gguf, or a folder's model.gguf when the folder has no
// config.json.
func GGUFPath(path string) (string, bool) {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return path, true
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return "", false
	}
	p := filepath.Join(path, "model.gguf")
	if _, err := os.Stat(p); err == nil {
		return p, true
	}
	return "", false
}

// LoadGGUF loads a model from a GGUF file: the config from its metadata,
// every declared tensor from its llama.cpp name.
func LoadGGUF(path string, progress func(done, total int64)) (Model, error) {
	return LoadGGUFContext(context.Background(), path, progress)
}

// LoadGGUFContext is LoadGGUF that stops when ctx is done: before each
// tensor, with an error that wraps ctx.Err() and names the file, which is
// closed.
func LoadGGUFContext(ctx context.Context, path string, progress func(done, total int64)) (Model, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := loadGGUF(ctx, f, progress)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

func loadGGUF(ctx context.Context, f *gguf.File, progress func(done, total int64)) (Model, error) {
	arch, cfgJSON, err := ggufConfig(f)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseConfig(cfgJSON)
	if err != nil {
		return nil, fmt.Errorf("%s: the config its metadata gives: %w", f.Path, err)
	}
	m, ps, err := declare(cfg)
	if err != nil {
		return nil, err
	}
	archName, _ := f.String("general.architecture")
	var dims struct {
		HeadDim int `json:"head_dim"`
	}
	if err := json.Unmarshal(cfgJSON, &dims); err != nil {
		return nil, err
	}
	err = loadAll(ctx, f.Path, ps, f, progress, func(p *graphs.Param) error {
		name, ok := arch.tensor(p.Name)
		if !ok {
			return fmt.Errorf("%s: no GGUF name for tensor %q of a %s model", f.Path, p.Name, archName)
		}
		return loadGGUFParam(f, archName, dims.HeadDim, p, name)
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// loadGGUFParam sets p from GGUF tensor name, undoing llama.cpp's layout
// where it differs. A stacked expert weight is bound whole, in place in
// the mapping, as any matrix: expert e's rows are slice e.
func loadGGUFParam(f *gguf.File, arch string, hd int, p *graphs.Param, name string) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("%s: missing tensor %q (for %s)", f.Path, name, p.Name)
	}
	shape, data := t.Shape(), f.Data(t)
	if !slices.Equal(shape, p.Shape) {
		return fmt.Errorf("%s: tensor %q has shape %v, the metadata implies %v (for %s)", f.Path, name, shape, p.Shape, p.Name)
	}
	permuted := arch == "llama" && (strings.HasSuffix(name, ".attn_q.weight") || strings.HasSuffix(name, ".attn_k.weight"))
	if permuted && (hd <= 0 || p.Shape[0]%hd != 0 || len(p.Shape) != 2) {
		return fmt.Errorf("%s: tensor %q has shape %v, not whole heads of %d rows", f.Path, name, p.Shape, hd)
	}
	dt, ok := ggufDType(t.Type)
	if p.Role != graphs.Matrix || !ok {
		// Vectors are widened once, as from safetensors.
		v := make([]float32, p.Numel())
		if err := gguf.Dequantize(t.Type, data, v); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
		}
		if arch == "gemma3" && p.Role == graphs.OffsetNorm {
			// llama.cpp stores Gemma's norms as 1 + w.
			for i := range v {
				v[i] -= 1
			}
		}
		if permuted {
			v = graphs.UnpermuteHeadRows(v, p.Shape[0], p.Shape[1], hd)
		}
		return p.Set(graphs.F32, tensor.New(tensor.WithShape(p.Shape...), tensor.WithBacking(v)))
	}
	// Matrices stay in their stored type, in place in the mapping. A
	// permuted one stays permuted too (graphs.Param.PermutedHeads: the
	// Linear reorders its output, a few values per token, instead of the
	// load copying the weight), unless it has a bias, which the Linear
	// adds in the declared order: that one is copied, whole rows (whole
	// blocks) at a time.
	keepPermuted := false
	if permuted {
		if _, biased := f.Tensor(strings.TrimSuffix(name, ".weight") + ".bias"); biased {
			data = graphs.UnpermuteHeadRows(data, p.Shape[0], len(data)/p.Shape[0], hd)
		} else {
			keepPermuted = true
		}
	}
	stored, err := dt.StoredShape(p.Shape)
	if err != nil {
		return fmt.Errorf("%s: tensor %q: %w", f.Path, name, err)
	}
	var backing any
	switch dt.Storage() {
	case tensor.Float32:
		v, ok := loaders.Float32View(data)
		if !ok {
			v = make([]float32, p.Numel())
			if err := gguf.Dequantize(t.Type, data, v); err != nil {
				return err
			}
		}
		backing = v
	case tensor.Uint16:
		v, ok := loaders.Uint16View(data)
		if !ok {
			v = make([]uint16, len(data)/2)
			for i := range v {
				v[i] = uint16(data[2*i]) | uint16(data[2*i+1])<<8
			}
		}
		backing = v
	default:
		backing = data
	}
	if err := p.Set(dt, tensor.New(tensor.WithShape(stored...), tensor.WithBacking(backing))); err != nil {
		return err
	}
	if keepPermuted {
		p.PermutedHeads = hd
	}
	return nil
}

// ggufDType is the zoo's storage type for a GGUF tensor type.
func ggufDType(t gguf.Type) (graphs.DType, bool) {
	switch t {
	case gguf.TypeF32:
		return graphs.F32, true
	case gguf.TypeF16:
		return graphs.F16, true
	case gguf.TypeBF16:
		return graphs.BF16, true
	}
	if f, ok := t.Format(); ok {
		return graphs.QuantDType(f), true
	}
	return 0, false
}
