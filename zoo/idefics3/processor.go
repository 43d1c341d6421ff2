// Package idefics3 is SmolVLM / Idefics3 (Hugging Face model_type
// "idefics3"): a SigLIP-style vision tower, a pixel-shuffle connector and a
// Llama text model.
//
// The input side (processor.go) reproduces transformers exactly: the image
// preprocessing of Idefics3ImageProcessor (Pillow path: [Preprocess],
// [PreprocessBatch]) and the prompt expansion of Idefics3Processor
// ([ExpandPrompt]). Images come from [images.Open] or [images.Decode],
// which load them as transformers' load_image does.
//
// The model side (model.go) runs the vision tower and connector as a
// graphs.Program ([Model.EncodeImages]) and the text model as any zoo
// model; [LoadPipeline] puts the processor, tokenizer, chat template and
// generator together, from images and text to streamed text.
package idefics3

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strings"
	"syscall"

	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/loaders"
)

// The special strings Idefics3Processor puts around image tokens.
const (
	// ImageToken is the placeholder a prompt carries for each image, and
	// the token repeated image_seq_len times per tile after expansion.
	ImageToken = "<image>"
	// FakeImageToken opens each tile and closes the global image.
	FakeImageToken = "<fake_token_around_image>"
	// GlobalImageToken tags the downscaled whole image that ends each
	// image's tiles.
	GlobalImageToken = "<global-img>"
)

// Defaults of Idefics3ImageProcessor and Idefics3Processor for keys a
// config leaves out.
const (
	DefaultLongestEdge  = 4 * 364 // size.longest_edge
	DefaultMaxImageSize = 364     // max_image_size.longest_edge
	DefaultImageSeqLen  = 169     // processor image_seq_len
	// maxImageSize is MAX_IMAGE_SIZE of transformers' Idefics3 processors:
	// the step-1 resize never makes a side longer than this ("4k").
	maxImageSize = 4096
)

// Size is a Hugging Face size dict: {"longest_edge": N} or {"height": H,
// "width": W}; longest_edge wins when both are given, as in HF's resize.
type Size struct {
	// LongestEdge is longest_edge: scale so the longer side is this long.
	LongestEdge int `json:"longest_edge,omitempty"`
	// Height is height: with Width, resize to exactly Height x Width.
	Height int `json:"height,omitempty"`
	// Width is width.
	Width int `json:"width,omitempty"`
}

// ProcessorConfig is what preprocessor_config.json (Idefics3ImageProcessor)
// and processor_config.json (Idefics3Processor) say, with HF's defaults for
// the keys they leave out.
type ProcessorConfig struct {
	// DoConvertRGB is do_convert_rgb (default true). Images reach Preprocess
	// as 8-bit RGB already, on which HF's convert_to_rgb (RGBA composite over
	// white, back to RGB) is the identity, so it changes nothing here.
	DoConvertRGB bool
	// DoResize is do_resize (default true): step 1, the longest edge to
	// Size.LongestEdge (or the image to Size.Height x Size.Width).
	DoResize bool
	// Size is size (default {"longest_edge": 1456}).
	Size Size
	// Resample is resample, a PIL filter number (default 1, LANCZOS).
	Resample images.Filter
	// DoImageSplitting is do_image_splitting (default true).
	DoImageSplitting bool
	// MaxImageSize is max_image_size.longest_edge (default 364): the tile
	// side M, also the vision encoder's image size.
	MaxImageSize int
	// DoRescale is do_rescale (default true).
	DoRescale bool
	// RescaleFactor is rescale_factor (default 1/255).
	RescaleFactor float64
	// DoNormalize is do_normalize (default true).
	DoNormalize bool
	// ImageMean is image_mean (default 0.5 per channel; a single number in
	// the file applies to all three).
	ImageMean [3]float64
	// ImageStd is image_std (default 0.5 per channel).
	ImageStd [3]float64
	// DoPad is do_pad (default true): pad tiles to a common size and
	// samples to a common tile count, and return the pixel attention mask.
	DoPad bool
	// ImageSeqLen is image_seq_len from processor_config.json (default
	// 169): the number of <image> tokens per tile, which must equal
	// [ImageSeqLen] of the model's vision config.
	ImageSeqLen int
}

// DefaultProcessorConfig is Idefics3ImageProcessor() and
// Idefics3Processor() with no arguments.
func DefaultProcessorConfig() ProcessorConfig {
	return ProcessorConfig{
		DoConvertRGB:     true,
		DoResize:         true,
		Size:             Size{LongestEdge: DefaultLongestEdge},
		Resample:         images.Lanczos,
		DoImageSplitting: true,
		MaxImageSize:     DefaultMaxImageSize,
		DoRescale:        true,
		RescaleFactor:    1.0 / 255,
		DoNormalize:      true,
		ImageMean:        [3]float64{0.5, 0.5, 0.5},
		ImageStd:         [3]float64{0.5, 0.5, 0.5},
		DoPad:            true,
		ImageSeqLen:      DefaultImageSeqLen,
	}
}

// LoadProcessorConfig reads dir/preprocessor_config.json and, if present,
// dir/processor_config.json (which supplies image_seq_len). A
// processor_config.json that nests the image processor's settings under
// "image_processor" (the single-file layout of newer transformers) serves
// when preprocessor_config.json is absent.
func LoadProcessorConfig(dir string) (ProcessorConfig, error) {
	f, err := loaders.ReadFolder(dir, loaders.PreprocessorConfigFile, loaders.ProcessorConfigFile)
	if err != nil {
		return ProcessorConfig{}, err
	}
	return ProcessorConfigFromFolder(f)
}

// ProcessorConfigFromFolder is LoadProcessorConfig on the processor
// configs of a checkpoint folder already read (loaders.OpenFolder or
// ReadFolder), without touching the disk. Errors name the file; a missing
// image processor config matches fs.ErrNotExist.
func ProcessorConfigFromFolder(f *loaders.Folder) (ProcessorConfig, error) {
	prePath := f.Path(loaders.PreprocessorConfigFile)
	procPath := f.Path(loaders.ProcessorConfigFile)
	pre, proc := f.PreprocessorConfig, f.ProcessorConfig
	if pre == nil {
		var nested struct {
			ImageProcessor json.RawMessage `json:"image_processor"`
		}
		if proc != nil {
			if err := json.Unmarshal(proc, &nested); err != nil {
				return ProcessorConfig{}, fmt.Errorf("%s: %w", procPath, err)
			}
		}
		if len(nested.ImageProcessor) == 0 {
			missing := &fs.PathError{Op: "open", Path: prePath, Err: syscall.ENOENT}
			return ProcessorConfig{}, fmt.Errorf("%s: no image processor config (nor an \"image_processor\" entry in %s): %w", prePath, procPath, missing)
		}
		pre, prePath = nested.ImageProcessor, procPath+` "image_processor"`
	}
	cfg := DefaultProcessorConfig()
	if err := cfg.parsePreprocessor(pre); err != nil {
		return ProcessorConfig{}, fmt.Errorf("%s: %w", prePath, err)
	}
	if proc != nil {
		if err := cfg.parseProcessor(proc); err != nil {
			return ProcessorConfig{}, fmt.Errorf("%s: %w", procPath, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return ProcessorConfig{}, fmt.Errorf("%s: %w", f.Dir, err)
	}
	return cfg, nil
}

// ParseProcessorConfig is LoadProcessorConfig on file contents;
// processor may be nil.
func ParseProcessorConfig(preprocessor, processor []byte) (ProcessorConfig, error) {
	cfg := DefaultProcessorConfig()
	if err := cfg.parsePreprocessor(preprocessor); err != nil {
		return ProcessorConfig{}, fmt.Errorf("preprocessor_config.json: %w", err)
	}
	if processor != nil {
		if err := cfg.parseProcessor(processor); err != nil {
			return ProcessorConfig{}, fmt.Errorf("processor_config.json: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return ProcessorConfig{}, err
	}
	return cfg, nil
}

func (c *ProcessorConfig) parsePreprocessor(b []byte) error {
	var raw struct {
		DoConvertRGB     *bool           `json:"do_convert_rgb"`
		DoResize         *bool           `json:"do_resize"`
		Size             *Size           `json:"size"`
		Resample         *int            `json:"resample"`
		DoImageSplitting *bool           `json:"do_image_splitting"`
		MaxImageSize     *Size           `json:"max_image_size"`
		DoRescale        *bool           `json:"do_rescale"`
		RescaleFactor    *float64        `json:"rescale_factor"`
		DoNormalize      *bool           `json:"do_normalize"`
		ImageMean        json.RawMessage `json:"image_mean"`
		ImageStd         json.RawMessage `json:"image_std"`
		DoPad            *bool           `json:"do_pad"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	setBool := func(dst *bool, src *bool) {
		if src != nil {
			*dst = *src
		}
	}
	setBool(&c.DoConvertRGB, raw.DoConvertRGB)
	setBool(&c.DoResize, raw.DoResize)
	setBool(&c.DoImageSplitting, raw.DoImageSplitting)
	setBool(&c.DoRescale, raw.DoRescale)
	setBool(&c.DoNormalize, raw.DoNormalize)
	setBool(&c.DoPad, raw.DoPad)
	if raw.Size != nil {
		c.Size = *raw.Size
	}
	if raw.Resample != nil {
		c.Resample = images.Filter(*raw.Resample)
	}
	if raw.MaxImageSize != nil {
		if raw.MaxImageSize.LongestEdge <= 0 {
			return fmt.Errorf("max_image_size: want {\"longest_edge\": N} with N > 0, got %+v", *raw.MaxImageSize)
		}
		c.MaxImageSize = raw.MaxImageSize.LongestEdge
	}
	if raw.RescaleFactor != nil {
		c.RescaleFactor = *raw.RescaleFactor
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *[3]float64
	}{{"image_mean", raw.ImageMean, &c.ImageMean}, {"image_std", raw.ImageStd, &c.ImageStd}} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue
		}
		var one float64
		if json.Unmarshal(f.raw, &one) == nil {
			*f.dst = [3]float64{one, one, one}
			continue
		}
		var list []float64
		if err := json.Unmarshal(f.raw, &list); err != nil || (len(list) != 3 && len(list) != 1) {
			return fmt.Errorf("%s: want a number or a list of 3 numbers, got %s", f.name, f.raw)
		}
		if len(list) == 1 {
			list = []float64{list[0], list[0], list[0]}
		}
		*f.dst = [3]float64(list)
	}
	return nil
}

func (c *ProcessorConfig) parseProcessor(b []byte) error {
	var raw struct {
		ImageSeqLen *int `json:"image_seq_len"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.ImageSeqLen != nil {
		c.ImageSeqLen = *raw.ImageSeqLen
	}
	return nil
}

// Validate reports settings Preprocess cannot honour, naming the field.
func (c ProcessorConfig) Validate() error {
	switch c.Resample {
	case images.Lanczos, images.Bilinear, images.Bicubic, images.Box, images.Hamming:
	default:
		return fmt.Errorf("resample: %v (%d) is not supported; LANCZOS (1), BILINEAR (2), BICUBIC (3), BOX (4) and HAMMING (5) are", c.Resample, int(c.Resample))
	}
	if c.DoResize && c.Size.LongestEdge <= 0 && (c.Size.Height <= 0 || c.Size.Width <= 0) {
		return fmt.Errorf("size: want longest_edge > 0 or height and width > 0, got %+v", c.Size)
	}
	if c.MaxImageSize <= 0 {
		return fmt.Errorf("max_image_size.longest_edge: must be > 0, got %d", c.MaxImageSize)
	}
	if c.DoNormalize {
		for i, s := range c.ImageStd {
			if s == 0 {
				return fmt.Errorf("image_std[%d] is 0", i)
			}
		}
	}
	if c.ImageSeqLen <= 0 {
		return fmt.Errorf("image_seq_len: must be > 0, got %d", c.ImageSeqLen)
	}
	return nil
}

// ImageGrid is how an image was split: Rows x Cols tiles plus the global
// image, or 0 x 0 when it was not split (the global image alone).
type ImageGrid struct {
	// Rows and Cols count the M x M crops down and across.
	Rows, Cols int
}

// NumTiles is the number of pixel_values entries the image takes:
// Rows*Cols tiles plus the global image.
func (g ImageGrid) NumTiles() int { return g.Rows*g.Cols + 1 }

// ImageResult is one image's part of a Batch, with the uint8 images the
// processor went through for inspection.
type ImageResult struct {
	ImageGrid
	// FirstTile is the index of the image's first tile in the batch.
	FirstTile int
	// Resized is the step-1 image (longest edge to size.longest_edge), or
	// the input when do_resize is false.
	Resized *images.RGB
	// ResizedForEncoder is the step-2 image (both sides to multiples of M);
	// nil when do_image_splitting is false.
	ResizedForEncoder *images.RGB
	// Global is the last tile: the step-2 image resized to M x M (the
	// step-2 image itself when it was not split; the step-1 image resized
	// to M x M when do_image_splitting is false).
	Global *images.RGB
	// Tiles are the uint8 tiles in order, Global last.
	Tiles []*images.RGB
}

// Batch is the preprocessing of the images of one prompt.
type Batch struct {
	// PixelValues is [NumTiles, 3, Height, Width] float32 (CHW per tile):
	// every tile of every image in order, each image's global image last.
	PixelValues []float32
	// PixelAttentionMask is [NumTiles, Height, Width], 1 on real pixels and
	// 0 on padding (all ones unless tiles differ in size); nil when
	// do_pad is false, as HF returns none.
	PixelAttentionMask []int64
	// NumTiles counts the tiles of all images (global images included).
	NumTiles int
	// Height and Width are the tile size after padding: M x M in practice.
	Height, Width int
	// Images has one entry per input image.
	Images []ImageResult
}

// Grids returns each image's split, as ExpandPrompt takes them.
func (b *Batch) Grids() []ImageGrid {
	g := make([]ImageGrid, len(b.Images))
	for i, r := range b.Images {
		g[i] = r.ImageGrid
	}
	return g
}

// resizeOutputSize is get_resize_output_image_size: the longest edge to
// longest (upscaling too), the other side int(longest / aspect) bumped to
// the next even number, at least 1; then, should a side exceed
// MAX_IMAGE_SIZE, scaled down below it.
func resizeOutputSize(h, w, longest int) (int, int) {
	aspect := float64(w) / float64(h)
	if w >= h {
		w = longest
		h = int(float64(w) / aspect)
		if h%2 != 0 {
			h++
		}
	} else {
		h = longest
		w = int(float64(h) * aspect)
		if w%2 != 0 {
			w++
		}
	}
	h, w = max(h, 1), max(w, 1)
	aspect = float64(w) / float64(h)
	if w >= h && w > maxImageSize {
		w = maxImageSize
		h = int(float64(w) / aspect)
	} else if h > w && h > maxImageSize {
		h = maxImageSize
		w = int(float64(h) * aspect)
	}
	return max(h, 1), max(w, 1)
}

// encoderSize is resize_for_vision_encoder's target: the long side up to a
// multiple of m, the short side int(long_new / aspect) rounded up to a
// multiple of m (which distorts the aspect ratio slightly).
func encoderSize(h, w, m int) (int, int) {
	aspect := float64(w) / float64(h)
	ceilTo := func(v int) int { return int(math.Ceil(float64(v)/float64(m))) * m }
	if w >= h {
		w = ceilTo(w)
		h = ceilTo(int(float64(w) / aspect))
	} else {
		h = ceilTo(h)
		w = ceilTo(int(float64(h) * aspect))
	}
	return h, w
}

func resize(ctx context.Context, img *images.RGB, h, w int, f images.Filter, what string) (*images.RGB, error) {
	out, err := images.ResizeContext(ctx, img, w, h, f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// Preprocess runs Idefics3ImageProcessor (Pillow path) on the images of one
// prompt, in order. Each image, 8-bit RGB as images.Decode returns it, goes
// through three separately quantised uint8 resizes with cfg.Resample:
//
//  1. (do_resize) longest edge to size.longest_edge, upscaling small images
//     too; the other side int(longest/aspect), bumped to even;
//  2. (do_image_splitting) both sides up to multiples of M =
//     max_image_size.longest_edge: long = ceil(long/M)*M, short =
//     ceil(int(long/aspect)/M)*M;
//  3. the global image: the step-2 image resized to M x M.
//
// If the step-2 image is larger than M it is cut into rows x cols M x M
// crops (row-major) followed by the global image; otherwise it is the one
// tile and rows = cols = 0. Without splitting the step-1 image is resized to
// M x M, as current transformers does (older releases left it at its
// step-1 size and padded).
//
// Pixels become float32(u8 * rescale_factor computed in float64), then
// (x - float32(mean)) / float32(std) in float32, as numpy does.
//
// Tiles are padded (zeros, mask 0) to the largest tile when do_pad is set;
// all tiles are M x M in practice, so the mask is all ones.
func Preprocess(cfg ProcessorConfig, imgs []*images.RGB) (*Batch, error) {
	return PreprocessContext(context.Background(), cfg, imgs)
}

// PreprocessContext is [Preprocess] that stops when ctx is done: between
// images and tiles, and inside each resize (images.ResizeContext), with
// an error that wraps ctx.Err() and names the image or tile.
func PreprocessContext(ctx context.Context, cfg ProcessorConfig, imgs []*images.RGB) (*Batch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	M := cfg.MaxImageSize
	b := &Batch{}
	var tiles []*images.RGB
	for i, img := range imgs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("preprocessing stopped before image %d of %d: %w", i, len(imgs), err)
		}
		if img == nil || img.W <= 0 || img.H <= 0 || len(img.Pix) != 3*img.W*img.H {
			return nil, fmt.Errorf("image %d: not a valid RGB image", i)
		}
		r := ImageResult{FirstTile: len(tiles), Resized: img}
		var err error
		if cfg.DoResize {
			h, w := cfg.Size.Height, cfg.Size.Width
			if cfg.Size.LongestEdge > 0 {
				h, w = resizeOutputSize(img.H, img.W, cfg.Size.LongestEdge)
			}
			if r.Resized, err = resize(ctx, img, h, w, cfg.Resample, fmt.Sprintf("image %d: resize (size)", i)); err != nil {
				return nil, err
			}
		}
		if cfg.DoImageSplitting {
			h, w := encoderSize(r.Resized.H, r.Resized.W, M)
			if r.ResizedForEncoder, err = resize(ctx, r.Resized, h, w, cfg.Resample, fmt.Sprintf("image %d: resize_for_vision_encoder", i)); err != nil {
				return nil, err
			}
			enc := r.ResizedForEncoder
			if enc.H > M || enc.W > M {
				r.Rows = int(math.Ceil(float64(enc.H) / float64(M)))
				r.Cols = int(math.Ceil(float64(enc.W) / float64(M)))
				th := int(math.Ceil(float64(enc.H) / float64(r.Rows)))
				tw := int(math.Ceil(float64(enc.W) / float64(r.Cols)))
				for row := 0; row < r.Rows; row++ {
					for col := 0; col < r.Cols; col++ {
						r.Tiles = append(r.Tiles, enc.Crop(col*tw, row*th, tw, th))
					}
				}
				if r.Global, err = resize(ctx, enc, M, M, cfg.Resample, fmt.Sprintf("image %d: global image", i)); err != nil {
					return nil, err
				}
			} else {
				r.Global = enc
			}
		} else {
			if r.Global, err = resize(ctx, r.Resized, M, M, cfg.Resample, fmt.Sprintf("image %d: resize to max_image_size", i)); err != nil {
				return nil, err
			}
		}
		r.Tiles = append(r.Tiles, r.Global)
		tiles = append(tiles, r.Tiles...)
		b.Images = append(b.Images, r)
	}
	b.NumTiles = len(tiles)
	for _, t := range tiles {
		b.Height, b.Width = max(b.Height, t.H), max(b.Width, t.W)
	}
	if !cfg.DoPad {
		for i, t := range tiles {
			if t.H != b.Height || t.W != b.Width {
				return nil, fmt.Errorf("do_pad is false but tile %d is %dx%d and tile 0 %dx%d", i, t.W, t.H, tiles[0].W, tiles[0].H)
			}
		}
	}
	lut := pixelLUT(cfg)
	plane := b.Height * b.Width
	b.PixelValues = make([]float32, b.NumTiles*3*plane)
	if cfg.DoPad {
		b.PixelAttentionMask = make([]int64, b.NumTiles*plane)
	}
	for n, t := range tiles {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("preprocessing stopped before tile %d of %d: %w", n, len(tiles), err)
		}
		pv := b.PixelValues[n*3*plane : (n+1)*3*plane]
		for y := 0; y < t.H; y++ {
			for x := 0; x < t.W; x++ {
				p := t.Pix[3*(y*t.W+x):]
				for c := 0; c < 3; c++ {
					pv[c*plane+y*b.Width+x] = lut[c][p[c]]
				}
			}
		}
		if cfg.DoPad {
			mask := b.PixelAttentionMask[n*plane : (n+1)*plane]
			for y := 0; y < t.H; y++ {
				for x := 0; x < t.W; x++ {
					mask[y*b.Width+x] = 1
				}
			}
		}
	}
	return b, nil
}

// pixelLUT maps each channel's uint8 value to its float32 pixel value with
// numpy's arithmetic: rescale in float64 then cast (transformers' rescale),
// normalise in float32 with float32 mean and std (transformers' normalize).
func pixelLUT(cfg ProcessorConfig) [3][256]float32 {
	var lut [3][256]float32
	for c := 0; c < 3; c++ {
		mean, std := float32(cfg.ImageMean[c]), float32(cfg.ImageStd[c])
		for v := 0; v < 256; v++ {
			x := float32(v)
			if cfg.DoRescale {
				x = float32(float64(v) * cfg.RescaleFactor)
			}
			if cfg.DoNormalize {
				x = (x - mean) / std
			}
			lut[c][v] = x
		}
	}
	return lut
}

// PaddedBatch is the preprocessing of several prompts' images stacked as HF
// does with do_pad: every sample padded with all-zero tiles (mask 0) to the
// largest tile count, every tile to the largest tile size.
type PaddedBatch struct {
	// PixelValues is [BatchSize, MaxTiles, 3, Height, Width].
	PixelValues []float32
	// PixelAttentionMask is [BatchSize, MaxTiles, Height, Width].
	PixelAttentionMask []int64
	// BatchSize is the number of samples (prompts).
	BatchSize int
	// MaxTiles is the largest sample's tile count, which every sample is
	// padded to.
	MaxTiles int
	// Height and Width are the largest tile size, which every tile is
	// padded to.
	Height, Width int
	// Samples are the per-prompt results before padding.
	Samples []*Batch
}

// PreprocessBatch preprocesses each sample (the images of one prompt) and
// pads them into one tensor as HF's pad does: samples with fewer tiles get
// zero images whose mask is all 0 (the model drops all-zero images before
// the vision tower). It needs do_pad unless every sample has the same
// number of equally sized tiles.
func PreprocessBatch(cfg ProcessorConfig, samples [][]*images.RGB) (*PaddedBatch, error) {
	return PreprocessBatchContext(context.Background(), cfg, samples)
}

// PreprocessBatchContext is [PreprocessBatch] that stops when ctx is done,
// as [PreprocessContext] does.
func PreprocessBatchContext(ctx context.Context, cfg ProcessorConfig, samples [][]*images.RGB) (*PaddedBatch, error) {
	pb := &PaddedBatch{BatchSize: len(samples)}
	for i, imgs := range samples {
		b, err := PreprocessContext(ctx, cfg, imgs)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		pb.Samples = append(pb.Samples, b)
		pb.MaxTiles = max(pb.MaxTiles, b.NumTiles)
		pb.Height, pb.Width = max(pb.Height, b.Height), max(pb.Width, b.Width)
	}
	if !cfg.DoPad {
		for i, b := range pb.Samples {
			if b.NumTiles != pb.MaxTiles || b.Height != pb.Height || b.Width != pb.Width {
				return nil, fmt.Errorf("do_pad is false but sample %d has %d tiles of %dx%d and the largest %d of %dx%d", i, b.NumTiles, b.Width, b.Height, pb.MaxTiles, pb.Width, pb.Height)
			}
		}
	}
	plane := pb.Height * pb.Width
	pb.PixelValues = make([]float32, pb.BatchSize*pb.MaxTiles*3*plane)
	pb.PixelAttentionMask = make([]int64, pb.BatchSize*pb.MaxTiles*plane)
	for s, b := range pb.Samples {
		bplane := b.Height * b.Width
		for n := 0; n < b.NumTiles; n++ {
			dst := pb.PixelValues[(s*pb.MaxTiles+n)*3*plane:]
			for c := 0; c < 3; c++ {
				for y := 0; y < b.Height; y++ {
					copy(dst[c*plane+y*pb.Width:c*plane+y*pb.Width+b.Width], b.PixelValues[(n*3+c)*bplane+y*b.Width:])
				}
			}
			mask := pb.PixelAttentionMask[(s*pb.MaxTiles+n)*plane:]
			for y := 0; y < b.Height; y++ {
				for x := 0; x < b.Width; x++ {
					if b.PixelAttentionMask == nil || b.PixelAttentionMask[n*bplane+y*b.Width+x] != 0 {
						mask[y*pb.Width+x] = 1
					}
				}
			}
		}
	}
	return pb, nil
}

// ExpandPrompt replaces each <image> in prompt by Idefics3Processor's
// expansion for the matching image's grid, with imageSeqLen <image> tokens
// per tile. A split image becomes, for each row r and column c (1-based),
// "<fake_token_around_image><row_r_col_c>" + "<image>"*imageSeqLen, with
// "\n" after each row, then "\n<fake_token_around_image><global-img>" +
// "<image>"*imageSeqLen + "<fake_token_around_image>"; an unsplit one
// (0 x 0) is "<fake_token_around_image><global-img>" +
// "<image>"*imageSeqLen + "<fake_token_around_image>". The number of
// <image> in prompt must equal len(imgs).
func ExpandPrompt(prompt string, imgs []ImageGrid, imageSeqLen int) (string, error) {
	if n := strings.Count(prompt, ImageToken); n != len(imgs) {
		return "", fmt.Errorf("prompt has %d %s tokens but %d images were given", n, ImageToken, len(imgs))
	}
	if imageSeqLen <= 0 && len(imgs) > 0 {
		return "", fmt.Errorf("image_seq_len must be > 0, got %d", imageSeqLen)
	}
	parts := strings.Split(prompt, ImageToken)
	var sb strings.Builder
	sb.WriteString(parts[0])
	run := strings.Repeat(ImageToken, imageSeqLen)
	for i, g := range imgs {
		if g.Rows < 0 || g.Cols < 0 || (g.Rows == 0) != (g.Cols == 0) {
			return "", fmt.Errorf("image %d: invalid grid %d x %d", i, g.Rows, g.Cols)
		}
		if g.Rows == 0 {
			sb.WriteString(FakeImageToken + GlobalImageToken + run + FakeImageToken)
		} else {
			for r := 1; r <= g.Rows; r++ {
				for c := 1; c <= g.Cols; c++ {
					fmt.Fprintf(&sb, "%s<row_%d_col_%d>%s", FakeImageToken, r, c, run)
				}
				sb.WriteString("\n")
			}
			sb.WriteString("\n" + FakeImageToken + GlobalImageToken + run + FakeImageToken)
		}
		sb.WriteString(parts[i+1])
	}
	return sb.String(), nil
}

// ImageSeqLen is the number of <image> tokens per tile for a vision tower
// of imageSize pixels and patchSize patches whose connector pixel-shuffles
// scaleFactor x scaleFactor patches into one token:
// int((imageSize // patchSize)^2 / scaleFactor^2), 81 for SmolVLM-Instruct
// (384, 14, 3).
func ImageSeqLen(imageSize, patchSize, scaleFactor int) (int, error) {
	if imageSize <= 0 || patchSize <= 0 || scaleFactor <= 0 {
		return 0, fmt.Errorf("image_seq_len: image_size %d, patch_size %d and scale_factor %d must be > 0", imageSize, patchSize, scaleFactor)
	}
	p := imageSize / patchSize
	return p * p / (scaleFactor * scaleFactor), nil
}
