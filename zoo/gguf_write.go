package zoo

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// GGUF file types `gozoo quantize` writes, with llama.cpp's llama_ftype
// numbers (general.file_type).
var ggufFileTypes = map[string]uint32{"f32": 0, "q4_0": 2, "q8_0": 7, "q4_k_m": 15}

// WriteGGUF writes a loaded model as a GGUF file of file type ftype
// ("q8_0", "q4_0", "q4_k_m" or "f32") with llama.cpp's tensor names and
// metadata (its family's GGUF, see RegisterGGUF) and type choices: vectors, position tables and MoE routers in
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

	// One GGUF tensor per declared one: a MoE's experts are declared
	// stacked, [experts, out, in], as ffn_*_exps hold them.
	params := m.Params().All()
	stored := make([]GGUFTensor, len(params))
	seen := map[string]string{}
	for i, p := range params {
		t, ok := format.Tensor(cfg, p)
		if !ok {
			return fmt.Errorf("no GGUF name for tensor %q of a %s model", p.Name, format.arch)
		}
		if other, dup := seen[t.Name]; dup {
			return fmt.Errorf("tensors %q and %q both map to GGUF tensor %q", other, p.Name, t.Name)
		}
		if err := checkPermuted(p, t); err != nil {
			return err
		}
		seen[t.Name], stored[i] = p.Name, t
	}
	layers := m.NumLayers()
	_, untied := seen["output.weight"]
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
		typ := ggufTypeFor(ftype, gname, p, layers, !untied)
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
