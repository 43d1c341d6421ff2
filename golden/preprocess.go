package golden

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// preprocessMeta is what golden.json states about the processor case.
type preprocessMeta struct {
	Rows           int    `json:"rows"`
	Cols           int    `json:"cols"`
	NumTiles       int    `json:"num_tiles"`
	Prompt         string `json:"prompt"`
	ExpandedPrompt string `json:"expanded_prompt"`
	Image          struct {
		File string `json:"file"`
	} `json:"image"`
	ToyTokenizer struct {
		SpecialTokens map[string]int `json:"special_tokens"`
		TextPieces    map[string]int `json:"text_pieces"`
	} `json:"toy_tokenizer"`
}

// runPreprocess checks Idefics3ImageProcessor on the case's image: the
// three uint8 resizes exactly, pixel_values within the tolerance, the
// mask, the grid, the expanded prompt and its toy token ids.
func runPreprocess(dir string, g *loaders.SafetensorsFile, m vlmMeta, r *Result) error {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return err
	}
	var meta preprocessMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("golden.json: %w", err)
	}
	r.Tolerance = m.Tol.PixelAtol
	if r.Tolerance <= 0 {
		r.Tolerance = 1e-6
	}
	cfg, err := idefics3.LoadProcessorConfig(dir)
	if err != nil {
		return err
	}
	img, err := images.Open(filepath.Join(dir, meta.Image.File), 0)
	if err != nil {
		return err
	}
	batch, err := idefics3.Preprocess(cfg, []*images.RGB{img})
	if err != nil {
		return err
	}
	res := batch.Images[0]
	if res.Rows != meta.Rows || res.Cols != meta.Cols || batch.NumTiles != meta.NumTiles {
		return fmt.Errorf("grid %dx%d with %d tiles, golden %dx%d with %d", res.Rows, res.Cols, batch.NumTiles, meta.Rows, meta.Cols, meta.NumTiles)
	}
	for _, step := range []struct {
		name string
		got  *images.RGB
	}{{"resized", res.Resized}, {"resized_for_encoder", res.ResizedForEncoder}, {"global_image", res.Global}} {
		_, shape, err := g.Info(step.name)
		if err != nil {
			return err
		}
		if step.got == nil || len(shape) != 3 || step.got.H != shape[0] || step.got.W != shape[1] {
			return fmt.Errorf("%s: golden shape %v, ours %v", step.name, shape, step.got)
		}
		got := make([]float32, len(step.got.Pix))
		for i, v := range step.got.Pix {
			got[i] = float32(v)
		}
		var worst float64
		if err := within(g, step.name, got, 0, &worst); err != nil {
			return fmt.Errorf("%s (uint8 values must be exact): %w", step.name, err)
		}
	}
	if err := within(g, "pixel_values", batch.PixelValues, r.Tolerance, &r.HiddenMaxAbs); err != nil {
		return err
	}
	mask, _, err := g.ReadInt64("pixel_attention_mask")
	if err != nil {
		return err
	}
	if !slices.Equal(mask, batch.PixelAttentionMask) {
		return fmt.Errorf("pixel_attention_mask differs")
	}
	expanded, err := idefics3.ExpandPrompt(meta.Prompt, batch.Grids(), cfg.ImageSeqLen)
	if err != nil {
		return err
	}
	if expanded != meta.ExpandedPrompt {
		return fmt.Errorf("expanded prompt:\n got %q\nwant %q", expanded, meta.ExpandedPrompt)
	}
	ids, err := toyTokenize(meta, expanded)
	if err != nil {
		return err
	}
	want, err := readIDs(g, "input_ids")
	if err != nil {
		return err
	}
	if !slices.Equal(ids, want) {
		return fmt.Errorf("input_ids of the expanded prompt differ:\n got %v\nwant %v", ids, want)
	}
	r.Pass = true
	r.Detail = fmt.Sprintf("3 uint8 images exact, pixel_values_max_abs=%.3g, %dx%d grid, expanded prompt and %d ids exact", r.HiddenMaxAbs, res.Rows, res.Cols, len(ids))
	return nil
}

// toyTokenize is golden.json's toy tokenizer: special tokens matched
// greedily (longest first) left to right, every run of other text one
// token from text_pieces.
func toyTokenize(meta preprocessMeta, s string) ([]int, error) {
	specials := make([]string, 0, len(meta.ToyTokenizer.SpecialTokens))
	for k := range meta.ToyTokenizer.SpecialTokens {
		specials = append(specials, k)
	}
	sort.Slice(specials, func(i, j int) bool { return len(specials[i]) > len(specials[j]) })
	var ids []int
	var text strings.Builder
	flush := func() error {
		if text.Len() == 0 {
			return nil
		}
		id, ok := meta.ToyTokenizer.TextPieces[text.String()]
		if !ok {
			return fmt.Errorf("the toy tokenizer has no piece %q", text.String())
		}
		ids = append(ids, id)
		text.Reset()
		return nil
	}
outer:
	for len(s) > 0 {
		for _, sp := range specials {
			if strings.HasPrefix(s, sp) {
				if err := flush(); err != nil {
					return nil, err
				}
				ids = append(ids, meta.ToyTokenizer.SpecialTokens[sp])
				s = s[len(sp):]
				continue outer
			}
		}
		text.WriteByte(s[0])
		s = s[1:]
	}
	return ids, flush()
}
