package zoo

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/x448/float16"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// ggufFileType is a file type `gozoo quantize` writes: llama.cpp's
// llama_ftype number (general.file_type) and its base tensor type.
type ggufFileType struct {
	id   uint32
	base gguf.Type
}

var ggufFileTypes = map[string]ggufFileType{
	"f32": {0, gguf.TypeF32}, "q4_0": {2, gguf.TypeQ4_0}, "q4_1": {3, gguf.TypeQ4_1}, "q8_0": {7, gguf.TypeQ8_0},
	"q5_1": {9, gguf.TypeQ5_1}, "q2_k": {10, gguf.TypeQ2_K}, "q3_k_m": {12, gguf.TypeQ3_K}, "q4_k_m": {15, gguf.TypeQ4_K},
	"q5_k_s": {16, gguf.TypeQ5_K}, "q5_k_m": {17, gguf.TypeQ5_K}, "iq4_nl": {25, gguf.TypeIQ4_NL}, "iq4_xs": {30, gguf.TypeIQ4_XS},
}

// GGUFFileTypes lists the file types WriteGGUF writes.
func GGUFFileTypes() []string {
	var out []string
	for k := range ggufFileTypes {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// WriteGGUF writes a loaded model as a GGUF file of file type ftype (one
// of GGUFFileTypes: "q4_k_m", "iq4_xs", "f32", ...) with llama.cpp's
// tensor names and metadata (its family's GGUF, see RegisterGGUF) and
// llama.cpp's per-tensor type choices without an importance matrix
// (ggufTypeFor). configJSON is the model's config.json; extra is written
// after the model's metadata (the tokenizer's).
func WriteGGUF(w io.Writer, m Model, configJSON []byte, ftype string, name string, extra []gguf.KV) error {
	ft, ok := ggufFileTypes[ftype]
	if !ok {
		return fmt.Errorf("quantization type %q is not supported (supported: %s)", ftype, strings.Join(GGUFFileTypes(), ", "))
	}
	fileType := ft.id
	format, ok := ggufFormatOf(m.ModelType())
	if !ok {
		var types []string
		for _, f := range ggufFormats {
			types = append(types, f.modelType)
		}
		slices.Sort(types)
		return fmt.Errorf("model_type %q has no llama.cpp architecture here (supported: %s)", m.ModelType(), strings.Join(types, ", "))
	}
	var cfg ConfigMap
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	meta := []gguf.KV{{Key: "general.architecture", Value: format.arch}, {Key: "general.name", Value: name}}
	archMeta, err := format.Metadata(cfg, m)
	if err != nil {
		return err
	}
	for i := range archMeta {
		archMeta[i].Key = format.arch + "." + archMeta[i].Key
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

	params := m.Params().All()
	stored, types, err := ggufPlan(m, format, cfg, ftype)
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for i, t := range stored {
		seen[t.Name] = params[i].Name
	}
	var tensors []gguf.WriteTensor
	for i, p := range params {
		gname := stored[i].Name
		vals := p.Float32s()
		if hd := stored[i].PermutedHeads; hd != 0 {
			vals = permuteRows(vals, p.Shape[0], p.Shape[1], hd)
		}
		if off := stored[i].Offset; off != 0 {
			w := make([]float32, len(vals))
			for i, x := range vals {
				w[i] = x + off
			}
			vals = w
		}
		// GGUF lists dimensions innermost first.
		dims := make([]uint64, 0, len(p.Shape))
		for i := len(p.Shape) - 1; i >= 0; i-- {
			dims = append(dims, uint64(p.Shape[i]))
		}
		typ := types[i]
		data, err := encodeTensor(typ, vals)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", gname, err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: gname, Dims: dims, Type: typ, Data: data})
	}
	if x, ok := format.GGUF.(GGUFExtraTensors); ok {
		more, err := x.ExtraTensors(cfg)
		if err != nil {
			return err
		}
		for _, t := range more {
			if other, dup := seen[t.Name]; dup {
				return fmt.Errorf("tensor %q of the format and declared %q share a GGUF name", t.Name, other)
			}
		}
		tensors = append(tensors, more...)
	}
	return gguf.Write(w, meta, tensors)
}

// GGUFExtraTensors is a GGUF whose files hold tensors that no declared
// weight holds, derived from config.json (llama's rope_freqs.weight for
// llama3 scaling); WriteGGUF appends them.
type GGUFExtraTensors interface {
	ExtraTensors(cfg ConfigMap) ([]gguf.WriteTensor, error)
}

// ggufPlan names each declared tensor as llama.cpp does and picks its
// type for file type ftype. One GGUF tensor per declared one: a MoE's
// experts are declared stacked, [experts, out, in], as ffn_*_exps hold
// them.
func ggufPlan(m Model, format ggufFormat, cfg ConfigMap, ftype string) ([]GGUFTensor, []gguf.Type, error) {
	params := m.Params().All()
	stored := make([]GGUFTensor, len(params))
	seen := map[string]string{}
	for i, p := range params {
		t, ok := format.Tensor(cfg, p)
		if !ok {
			return nil, nil, fmt.Errorf("no GGUF name for tensor %q of a %s model", p.Name, format.arch)
		}
		if other, dup := seen[t.Name]; dup {
			return nil, nil, fmt.Errorf("tensors %q and %q both map to GGUF tensor %q", other, p.Name, t.Name)
		}
		if err := checkPermuted(p, t); err != nil {
			return nil, nil, err
		}
		seen[t.Name], stored[i] = p.Name, t
	}
	_, untied := seen["output.weight"]
	facts := ggufModelFacts{layers: m.NumLayers(), tied: !untied, gqa: 1, experts: cfg.Int("num_experts", cfg.Int("num_local_experts", 0))}
	if heads := cfg.Int("num_attention_heads", cfg.Int("n_head", 0)); heads > 0 {
		if kv := cfg.Int("num_key_value_heads", heads); kv > 0 {
			facts.gqa = heads / kv
		}
	}
	types := make([]gguf.Type, len(params))
	for i, p := range params {
		types[i] = ggufTypeFor(ftype, stored[i].Name, p, facts)
	}
	return stored, types, nil
}

// GGUFTensorTypes is the type of each GGUF tensor (by llama.cpp name) that
// WriteGGUF would write for a file of type ftype.
func GGUFTensorTypes(m Model, configJSON []byte, ftype string) (map[string]gguf.Type, error) {
	if _, ok := ggufFileTypes[ftype]; !ok {
		return nil, fmt.Errorf("quantization type %q is not supported (supported: %s)", ftype, strings.Join(GGUFFileTypes(), ", "))
	}
	format, ok := ggufFormatOf(m.ModelType())
	if !ok {
		return nil, fmt.Errorf("model_type %q has no llama.cpp architecture here", m.ModelType())
	}
	var cfg ConfigMap
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	stored, types, err := ggufPlan(m, format, cfg, ftype)
	if err != nil {
		return nil, err
	}
	out := map[string]gguf.Type{}
	for i, t := range stored {
		out[t.Name] = types[i]
	}
	return out, nil
}

// ggufModelFacts is what llama.cpp's type choices read of a model.
type ggufModelFacts struct {
	layers  int
	tied    bool // no output.weight: token_embd serves as the output
	gqa     int  // query heads per KV head (n_gqa)
	experts int  // routed experts (n_expert)
}

// ggufTypeFor is llama.cpp's choice of type for one tensor
// (llama-quant.cpp's llama_tensor_get_type_impl without an importance
// matrix, for the file types of ggufFileTypes; the layer of attn_v and
// ffn_down tensors stands for llama.cpp's counters, which equal it when
// each layer has one), then its fallback for rows that are not whole
// blocks.
func ggufTypeFor(ftype, name string, p *graphs.Param, m ggufModelFacts) gguf.Type {
	cols := p.Shape[len(p.Shape)-1]
	if p.Role != graphs.Matrix || len(p.Shape) < 2 || name == "position_embd.weight" || strings.Contains(name, "ffn_gate_inp") || ftype == "f32" {
		return gguf.TypeF32
	}
	base := ggufFileTypes[ftype].base
	t := base
	i, inLayer := layerOf(name)
	n := m.layers
	attnV := strings.Contains(name, "attn_v.weight") || strings.Contains(name, "attn_qkv.weight") || strings.Contains(name, "attn_kv_b.weight")
	switch {
	case name == "output.weight" || (m.tied && name == "token_embd.weight"):
		if cols%base.BlockSize() != 0 {
			t = gguf.TypeQ8_0
		} else if base != gguf.TypeQ8_0 {
			t = gguf.TypeQ6_K
		}
	case name == "token_embd.weight":
	case attnV:
		switch ftype {
		case "q2_k":
			t = gguf.TypeQ3_K
			if m.gqa >= 4 {
				t = gguf.TypeQ4_K
			}
		case "q3_k_m":
			t = gguf.TypeQ4_K
			if inLayer && i < 2 {
				t = gguf.TypeQ5_K
			}
		case "iq4_nl", "iq4_xs":
			if m.gqa >= 4 {
				t = gguf.TypeQ5_K
			}
		case "q4_k_m", "q5_k_m":
			if inLayer && useMoreBits(i, n) {
				t = gguf.TypeQ6_K
			}
		}
		if m.experts == 8 {
			t = gguf.TypeQ8_0 // llama.cpp: "for the 8-expert model, bumping this to Q8_0"
		}
	case strings.Contains(name, "attn_k.weight"):
		if m.experts == 8 {
			t = gguf.TypeQ8_0
		}
	case strings.Contains(name, "ffn_down") && inLayer:
		switch {
		case ftype == "q2_k":
			t = gguf.TypeQ3_K
		case ftype == "q3_k_m":
			t = gguf.TypeQ4_K
			if i < n/16 {
				t = gguf.TypeQ5_K
			}
		case ftype == "q4_k_m" || ftype == "q5_k_m":
			if useMoreBits(i, n) {
				t = gguf.TypeQ6_K
			}
		case (ftype == "iq4_nl" || ftype == "iq4_xs") && i < n/8:
			t = gguf.TypeQ5_K
		}
	case strings.Contains(name, "attn_output.weight"):
		switch {
		case m.experts == 8:
			if ftype == "q2_k" || ftype == "q3_k_m" || ftype == "iq4_nl" || ftype == "q4_k_m" || ftype == "iq4_xs" {
				t = gguf.TypeQ5_K
			}
		case ftype == "q2_k":
			t = gguf.TypeQ3_K
		case ftype == "q3_k_m":
			t = gguf.TypeQ4_K
		}
	}
	if cols%t.BlockSize() != 0 {
		// llama.cpp's fallbacks for rows that are not whole blocks.
		t = map[gguf.Type]gguf.Type{gguf.TypeQ2_K: gguf.TypeQ4_0, gguf.TypeQ3_K: gguf.TypeQ4_0, gguf.TypeQ4_K: gguf.TypeQ5_0,
			gguf.TypeQ5_K: gguf.TypeQ5_1, gguf.TypeQ6_K: gguf.TypeQ8_0, gguf.TypeIQ4_XS: gguf.TypeIQ4_NL}[t]
		switch {
		case t == gguf.TypeF32:
			return gguf.TypeF32 // llama.cpp has no fallback and refuses: keep the values
		case cols%t.BlockSize() != 0:
			return gguf.TypeF16
		}
	}
	return t
}

// useMoreBits is llama.cpp's choice of the layers whose attn_v and
// ffn_down get more bits in Q4_K_M.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

func layerOf(name string) (int, bool) {
	i, _, ok := LayerIndex(name, "blk.")
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
	if t == gguf.TypeF16 {
		out := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], float16.Fromfloat32(x).Bits())
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
