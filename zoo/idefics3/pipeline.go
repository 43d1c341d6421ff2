package idefics3

import (
	"context"
	"errors"
	"fmt"
	"image"
	"strings"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

// Pipeline runs SmolVLM from images and text to streamed text: the
// processor (tiles and the expanded prompt), the tokenizer, the vision
// tower and connector, and the generator over the text model.
type Pipeline struct {
	*generate.Generator
	Model     *Model
	Processor ProcessorConfig
	// MaxPixels caps the images Images opens (0: images.DefaultMaxPixels).
	MaxPixels int64
}

// LoadPipeline opens a SmolVLM checkpoint folder: config.json, the
// safetensors, tokenizer.json, the chat template, generation_config.json
// and the processor configs. progress (may be nil) reports weight loading.
func LoadPipeline(dir string, progress func(done, total int64)) (*Pipeline, error) {
	return LoadPipelineContext(context.Background(), dir, progress)
}

// LoadPipelineContext is LoadPipeline that stops when ctx is done (see
// generate.LoadContext); the error wraps ctx.Err(). The folder's files
// are read once, for the generator and the processor alike.
func LoadPipelineContext(ctx context.Context, dir string, progress func(done, total int64)) (*Pipeline, error) {
	if _, ok := zoo.GGUFPath(dir); ok {
		return nil, fmt.Errorf("%s: SmolVLM loads from a checkpoint folder (config.json, safetensors, processor configs), not from GGUF", dir)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", dir, err)
	}
	folder, err := loaders.OpenFolder(dir)
	if err != nil {
		return nil, err
	}
	g, err := generate.LoadFolderContext(ctx, folder, progress)
	if err != nil {
		return nil, err
	}
	p, err := newPipeline(g, dir, func() (ProcessorConfig, error) { return ProcessorConfigFromFolder(folder) })
	if err != nil {
		g.Close()
		return nil, err
	}
	return p, nil
}

// NewPipeline wraps a Generator loaded from a SmolVLM folder, reading the
// folder's processor configs.
func NewPipeline(g *generate.Generator, dir string) (*Pipeline, error) {
	return newPipeline(g, dir, func() (ProcessorConfig, error) { return LoadProcessorConfig(dir) })
}

// newPipeline checks that g holds a SmolVLM, then gets the processor
// configs from processor and checks them against the model's.
func newPipeline(g *generate.Generator, dir string, processor func() (ProcessorConfig, error)) (*Pipeline, error) {
	m, ok := g.Model.(*Model)
	if !ok {
		return nil, fmt.Errorf("%s: model_type %q takes no images (supported: idefics3)", dir, g.Model.ModelType())
	}
	proc, err := processor()
	if err != nil {
		return nil, err
	}
	if proc.ImageSeqLen != m.Config.ImageSeqLen() {
		return nil, fmt.Errorf("%s: processor_config.json's image_seq_len %d disagrees with the model's %d ((image_size/patch_size/scale_factor)²)",
			dir, proc.ImageSeqLen, m.Config.ImageSeqLen())
	}
	if tile := proc.MaxImageSize; tile != m.Config.VisionConfig.ImageSize {
		return nil, fmt.Errorf("%s: preprocessor_config.json's max_image_size.longest_edge %d disagrees with vision_config.image_size %d", dir, tile, m.Config.VisionConfig.ImageSize)
	}
	return &Pipeline{Generator: g, Model: m, Processor: proc}, nil
}

// Images turns image sources into RGB images: file paths (decoded with
// the pixel limit and EXIF orientation, see images.Open), image.Image
// values, and *images.RGB as they are.
func (p *Pipeline) Images(srcs ...any) ([]*images.RGB, error) {
	return p.ImagesContext(context.Background(), srcs...)
}

// ImagesContext is Images that stops when ctx is done: between images and
// inside decoding (images.OpenContext), with an error that wraps
// ctx.Err().
func (p *Pipeline) ImagesContext(ctx context.Context, srcs ...any) ([]*images.RGB, error) {
	out := make([]*images.RGB, 0, len(srcs))
	for i, src := range srcs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("image %d of %d: %w", i, len(srcs), err)
		}
		switch v := src.(type) {
		case string:
			img, err := images.OpenContext(ctx, v, p.MaxPixels)
			if err != nil {
				return nil, err
			}
			out = append(out, img)
		case *images.RGB:
			out = append(out, v)
		case image.Image:
			out = append(out, images.FromImage(v))
		default:
			return nil, fmt.Errorf("image %d: %T is neither a file path, an image.Image nor an *images.RGB", i, src)
		}
	}
	return out, nil
}

// Prepared is a prompt with its images, ready to generate from.
type Prepared struct {
	// Text is the prompt after expansion: each <image> replaced by the
	// image's tiles of image tokens.
	Text string
	// Input is the prefill: the ids, with the image features over the
	// image tokens.
	Input graphs.Input
	// Batch is what the processor made of the images.
	Batch *Batch
	// Features are the connector's rows for every tile.
	Features *ImageFeatures
}

// Prepare expands a prompt holding one <image> per image, tokenizes it
// with the tokenizer's special tokens and encodes the images. A prompt
// without any <image> gets one per image in front.
func (p *Pipeline) Prepare(prompt string, imgs []*images.RGB) (*Prepared, error) {
	return p.PrepareContext(context.Background(), prompt, imgs)
}

// PrepareContext is Prepare that stops when ctx is done: inside the
// image preprocessing (PreprocessContext) and between it, tokenizing and
// the vision tower, with an error that wraps ctx.Err().
func (p *Pipeline) PrepareContext(ctx context.Context, prompt string, imgs []*images.RGB) (*Prepared, error) {
	if !strings.Contains(prompt, ImageToken) {
		prompt = strings.Repeat(ImageToken, len(imgs)) + prompt
	}
	return p.prepare(ctx, prompt, imgs, true)
}

// PrepareChat renders messages with the checkpoint's chat template (image
// parts as {"type": "image"}, text parts as {"type": "text", "text": ...},
// as transformers takes them) with the assistant's turn opened, and
// prepares the result with imgs, one per image part in order.
func (p *Pipeline) PrepareChat(messages []chat.Message, imgs []*images.RGB) (*Prepared, error) {
	return p.PrepareChatContext(context.Background(), messages, imgs)
}

// PrepareChatContext is PrepareChat that stops when ctx is done: the
// template renders under ctx (chat.Template.RenderContext) and the
// images are prepared as PrepareContext does.
func (p *Pipeline) PrepareChatContext(ctx context.Context, messages []chat.Message, imgs []*images.RGB) (*Prepared, error) {
	if p.Template == nil {
		return nil, errors.New("the checkpoint has no chat template")
	}
	text, err := p.Template.RenderContext(ctx, messages, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	return p.prepare(ctx, text, imgs, false)
}

// UserMessage is a user turn of images followed by text, in the content
// layout SmolVLM's chat template reads.
func UserMessage(numImages int, text string) chat.Message {
	var parts []any
	for i := 0; i < numImages; i++ {
		parts = append(parts, map[string]any{"type": "image"})
	}
	parts = append(parts, map[string]any{"type": "text", "text": text})
	return chat.Message{Role: "user", Content: parts}
}

func (p *Pipeline) prepare(ctx context.Context, prompt string, imgs []*images.RGB, addSpecial bool) (*Prepared, error) {
	if n := strings.Count(prompt, ImageToken); n != len(imgs) {
		return nil, fmt.Errorf("the prompt has %d %s tokens but %d images were given", n, ImageToken, len(imgs))
	}
	stopped := func(what string) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("preparing the prompt stopped %s: %w", what, err)
		}
		return nil
	}
	pr := &Prepared{Text: prompt}
	if len(imgs) > 0 {
		b, err := PreprocessContext(ctx, p.Processor, imgs)
		if err != nil {
			return nil, err
		}
		if pr.Text, err = ExpandPrompt(prompt, b.Grids(), p.Processor.ImageSeqLen); err != nil {
			return nil, err
		}
		pr.Batch = b
	}
	if p.Tokenizer == nil {
		return nil, errors.New("the checkpoint has no tokenizer")
	}
	if err := stopped("before tokenizing"); err != nil {
		return nil, err
	}
	ids, err := p.Tokenizer.Encode(pr.Text, addSpecial)
	if err != nil {
		return nil, err
	}
	if max := p.Model.MaxPositions(); len(ids) >= max {
		return nil, fmt.Errorf("the prompt is %d tokens after expanding %d images, which leaves no room in the model's %d positions (max_position_embeddings)", len(ids), len(imgs), max)
	}
	if pr.Batch != nil {
		if err := stopped("before the vision tower"); err != nil {
			return nil, err
		}
		if pr.Features, err = p.Model.EncodeImagesContext(ctx, pr.Batch.PixelValues, pr.Batch.NumTiles); err != nil {
			return nil, err
		}
		if err := stopped("after the vision tower"); err != nil {
			return nil, err
		}
	}
	if pr.Input, err = p.Model.Input(ids, pr.Features); err != nil {
		return nil, err
	}
	return pr, nil
}

// Stream generates from a prepared prompt; range over Tokens() to run it.
func (p *Pipeline) Stream(ctx context.Context, pr *Prepared, opts generate.Options) *generate.Stream {
	return p.StreamInput(ctx, pr.Input, opts)
}
