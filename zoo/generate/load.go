package generate

import (
	"fmt"

	"github.com/gozoo/gozoo/loaders/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

// Load opens a checkpoint folder for text generation: the model, its
// tokenizer.json (+ tokenizer_config.json), and generation_config.json for
// sampling defaults and extra EOS ids. progress (may be nil) reports weight
// loading.
func Load(dir string, progress func(done, total int64)) (*Generator, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	gc, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	model, err := zoo.LoadWithProgress(dir, progress)
	if err != nil {
		return nil, err
	}
	if n := tok.VocabSize(); n > model.VocabSize() {
		return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's vocab_size is %d", dir, n, model.VocabSize())
	}
	g := New(model, tok)
	gc.Apply(g)
	return g, nil
}
