package zoo

import (
	"fmt"

	"github.com/gozoo/gozoo/graphs"
)

// Base gives a model the zoo.Model methods that only report what it is:
// embed it and set its fields in the family's New.
type Base struct {
	Type    string
	Dims    Dims
	EOS     []int
	Weights *graphs.Params
}

func (b *Base) ModelType() string      { return b.Type }
func (b *Base) EOSTokenIDs() []int     { return b.EOS }
func (b *Base) Params() *graphs.Params { return b.Weights }
func (b *Base) VocabSize() int         { return b.Dims.VocabSize }
func (b *Base) HiddenSize() int        { return b.Dims.HiddenSize }
func (b *Base) MaxPositions() int      { return b.Dims.MaxPositions }
func (b *Base) NumLayers() int         { return b.Dims.NumLayers }

// Windows turns config.json's layer_types into per-layer sliding windows
// (0 for full attention), for the families whose configs carry them.
func Windows(types []string, window *int, layers int) ([]int, error) {
	if layers <= 0 {
		return nil, fmt.Errorf("num_hidden_layers must be positive, got %d", layers)
	}
	if len(types) != layers {
		return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(types), layers)
	}
	out := make([]int, layers)
	for i, t := range types {
		switch t {
		case "full_attention":
		case "sliding_attention":
			if window == nil || *window <= 0 {
				return nil, fmt.Errorf("layer %d is sliding_attention but sliding_window is not set", i)
			}
			out[i] = *window
		default:
			return nil, fmt.Errorf("layer_types[%d] = %q is not supported (supported: full_attention, sliding_attention)", i, t)
		}
	}
	return out, nil
}
