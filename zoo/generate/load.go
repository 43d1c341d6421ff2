package generate

import (
	"context"
	"errors"
	"fmt"

	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/zoo"
)

// Load opens a checkpoint folder for text generation: the model, its
// tokenizer.json (+ tokenizer_config.json), its chat template when it ships
// one, and generation_config.json for sampling defaults and extra EOS ids.
// progress (may be nil) reports weight loading.
func Load(dir string, progress func(done, total int64)) (*Generator, error) {
	return LoadContext(context.Background(), dir, progress)
}

// LoadContext is Load that stops when ctx is done: between reading the
// folder, building the tokenizer and loading each tensor (see
// zoo.LoadContext), with an error that wraps ctx.Err() and names the
// checkpoint.
func LoadContext(ctx context.Context, dir string, progress func(done, total int64)) (*Generator, error) {
	if path, ok := zoo.GGUFPath(dir); ok {
		return LoadGGUFContext(ctx, path, progress)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", dir, err)
	}
	folder, err := loaders.OpenFolder(dir)
	if err != nil {
		return nil, err
	}
	return LoadFolderContext(ctx, folder, progress)
}

// LoadFolderContext is LoadContext on a checkpoint folder already read
// by loaders.OpenFolder: its files are not read again, only the weights
// from folder.Dir. A caller that needs more of the folder (SmolVLM's
// processor configs) reads it once and passes it here.
func LoadFolderContext(ctx context.Context, folder *loaders.Folder, progress func(done, total int64)) (*Generator, error) {
	dir := folder.Dir
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", dir, err)
	}
	tok, err := tokenizer.FromFolder(folder)
	if err != nil {
		return nil, err
	}
	gc, err := ParseGenerationConfig(folder.GenerationConfig, folder.Path(loaders.GenerationConfigFile))
	if err != nil {
		return nil, err
	}
	model, err := zoo.LoadConfigContext(ctx, dir, folder.Config, progress)
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
	return g.ChatIDsContext(context.Background(), messages, opts)
}

// ChatIDsContext is ChatIDs that stops when ctx is done: the template
// renders under ctx (chat.Template.RenderContext, within its limits) and
// the error wraps ctx.Err().
func (g *Generator) ChatIDsContext(ctx context.Context, messages []chat.Message, opts chat.RenderOptions) ([]int, error) {
	if g.Template == nil {
		if g.templateErr != nil {
			return nil, g.templateErr
		}
		return nil, errors.New("generator has no chat template")
	}
	if g.Tokenizer == nil {
		return nil, errors.New("generator has no tokenizer")
	}
	text, err := g.Template.RenderContext(ctx, messages, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("chat prompt rendered, not tokenized: %w", err)
	}
	return g.Tokenizer.Encode(text, false)
}

// LoadGGUF opens a GGUF file for text generation with nothing beside it:
// the model, the tokenizer built from its tokenizer.ggml.* metadata (as
// llama.cpp builds it) and the chat template of tokenizer.chat_template.
func LoadGGUF(path string, progress func(done, total int64)) (*Generator, error) {
	return LoadGGUFContext(context.Background(), path, progress)
}

// LoadGGUFContext is LoadGGUF that stops when ctx is done, as
// zoo.LoadGGUFContext does; the error wraps ctx.Err() and names the file.
func LoadGGUFContext(ctx context.Context, path string, progress func(done, total int64)) (*Generator, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: loading stopped: %w", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	// The file is opened once: its metadata gives the tokenizer and the
	// template (copied out of the mapping), its tensors the model, which
	// closes it once its weights are no longer reachable.
	tok, err := tokenizer.FromGGUFMetadata(path, f.Metadata)
	if err != nil {
		f.Close()
		return nil, err
	}
	var tmpl *chat.Template
	var tmplErr error
	if src, err := f.String("tokenizer.chat_template"); err == nil {
		if tmpl, tmplErr = chat.New(path+" (tokenizer.chat_template)", src); tmplErr == nil {
			tmpl.SpecialTokens = ggufSpecialTokens(tok, f)
		}
	} else {
		tmplErr = fmt.Errorf("%s has no tokenizer.chat_template", path)
	}
	model, err := zoo.LoadGGUFFileContext(ctx, f, progress) // keeps f open
	if err != nil {
		return nil, err
	}
	if n := tok.VocabSize(); n > model.VocabSize() {
		return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's vocabulary is %d", path, n, model.VocabSize())
	}
	g := New(model, tok)
	g.Template, g.templateErr = tmpl, tmplErr
	return g, nil
}

// ggufSpecialTokens gives a GGUF's chat template the bos_token and
// eos_token strings apply_chat_template passes.
func ggufSpecialTokens(tok *tokenizer.Tokenizer, f *gguf.File) map[string]any {
	out := map[string]any{}
	for name, key := range map[string]string{"bos_token": "tokenizer.ggml.bos_token_id", "eos_token": "tokenizer.ggml.eos_token_id"} {
		if id, err := f.Uint(key); err == nil && id < uint64(tok.VocabSize()) {
			if s, err := tok.Decode([]int{int(id)}, false); err == nil {
				out[name] = s
			}
		}
	}
	return out
}
