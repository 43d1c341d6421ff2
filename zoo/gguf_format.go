package zoo

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
)

// GGUF is a model family's side of llama.cpp's GGUF format for one
// architecture (general.architecture). A family implements it in its
// package (gguf.go) and registers it from init() with RegisterGGUF, as it
// registers its model_type; the zoo's GGUF reader and writer know no
// architecture of their own.
type GGUF interface {
	// Config fills config.json's fields from the file's metadata: all but
	// model_type and the token ids, which the zoo writes.
	Config(meta GGUFMeta, c ConfigMap) error
	// Tensor is where and how the file holds a declared tensor of the
	// model config.json cfg describes; ok is false for a tensor the
	// architecture has no name for.
	Tensor(cfg ConfigMap, p *graphs.Param) (t GGUFTensor, ok bool)
	// Metadata is the inverse of Config, the architecture's keys that
	// `gozoo quantize` (WriteGGUF) writes for m and its config.json cfg,
	// named without the "<arch>." prefix, which the zoo adds.
	Metadata(cfg ConfigMap, m Model) ([]gguf.KV, error)
}

// GGUFTensor is where and how a GGUF file holds one declared tensor.
type GGUFTensor struct {
	// Name is the tensor's llama.cpp name (blk.0.attn_q.weight).
	Name string
	// PermutedHeads, when not 0, is the head size of a 2-D weight whose
	// rows convert_hf_to_gguf.py permuted within each head (llama's Q and
	// K: each head's two rotary halves interleaved). The load undoes it
	// (a matrix without a bias stays permuted in place, see
	// graphs.Param.PermutedHeads); the writer applies it.
	PermutedHeads int
	// Offset is what llama.cpp adds to the stored values (Gemma's norms
	// are stored as 1 + w): the load subtracts it, the writer adds it.
	Offset float32
}

type ggufFormat struct {
	arch, modelType string
	GGUF
}

// ggufFormats are the registered formats by general.architecture.
var ggufFormats = map[string]ggufFormat{}

// RegisterGGUF makes GGUF files of llama.cpp architecture arch (their
// general.architecture) load as model_type modelType, and models of that
// type writable as arch. Families call it from init().
func RegisterGGUF(arch, modelType string, f GGUF) {
	if _, dup := ggufFormats[arch]; dup {
		panic("zoo: GGUF architecture registered twice: " + arch)
	}
	if _, dup := ggufFormatOf(modelType); dup {
		panic("zoo: model_type given a GGUF architecture twice: " + modelType)
	}
	ggufFormats[arch] = ggufFormat{arch, modelType, f}
}

// ggufFormatOf is the registered format a model_type is written as.
func ggufFormatOf(modelType string) (ggufFormat, bool) {
	for _, f := range ggufFormats {
		if f.modelType == modelType {
			return f, true
		}
	}
	return ggufFormat{}, false
}

// SupportedGGUF lists the registered GGUF architectures, sorted.
func SupportedGGUF() []string {
	return slices.Sorted(maps.Keys(ggufFormats))
}

// ConfigMap is a config.json as a map: what a family's GGUF side writes
// from a file's metadata, and reads when a model is written (decoded
// from JSON, where numbers are float64).
type ConfigMap map[string]any

// Int is field key as an int, or def when it is absent or not a number.
func (c ConfigMap) Int(key string, def int) int {
	switch v := c[key].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return def
}

// Float is field key as a float64, or def when it is absent or not a
// number.
func (c ConfigMap) Float(key string, def float64) float64 {
	switch v := c[key].(type) {
	case float64:
		return v
	case int:
		return float64(v)
	}
	return def
}

// GGUFMeta reads one architecture's keys ("<arch>.<key>", named here
// without the prefix) of a GGUF file, with errors naming the key and the
// file.
type GGUFMeta struct {
	File *gguf.File
	Arch string
}

// Key is key's full name, "<arch>.<key>".
func (m GGUFMeta) Key(key string) string { return m.Arch + "." + key }

// Has tells whether the file has key.
func (m GGUFMeta) Has(key string) bool { return m.File.Has(m.Key(key)) }

// Uint reads a required count or size.
func (m GGUFMeta) Uint(key string) (int, error) {
	v, err := m.File.Uint(m.Key(key))
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt32 {
		return 0, fmt.Errorf("%s: %s = %d is beyond any model's size", m.File.Path, m.Key(key), v)
	}
	return int(v), nil
}

// Uints reads several required counts or sizes, in order, stopping at
// the first that fails.
func (m GGUFMeta) Uints(keys ...string) ([]int, error) {
	out := make([]int, len(keys))
	for i, key := range keys {
		v, err := m.Uint(key)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// UintOr reads an optional count or size, def when absent.
func (m GGUFMeta) UintOr(key string, def int) (int, error) {
	if !m.Has(key) {
		return def, nil
	}
	return m.Uint(key)
}

// Float reads a required number.
func (m GGUFMeta) Float(key string) (float64, error) { return m.File.Float(m.Key(key)) }

// FloatOr reads an optional number, def when absent.
func (m GGUFMeta) FloatOr(key string, def float64) (float64, error) {
	if !m.Has(key) {
		return def, nil
	}
	return m.Float(key)
}

// HasTensor tells whether the file holds tensor name.
func (m GGUFMeta) HasTensor(name string) bool {
	_, ok := m.File.Tensor(name)
	return ok
}

// Rows is a 2-D tensor's first dimension in PyTorch order (the vocabulary
// of token_embd).
func (m GGUFMeta) Rows(name string) (int, error) {
	t, ok := m.File.Tensor(name)
	if !ok {
		return 0, fmt.Errorf("%s: missing tensor %q", m.File.Path, name)
	}
	s := t.Shape()
	if len(s) != 2 {
		return 0, fmt.Errorf("%s: tensor %q has shape %v, want 2-D", m.File.Path, name, s)
	}
	return s[0], nil
}

// LayerIndex splits a layer's tensor name "<prefix><i>.<rest>"
// ("model.layers.3.mlp.up_proj.weight", "blk.3.ffn_up.weight").
func LayerIndex(name, prefix string) (i int, rest string, ok bool) {
	s, ok := strings.CutPrefix(name, prefix)
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

// GGUFLayerTensor maps a declared tensor of layer i,
// "<prefix><i>.<module>.<suffix>", to llama.cpp's
// "blk.<i>.<modules[module]>.<suffix>" (model.layers.3.self_attn.q_proj.weight
// to blk.3.attn_q.weight); ok is false for a name of another form or a
// module that modules does not list.
func GGUFLayerTensor(declared, prefix string, modules map[string]string) (string, bool) {
	i, rest, ok := LayerIndex(declared, prefix)
	if !ok {
		return "", false
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot < 0 {
		return "", false
	}
	g, ok := modules[rest[:dot]]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("blk.%d.%s.%s", i, g, rest[dot+1:]), true
}
