package zoo

import (
	"fmt"

	"github.com/gozoo/gozoo/graphs"
)

// Dims are the sizes every decoder in the zoo has, as resolved from
// config.json (defaults applied).
type Dims struct {
	VocabSize, HiddenSize, IntermediateSize  int
	NumLayers, NumHeads, NumKVHeads, HeadDim int
	MaxPositions                             int
}

// Validate checks the sizes, naming the config.json field at fault.
func (d Dims) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", d.VocabSize}, {"hidden_size", d.HiddenSize}, {"intermediate_size", d.IntermediateSize},
		{"num_hidden_layers", d.NumLayers}, {"num_attention_heads", d.NumHeads},
		{"num_key_value_heads", d.NumKVHeads}, {"head_dim", d.HeadDim},
		{"max_position_embeddings", d.MaxPositions},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive, got %d", f.name, f.v)
		}
	}
	if d.NumHeads%d.NumKVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", d.NumHeads, d.NumKVHeads)
	}
	if d.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d must be even for RoPE", d.HeadDim)
	}
	return nil
}

// CheckWeights reports the first tensor of specs that w lacks: a model
// built from hand-made weights fails here, by name, not deep in a graph.
func CheckWeights(specs []TensorSpec, w graphs.Weights) error {
	for _, s := range specs {
		if _, ok := w[s.Name]; !ok {
			return fmt.Errorf("missing tensor %q", s.Name)
		}
	}
	return nil
}

// Base gives a model the zoo.Model methods that only report what it is:
// embed it and set its fields in Build.
type Base struct {
	Type string
	Dims Dims
	EOS  []int
	W    graphs.Weights
}

func (b *Base) ModelType() string       { return b.Type }
func (b *Base) EOSTokenIDs() []int      { return b.EOS }
func (b *Base) Weights() graphs.Weights { return b.W }
func (b *Base) VocabSize() int          { return b.Dims.VocabSize }
func (b *Base) MaxPositions() int       { return b.Dims.MaxPositions }
func (b *Base) CacheSpec() graphs.CacheSpec {
	return graphs.CacheSpec{Layers: b.Dims.NumLayers, KVHeads: b.Dims.NumKVHeads, HeadDim: b.Dims.HeadDim}
}
