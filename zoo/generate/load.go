package generate

import (
	"errors"
	"fmt"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

// Load opens a checkpoint folder for text generation: the model, its
// tokenizer.json (+ tokenizer_config.json), its chat template when it ships
// one, and generation_config.json for sampling defaults and extra EOS ids.
// progress (may be nil) reports weight loading.
func Load(dir string, progress func(done, total int64)) (*Generator, error) {
	folder, err := loaders.OpenFolder(dir)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromFolder(folder)
	if err != nil {
		return nil, err
	}
	gc, err := ParseGenerationConfig(folder.GenerationConfig, folder.Path(loaders.GenerationConfigFile))
	if err != nil {
		return nil, err
	}
	model, err := zoo.LoadConfig(dir, folder.Config, progress)
	if err != nil {
		return nil, err
	}
	if n := tok.VocabSize(); n > model.VocabSize() {
		return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's vocab_size is %d", dir, n, model.VocabSize())
	}
	g := New(model, tok)
	gc.Apply(g)
	// A checkpoint without a chat template still generates from plain
	// prompts; ChatIDs reports the missing template when asked for one.
	g.Template, g.templateErr = chat.TemplateFromFolder(folder)
	return g, nil
}

// ChatIDs renders messages with the checkpoint's own chat template and
// tokenizes the result as transformers' apply_chat_template does (no
// special tokens added beyond what the template writes).
func (g *Generator) ChatIDs(messages []chat.Message, opts chat.RenderOptions) ([]int, error) {
	if g.Template == nil {
		if g.templateErr != nil {
			return nil, g.templateErr
		}
		return nil, errors.New("generator has no chat template")
	}
	if g.Tokenizer == nil {
		return nil, errors.New("generator has no tokenizer")
	}
	text, err := g.Template.Render(messages, opts)
	if err != nil {
		return nil, err
	}
	return g.Tokenizer.Encode(text, false)
}
