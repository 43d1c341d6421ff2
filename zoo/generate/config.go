package generate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gozoo/gozoo/loaders"
)

// GenerationConfig is generation_config.json: the sampling defaults and
// end-of-sequence ids a checkpoint ships.
type GenerationConfig struct {
	DoSample          *bool           `json:"do_sample"`
	Temperature       *float64        `json:"temperature"`
	TopK              *int            `json:"top_k"`
	TopP              *float64        `json:"top_p"`
	MinP              *float64        `json:"min_p"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	MaxNewTokens      *int            `json:"max_new_tokens"`
	EOSTokenID        loaders.IntList `json:"eos_token_id"`
}

// ReadGenerationConfig reads dir/generation_config.json; a missing file
// gives nil and no error.
func ReadGenerationConfig(dir string) (*GenerationConfig, error) {
	path := filepath.Join(dir, loaders.GenerationConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseGenerationConfig(b, path)
}

// ParseGenerationConfig decodes the contents of a generation_config.json
// (a loaders.Folder's GenerationConfig); path names it in errors. nil data
// (an absent file) gives nil and no error.
func ParseGenerationConfig(data []byte, path string) (*GenerationConfig, error) {
	if data == nil {
		return nil, nil
	}
	var c GenerationConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// Apply sets a generator's defaults and EOS ids from the file, on top of
// transformers' own defaults (greedy unless do_sample; temperature 1,
// top_k 50, top_p 1).
func (c *GenerationConfig) Apply(g *Generator) {
	s := Sampling{Temperature: 1, TopK: 50, TopP: 1, RepetitionPenalty: 1}
	if c == nil {
		g.Defaults.Sampling = s
		return
	}
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	if c.DoSample != nil {
		s.DoSample = *c.DoSample
	}
	set(&s.Temperature, c.Temperature)
	set(&s.TopP, c.TopP)
	set(&s.MinP, c.MinP)
	set(&s.RepetitionPenalty, c.RepetitionPenalty)
	if c.TopK != nil {
		s.TopK = *c.TopK
	}
	g.Defaults.Sampling = s
	if c.MaxNewTokens != nil {
		g.Defaults.MaxTokens = *c.MaxNewTokens
	}
	for _, id := range c.EOSTokenID {
		if !slices.Contains(g.EOS, id) {
			g.EOS = append(g.EOS, id)
		}
	}
}
