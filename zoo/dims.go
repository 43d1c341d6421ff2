package zoo

import "fmt"

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
