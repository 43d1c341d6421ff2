package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

func init() {
	register(command{
		name:    "preprocess",
		summary: "show what a vision-language model's image processor makes of images: tiles, pixel_values, the expanded prompt",
		run:     runPreprocess,
	})
}

// preprocessReport is `gozoo preprocess --json`'s output.
type preprocessReport struct {
	Images []preprocessImage `json:"images"`
	// PixelValues is the shape of pixel_values as HF returns it: [1,
	// tiles, 3, H, W].
	PixelValues    []int  `json:"pixel_values_shape"`
	ImageSeqLen    int    `json:"image_seq_len"`
	Prompt         string `json:"prompt"`
	ExpandedPrompt string `json:"expanded_prompt"`
}

type preprocessImage struct {
	File              string `json:"file"`
	Width             int    `json:"width"`
	Height            int    `json:"height"`
	Resized           [2]int `json:"resized_hw"`
	ResizedForEncoder [2]int `json:"resized_for_encoder_hw,omitempty"`
	Rows              int    `json:"rows"`
	Cols              int    `json:"cols"`
	Tiles             int    `json:"tiles"`
}

func runPreprocess(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("preprocess", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder holding preprocessor_config.json and processor_config.json (required)")
	prompt := fs.String("prompt", "", "prompt to expand (default: one <image> per image)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var paths stringList
	fs.Var(&paths, "image", "an image file (repeatable, required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || len(paths) == 0 {
		fmt.Fprintln(stderr, "usage: gozoo preprocess --model DIR --image FILE [--image FILE2] [--prompt TEXT] [--json]")
		return 2
	}
	rep, err := preprocess(*model, paths, *prompt)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo preprocess:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // the prompt's <image> tokens stay readable
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintln(stderr, "gozoo preprocess:", err)
			return 1
		}
		return 0
	}
	for _, im := range rep.Images {
		fmt.Fprintf(stdout, "%s: %dx%d -> resized %dx%d", im.File, im.Width, im.Height, im.Resized[1], im.Resized[0])
		if im.Rows > 0 {
			fmt.Fprintf(stdout, " -> %dx%d for the encoder, %d rows x %d cols of tiles + the global image", im.ResizedForEncoder[1], im.ResizedForEncoder[0], im.Rows, im.Cols)
		} else {
			fmt.Fprint(stdout, ", not split: the global image alone")
		}
		fmt.Fprintf(stdout, " (%d tiles)\n", im.Tiles)
	}
	fmt.Fprintf(stdout, "pixel_values %v, %d image tokens per tile\nexpanded prompt:\n%s\n", rep.PixelValues, rep.ImageSeqLen, rep.ExpandedPrompt)
	return 0
}

func preprocess(dir string, paths []string, prompt string) (*preprocessReport, error) {
	cfg, err := idefics3.LoadProcessorConfig(dir)
	if err != nil {
		return nil, err
	}
	imgs := make([]*images.RGB, len(paths))
	for i, p := range paths {
		if imgs[i], err = images.Open(p, 0); err != nil {
			return nil, err
		}
	}
	b, err := idefics3.Preprocess(cfg, imgs)
	if err != nil {
		return nil, err
	}
	if prompt == "" {
		prompt = strings.Repeat(idefics3.ImageToken, len(imgs))
	}
	expanded, err := idefics3.ExpandPrompt(prompt, b.Grids(), cfg.ImageSeqLen)
	if err != nil {
		return nil, err
	}
	rep := &preprocessReport{
		PixelValues: []int{1, b.NumTiles, 3, b.Height, b.Width},
		ImageSeqLen: cfg.ImageSeqLen, Prompt: prompt, ExpandedPrompt: expanded,
	}
	for i, r := range b.Images {
		im := preprocessImage{File: paths[i], Width: imgs[i].W, Height: imgs[i].H, Rows: r.Rows, Cols: r.Cols, Tiles: r.NumTiles()}
		if r.Resized != nil {
			im.Resized = [2]int{r.Resized.H, r.Resized.W}
		}
		if r.ResizedForEncoder != nil {
			im.ResizedForEncoder = [2]int{r.ResizedForEncoder.H, r.ResizedForEncoder.W}
		}
		rep.Images = append(rep.Images, im)
	}
	return rep, nil
}
