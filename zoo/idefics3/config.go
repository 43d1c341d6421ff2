package idefics3

import (
	"encoding/json"
	"fmt"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() {
	zoo.Register("idefics3", func(data []byte) (zoo.Config, error) { return ParseConfig(data) })
}

// Config is config.json for model_type "idefics3" (SmolVLM), with
// Idefics3Config's defaults for absent keys: a vision tower, the scale
// factor of the connector's pixel shuffle, and a Llama text model.
type Config struct {
	ImageTokenID      int             `json:"image_token_id"`
	ScaleFactor       int             `json:"scale_factor"`
	TieWordEmbeddings bool            `json:"tie_word_embeddings"`
	VisionConfig      VisionConfig    `json:"vision_config"`
	TextConfig        json.RawMessage `json:"text_config"`

	// Text is the resolved text model: LlamaForCausalLM under
	// model.text_model, its head lm_head at the top level.
	Text *llama.Decoder `json:"-"`
}

// VisionConfig is vision_config (Idefics3VisionConfig, a SigLIP encoder).
// Its model_type reads "idefics3_vision" in current transformers and
// "idefics3" in released checkpoints; both are accepted.
type VisionConfig struct {
	ModelType         string  `json:"model_type"`
	HiddenSize        int     `json:"hidden_size"`
	IntermediateSize  int     `json:"intermediate_size"`
	NumHiddenLayers   int     `json:"num_hidden_layers"`
	NumAttentionHeads int     `json:"num_attention_heads"`
	NumChannels       int     `json:"num_channels"`
	ImageSize         int     `json:"image_size"`
	PatchSize         int     `json:"patch_size"`
	HiddenAct         string  `json:"hidden_act"`
	LayerNormEps      float64 `json:"layer_norm_eps"`
	InitRange         float64 `json:"initializer_range"`
}

// ParseConfig decodes config.json with Idefics3Config's defaults, resolves
// the text model and checks the sizes, naming the field at fault.
func ParseConfig(data []byte) (*Config, error) {
	c := &Config{
		ImageTokenID: 128257,
		ScaleFactor:  2,
		VisionConfig: VisionConfig{
			HiddenSize: 1152, IntermediateSize: 3072, NumHiddenLayers: 12, NumAttentionHeads: 16,
			NumChannels: 3, ImageSize: 224, PatchSize: 32, HiddenAct: "gelu_pytorch_tanh",
			LayerNormEps: 1e-6, InitRange: 0.02,
		},
	}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, err
	}
	text := c.TextConfig
	if len(text) == 0 || string(text) == "null" {
		// Idefics3Config's default text model: LlamaConfig with these.
		text = []byte(`{"rms_norm_eps": 1e-5, "pad_token_id": 128002, "tie_word_embeddings": false}`)
	}
	var kind struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(text, &kind); err != nil {
		return nil, fmt.Errorf("text_config: %w", err)
	}
	if kind.ModelType != "" && kind.ModelType != "llama" {
		return nil, fmt.Errorf("text_config.model_type %q is not supported (supported: llama)", kind.ModelType)
	}
	lc, err := llama.ParseConfig(text)
	if err != nil {
		return nil, fmt.Errorf("text_config: %w", err)
	}
	// The head is tied or not by the top-level flag (Idefics3Config's
	// tie_word_embeddings).
	lc.TieWordEmbeddings = c.TieWordEmbeddings
	if c.Text, err = llama.NewDecoder(lc, llama.Variant{ModelType: "idefics3", Theta: 10000, Prefix: "model.text_model", Interleaved: true}); err != nil {
		return nil, fmt.Errorf("text_config: %w", err)
	}
	return c, c.Validate()
}

// Validate checks the vision sizes and the connector against the text
// model, naming the config.json field at fault.
func (c *Config) Validate() error {
	v := c.VisionConfig
	switch v.ModelType {
	case "", "idefics3", "idefics3_vision":
	default:
		return fmt.Errorf("vision_config.model_type %q is not supported (supported: idefics3_vision, idefics3)", v.ModelType)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_size", v.HiddenSize}, {"intermediate_size", v.IntermediateSize}, {"num_hidden_layers", v.NumHiddenLayers},
		{"num_attention_heads", v.NumAttentionHeads}, {"num_channels", v.NumChannels}, {"image_size", v.ImageSize}, {"patch_size", v.PatchSize},
	} {
		if f.v <= 0 {
			return fmt.Errorf("vision_config.%s must be positive, got %d", f.name, f.v)
		}
	}
	if v.HiddenSize%v.NumAttentionHeads != 0 {
		return fmt.Errorf("vision_config.hidden_size %d does not split into num_attention_heads %d", v.HiddenSize, v.NumAttentionHeads)
	}
	if v.ImageSize < v.PatchSize {
		return fmt.Errorf("vision_config.image_size %d is smaller than patch_size %d", v.ImageSize, v.PatchSize)
	}
	if v.HiddenAct != "gelu_pytorch_tanh" && v.HiddenAct != "silu" {
		return fmt.Errorf("vision_config.hidden_act %q is not supported (supported: gelu_pytorch_tanh, silu)", v.HiddenAct)
	}
	if c.ScaleFactor <= 0 || c.PatchesPerSide()%c.ScaleFactor != 0 {
		return fmt.Errorf("scale_factor %d does not divide the %d patches per side (vision_config.image_size %d / patch_size %d)",
			c.ScaleFactor, c.PatchesPerSide(), v.ImageSize, v.PatchSize)
	}
	if c.ImageTokenID < 0 || c.ImageTokenID >= c.Text.VocabSize {
		return fmt.Errorf("image_token_id %d is outside the text vocabulary [0, %d)", c.ImageTokenID, c.Text.VocabSize)
	}
	return nil
}

// PatchesPerSide is the side of a tile's patch grid: image_size //
// patch_size (the convolution drops trailing pixels).
func (c *Config) PatchesPerSide() int { return c.VisionConfig.ImageSize / c.VisionConfig.PatchSize }

// ImageSeqLen is the number of text positions one tile fills:
// (patches per side / scale factor)².
func (c *Config) ImageSeqLen() int {
	s := c.PatchesPerSide() / c.ScaleFactor
	return s * s
}

// InitializerRange is the std of random weights (the text model's).
func (c *Config) InitializerRange() float64 { return c.Text.InitRange }

// New declares the model's tensors under p: model.vision_model.*,
// model.connector.modality_projection.proj, model.text_model.* and
// lm_head.
func (c *Config) New(p graphs.Scope) (zoo.Model, error) {
	text, err := c.Text.New(p)
	if err != nil {
		return nil, err
	}
	m := &Model{
		Model:  text.(*llama.Model),
		Config: c,
		vision: newVision(p.Sub("model", "vision_model"), c.VisionConfig, c.PatchesPerSide()),
	}
	v := c.VisionConfig
	m.connector = newConnector(p.Sub("model", "connector"), v.HiddenSize*c.ScaleFactor*c.ScaleFactor, c.Text.HiddenSize)
	return m, nil
}
