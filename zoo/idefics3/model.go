package idefics3

import (
	"context"
	"fmt"
	"sync"

	"github.com/gozoo/gozoo/cuda"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/zoo/llama"
)

// Model is Idefics3ForConditionalGeneration: a SigLIP vision tower, the
// pixel-shuffle connector, and the Llama text model whose input
// embeddings get the image features written over the <image> positions.
// The text model is the graphs.Model a Session runs; images go through
// EncodeImages first and enter the prefill as graphs.Input's replaced
// rows (see Input).
type Model struct {
	*llama.Model
	Config *Config

	vision    *vision
	connector layers.Linear

	mu       sync.Mutex
	programs map[programKey]*graphs.Program
	device   cuda.Backend
}

// SetDevice runs the vision tower and connector on a CUDA device (nil:
// the CPU), as graphs.Options.Device runs the text model.
func (m *Model) SetDevice(dev cuda.Backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if dev != m.device {
		m.device, m.programs = dev, nil
	}
}

// vision is Idefics3VisionTransformer: patch and position embeddings,
// pre-LayerNorm encoder layers, a final LayerNorm.
type vision struct {
	patch     *layers.PatchEmbedding
	positions layers.Embedding
	layers    []encoderLayer
	post      *layers.LayerNorm
	side      int // patches per side of a tile
}

type encoderLayer struct {
	norm1, norm2 *layers.LayerNorm
	attn         *layers.EncoderAttention
	mlp          *layers.MLP
}

func newVision(p graphs.Scope, c VisionConfig, side int) *vision {
	v := &vision{
		patch:     layers.NewPatchEmbedding(p.Sub("embeddings", "patch_embedding"), c.NumChannels, c.PatchSize, c.HiddenSize),
		positions: layers.NewEmbedding(p.Sub("embeddings", "position_embedding"), side*side, c.HiddenSize),
		post:      layers.NewLayerNorm(p.Sub("post_layernorm"), c.HiddenSize, c.LayerNormEps),
		side:      side,
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		lp := p.Sub("encoder", "layers", i)
		v.layers = append(v.layers, encoderLayer{
			norm1: layers.NewLayerNorm(lp.Sub("layer_norm1"), c.HiddenSize, c.LayerNormEps),
			norm2: layers.NewLayerNorm(lp.Sub("layer_norm2"), c.HiddenSize, c.LayerNormEps),
			attn:  layers.NewEncoderAttention(lp.Sub("self_attn"), c.HiddenSize, c.NumAttentionHeads),
			mlp:   layers.NewMLP(lp.Sub("mlp"), c.HiddenSize, c.IntermediateSize, c.HiddenAct),
		})
	}
	return v
}

func newConnector(p graphs.Scope, in, out int) layers.Linear {
	return layers.NewLinear(p.Sub("modality_projection", "proj"), in, out, false)
}

// Vision capture names (taps of the tower's program): hidden_states.0 is
// the embeddings, hidden_states.i the residual stream after encoder layer
// i-1, and these two.
const (
	// LastHiddenState is the tower's output after post_layernorm.
	LastHiddenState = "last_hidden_state"
	// PixelShuffled is the connector's input after the pixel shuffle.
	PixelShuffled = "pixel_shuffled"
)

// forward runs the tower on pixels [N, C, H, W] whose patches sit at
// positions [N·P] of the position table, returning [N·P, D].
func (v *vision) forward(s *graphs.Step, pixels, positions *G.Node) *G.Node {
	P := v.side * v.side
	h := layers.Add(v.patch.Forward(s, pixels), v.positions.Forward(s, positions))
	s.Tap(fmt.Sprintf("%s.0", graphs.HiddenStates), h)
	for i, l := range v.layers {
		if i > 0 { // EncodeImagesContext stops here when cancelled
			h = s.Checkpoint(fmt.Sprintf("vision layer %d", i), h)
		}
		h = layers.Add(h, l.attn.Forward(s, l.norm1.Forward(s, h), P))
		h = layers.Add(h, l.mlp.Forward(s, l.norm2.Forward(s, h)))
		s.Tap(fmt.Sprintf("%s.%d", graphs.HiddenStates, i+1), h)
	}
	return s.Tap(LastHiddenState, v.post.Forward(s, h))
}

// connect is Idefics3Connector: pixel shuffle, then the projection onto
// the text model's hidden size: [N·P, D] to [N·P/s², text hidden].
func (m *Model) connect(s *graphs.Step, feats *G.Node) *G.Node {
	shuffled := s.Tap(PixelShuffled, layers.PixelShuffle(feats, m.vision.side, m.Config.ScaleFactor))
	return m.connector.Forward(s, shuffled)
}

type programKey struct {
	tiles     int
	connector bool // the connector alone, from features
}

// program returns the compiled tower (or connector) for n tiles: a
// cached one without captures (the caller holds m.mu), a fresh one with.
func (m *Model) program(key programKey, capture []string) (*graphs.Program, error) {
	if len(capture) == 0 {
		if p, ok := m.programs[key]; ok {
			return p, nil
		}
	}
	v := m.Config.VisionConfig
	side, P := m.vision.side, m.vision.side*m.vision.side
	var build func(s *graphs.Step) *G.Node
	if key.connector {
		build = func(s *graphs.Step) *G.Node {
			return m.connect(s, s.Input("image_features", tensor.Float32, key.tiles*P, v.HiddenSize))
		}
	} else {
		build = func(s *graphs.Step) *G.Node {
			px := s.Input("pixel_values", tensor.Float32, key.tiles, v.NumChannels, v.ImageSize, v.ImageSize)
			pos := s.Input("position_ids", tensor.Int, key.tiles*P)
			return m.connect(s, m.vision.forward(s, px, pos))
		}
	}
	p, err := graphs.NewProgramOn(m.device, fmt.Sprintf("the vision tower for %d tiles of %dx%d patches", key.tiles, side, side), build, capture)
	if err != nil || len(capture) > 0 {
		return p, err
	}
	if m.programs == nil {
		m.programs = map[programKey]*graphs.Program{}
	}
	m.programs[key] = p
	return p, nil
}

// ImageFeatures are the connector's rows for a set of tiles: Rows [N·seq,
// text hidden], row-major, with the tower's captures when asked for.
type ImageFeatures struct {
	Rows     []float32
	Tiles    int
	Captured map[string]*tensor.Dense
}

// EncodeImages runs tiles pixels [N, C, S, S] (S the config's image_size,
// values normalised as the processor does) through the vision tower and
// the connector. All-zero tiles are padding and are dropped first, as HF
// drops them. capture names taps of the tower to keep (path.Match
// patterns; see LastHiddenState).
func (m *Model) EncodeImages(pixels []float32, tiles int, capture ...string) (*ImageFeatures, error) {
	return m.EncodeImagesContext(context.Background(), pixels, tiles, capture...)
}

// EncodeImagesContext is EncodeImages that stops when ctx is done: before
// the tower runs and between its encoder layers, with an error that wraps
// ctx.Err().
func (m *Model) EncodeImagesContext(ctx context.Context, pixels []float32, tiles int, capture ...string) (*ImageFeatures, error) {
	v := m.Config.VisionConfig
	per := v.NumChannels * v.ImageSize * v.ImageSize
	if tiles <= 0 || len(pixels) != tiles*per {
		return nil, fmt.Errorf("pixel_values hold %d values, want %d tiles of %dx%dx%d", len(pixels), tiles, v.NumChannels, v.ImageSize, v.ImageSize)
	}
	kept := make([]float32, 0, len(pixels))
	for t := 0; t < tiles; t++ {
		tile := pixels[t*per : (t+1)*per]
		for _, x := range tile {
			if x != 0 {
				kept = append(kept, tile...)
				break
			}
		}
	}
	n := len(kept) / per
	if n == 0 {
		return &ImageFeatures{}, nil
	}
	m.lock(capture)
	defer m.unlock(capture)
	p, err := m.program(programKey{tiles: n}, capture)
	if err != nil {
		return nil, err
	}
	return m.run(ctx, p, map[string]any{"pixel_values": kept, "position_ids": m.positionIDs(n)}, n, capture)
}

// Connect runs the connector alone on vision features [N·P, D] of n
// tiles: the pixel shuffle and the projection. capture may name
// PixelShuffled.
func (m *Model) Connect(features []float32, tiles int, capture ...string) (*ImageFeatures, error) {
	m.lock(capture)
	defer m.unlock(capture)
	p, err := m.program(programKey{tiles: tiles, connector: true}, capture)
	if err != nil {
		return nil, err
	}
	return m.run(context.Background(), p, map[string]any{"image_features": features}, tiles, capture)
}

// run runs a tower or connector program and collects its captures.
func (m *Model) run(ctx context.Context, p *graphs.Program, feeds map[string]any, tiles int, capture []string) (*ImageFeatures, error) {
	if len(capture) > 0 {
		defer p.Close()
	}
	out, err := p.RunContext(ctx, feeds)
	if err != nil {
		return nil, fmt.Errorf("vision tower: %w", err)
	}
	f := &ImageFeatures{Rows: out.Data().([]float32), Tiles: tiles}
	if len(capture) > 0 {
		f.Captured = map[string]*tensor.Dense{}
		for _, name := range p.CaptureNames() {
			if c, ok := p.Captured(name); ok {
				f.Captured[name] = c
			}
		}
	}
	return f, nil
}

// positionIDs are the position-table rows of n full tiles' patches. HF
// buckets each patch's fractional coordinates onto the table; for a tile
// whose patches all hold pixels (every tile the processor makes) that is
// 0..P-1, which is what a fixed transformers computes (4.55-4.56 shifted
// rows and columns k >= 1 to k-1, issue #41190).
func (m *Model) positionIDs(n int) []int {
	P := m.vision.side * m.vision.side
	ids := make([]int, n*P)
	for i := range ids {
		ids[i] = i % P
	}
	return ids
}

// Input builds the prefill input of a prompt's ids with image features
// written over its <image> tokens, in order. The counts must agree.
func (m *Model) Input(ids []int, f *ImageFeatures) (graphs.Input, error) {
	D := m.Config.Text.HiddenSize
	var rows []int
	for i, id := range ids {
		if id == m.Config.ImageTokenID {
			rows = append(rows, i)
		}
	}
	have := 0
	if f != nil {
		have = len(f.Rows) / D
	}
	if len(rows) != have {
		return graphs.Input{}, fmt.Errorf("the prompt has %d <image> tokens (id %d) but the images give %d feature rows (%d tiles of %d)",
			len(rows), m.Config.ImageTokenID, have, tilesOf(f), m.Config.ImageSeqLen())
	}
	if have == 0 {
		return graphs.IDs(ids...), nil
	}
	return graphs.Input{IDs: ids, Embeds: f.Rows, Replace: rows}, nil
}

func tilesOf(f *ImageFeatures) int {
	if f == nil {
		return 0
	}
	return f.Tiles
}

// lock serialises runs of the cached programs (a Program runs one at a
// time); a capturing run builds a program of its own.
func (m *Model) lock(capture []string) {
	if len(capture) == 0 {
		m.mu.Lock()
	}
}

func (m *Model) unlock(capture []string) {
	if len(capture) == 0 {
		m.mu.Unlock()
	}
}

// TileFLOPs counts the floating-point operations (two per multiply-add)
// of one tile's products through the tower and the connector: the patch
// embedding, each layer's four projections, MLP and attention (scores and
// weighted values over the tile's patches), and the projection.
func (m *Model) TileFLOPs() float64 {
	v := m.Config.VisionConfig
	P, D, I := float64(m.vision.side*m.vision.side), float64(v.HiddenSize), float64(v.IntermediateSize)
	K := float64(v.NumChannels * v.PatchSize * v.PatchSize)
	s2 := float64(m.Config.ScaleFactor * m.Config.ScaleFactor)
	f := 2 * P * D * K
	f += float64(v.NumHiddenLayers) * (2*P*(4*D*D+2*D*I) + 2*2*P*P*D)
	f += 2 * (P / s2) * (D * s2) * float64(m.Config.Text.HiddenSize)
	return f
}
