package loaders

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Limits on the sizes a config.json may give, checked by CheckConfigSizes
// before a model family decodes the config. A family's parser and the
// declaration of a model's tensors allocate per layer, per expert and per
// head dimension before any weight is read, so these counts are bounded
// whatever the file says; each limit is several times the largest
// released model's. The sizes of the weights themselves are then checked
// against the checkpoint's tensors (zoo.LoadWeights) or against the
// memory available (procstat.AvailableMemory).
const (
	// MaxLayers bounds num_hidden_layers (n_layer, num_layers) and the
	// length of per-layer lists (layer_types, mlp_only_layers,
	// no_rope_layers).
	MaxLayers = 1024
	// MaxExperts bounds num_experts (num_local_experts,
	// n_routed_experts).
	MaxExperts = 4096
	// MaxExpertLayers bounds num_hidden_layers times num_experts: the
	// number of expert MLPs a model declares.
	MaxExpertLayers = 1 << 16
	// MaxHeadDim bounds head_dim, or hidden_size / num_attention_heads
	// where head_dim is absent: each layer's rotary tables are sized by
	// it.
	MaxHeadDim = 1 << 14
	// MaxWidth bounds the other sizes: hidden_size (n_embd, d_model),
	// intermediate_size (n_inner, moe_intermediate_size), head counts,
	// num_experts_per_tok, and a vision tower's image_size, patch_size,
	// num_channels and scale_factor.
	MaxWidth = 1 << 18
	// MaxVocab bounds vocab_size.
	MaxVocab = 1 << 24
	// MaxPositions bounds max_position_embeddings (n_positions, n_ctx).
	// Nothing is allocated by it until a session's KV cache, which
	// graphs.NewSession checks against the memory available.
	MaxPositions = 1 << 30
	// MaxParameters bounds the number of parameters (weights) a model's
	// declaration may total.
	MaxParameters = 1 << 42
)

// Limits on the size of a checkpoint folder's small files, read whole
// into memory (a larger file, or something that is not a regular file
// and never ends, is refused).
const (
	// MaxConfigFileBytes bounds config.json, generation_config.json,
	// tokenizer_config.json, chat templates, processor configs and
	// model.safetensors.index.json.
	MaxConfigFileBytes = 64 << 20
	// MaxTokenizerFileBytes bounds tokenizer.json.
	MaxTokenizerFileBytes = 1 << 30
)

type sizeKind uint8

const (
	layersKind sizeKind = iota + 1
	expertsKind
	headDimKind
	widthKind
	vocabKind
	positionsKind
	layerListKind
)

// sizeKeys are the config.json keys CheckConfigSizes bounds, wherever
// they appear (top level, text_config, vision_config, ...).
var sizeKeys = map[string]sizeKind{
	"num_hidden_layers": layersKind, "n_layer": layersKind, "num_layers": layersKind,
	"num_experts": expertsKind, "num_local_experts": expertsKind, "n_routed_experts": expertsKind,
	"head_dim":    headDimKind,
	"hidden_size": widthKind, "n_embd": widthKind, "d_model": widthKind,
	"intermediate_size": widthKind, "n_inner": widthKind, "moe_intermediate_size": widthKind,
	"num_attention_heads": widthKind, "n_head": widthKind, "num_key_value_heads": widthKind,
	"num_experts_per_tok": widthKind,
	"image_size":          widthKind, "patch_size": widthKind, "num_channels": widthKind, "scale_factor": widthKind,
	"vocab_size":              vocabKind,
	"max_position_embeddings": positionsKind, "n_positions": positionsKind, "n_ctx": positionsKind,
	"layer_types": layerListKind, "mlp_only_layers": layerListKind, "no_rope_layers": layerListKind,
}

// limit is the kind's bound and what it counts.
func (k sizeKind) limit() (float64, string) {
	switch k {
	case layersKind:
		return MaxLayers, "layers"
	case expertsKind:
		return MaxExperts, "experts"
	case headDimKind:
		return MaxHeadDim, "dimensions per attention head"
	case widthKind:
		return MaxWidth, "for a model's widths"
	case vocabKind:
		return MaxVocab, "tokens"
	case positionsKind:
		return MaxPositions, "positions"
	}
	return MaxLayers, "entries (one per layer)"
}

// String names the kind's limit, for messages.
func (k sizeKind) String() string {
	return [...]string{"", "MaxLayers", "MaxExperts", "MaxHeadDim", "MaxWidth", "MaxVocab", "MaxPositions", "MaxLayers"}[k]
}

// CheckConfigSizes bounds the sizes a config.json gives (see MaxLayers and
// the limits beside it) before anything is sized by them. It looks at the
// top-level object and at nested configs (keys ending in "_config", such
// as text_config and vision_config), matching keys without regard to case
// as encoding/json does. Values that are not numbers are left to the
// family's parser. The error names the field, as "text_config.vocab_size".
func CheckConfigSizes(data []byte) error { return checkSizes(data, "", 0) }

func checkSizes(data []byte, path string, depth int) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		if depth == 0 {
			return err
		}
		return nil // a nested config that is not an object: the family's to refuse
	}
	var layers, experts, hidden, heads float64
	headDim := false
	for key, raw := range obj {
		folded := strings.ToLower(strings.ToUpper(key))
		field := path + key
		if strings.HasSuffix(folded, "_config") && depth < 3 {
			if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
				if err := checkSizes(t, field+".", depth+1); err != nil {
					return err
				}
			}
			continue
		}
		kind, ok := sizeKeys[folded]
		if !ok {
			continue
		}
		max, what := kind.limit()
		if kind == layerListKind {
			if n := listLen(raw); n > MaxLayers {
				return fmt.Errorf("%s has %d entries, over the limit of %d layers (loaders.MaxLayers)", field, n, MaxLayers)
			}
			continue
		}
		v, ok := number(raw)
		if !ok {
			continue
		}
		if v > max {
			return fmt.Errorf("%s %s is over the limit of %d %s (loaders.%s)", field, bytes.TrimSpace(raw), int64(max), what, kind)
		}
		switch folded {
		case "num_hidden_layers", "n_layer", "num_layers":
			layers = max1(layers, v)
		case "num_experts", "num_local_experts", "n_routed_experts":
			experts = max1(experts, v)
		case "hidden_size", "n_embd", "d_model":
			hidden = max1(hidden, v)
		case "num_attention_heads", "n_head":
			if heads == 0 || v < heads {
				heads = v
			}
		case "head_dim":
			headDim = true // a number: null means absent
		}
	}
	if !headDim && hidden > 0 && heads >= 1 && hidden/heads > MaxHeadDim {
		return fmt.Errorf("%shidden_size %d over num_attention_heads %d gives heads of %d dimensions, over the limit of %d (loaders.MaxHeadDim)", path, int64(hidden), int64(heads), int64(hidden/heads), MaxHeadDim)
	}
	if layers*experts > MaxExpertLayers {
		return fmt.Errorf("%snum_hidden_layers %d times num_experts %d is %d expert MLPs, over the limit of %d (loaders.MaxExpertLayers)", path, int64(layers), int64(experts), int64(layers*experts), MaxExpertLayers)
	}
	return nil
}

func max1(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// number parses a JSON number; false for anything else.
func number(raw json.RawMessage) (float64, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(t), 64)
	if err != nil && v == 0 {
		return 0, false
	}
	return v, true // ±Inf for a number out of float64's range
}

// listLen counts the elements of a JSON array without decoding them: the
// commas at its top level, outside strings. It is 0 for anything else.
func listLen(raw json.RawMessage) int {
	t := bytes.TrimSpace(raw)
	if len(t) < 2 || t[0] != '[' {
		return 0
	}
	n, depth, inString, empty := 0, 0, false, true
	for i := 1; i < len(t)-1; i++ {
		c := t[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 0:
			n++
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			empty = false
		}
	}
	if empty {
		return 0
	}
	return n + 1
}
