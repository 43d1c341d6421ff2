package generate

import (
	"errors"
	"fmt"

	"github.com/gozoo/gozoo/grammar"
	"github.com/gozoo/gozoo/tokenizer"
)

// Grammar constrains generation to c's grammar (a JSON schema's, see
// package grammar): add it to Sampling.Extra. Each sequence gets its own
// automaton; the tokens the grammar does not allow next get -Inf, EOS
// only once the text is complete, so a greedy or sampled generation ends
// with a text the grammar accepts (unless MaxTokens cuts it: then it is
// a valid prefix).
func Grammar(c *grammar.Constraint) SequenceProcessor { return &grammarProcessor{c: c} }

type grammarProcessor struct {
	c *grammar.Constraint
	p *grammar.Processor // for a caller that runs it directly
}

func (g *grammarProcessor) NewSequence() LogitsProcessor { return g.c.NewProcessor() }

func (g *grammarProcessor) Process(logits []float32, context []int) {
	if g.p == nil {
		g.p = g.c.NewProcessor()
	}
	g.p.Process(logits, context)
}

// GrammarVocab returns the generator's vocabulary for constrained
// decoding: every token's bytes (from its tokenizer), the model's logits
// size and the EOS ids. It is built once (a fraction of a second for a
// 150k vocabulary) and shared.
func (g *Generator) GrammarVocab() (*grammar.Vocab, error) {
	g.vocabMu.Lock()
	defer g.vocabMu.Unlock()
	if g.vocab != nil {
		return g.vocab, nil
	}
	tok, ok := g.Tokenizer.(*tokenizer.Tokenizer)
	if !ok {
		return nil, errors.New("constrained decoding needs the zoo's tokenizer (its tokens' bytes)")
	}
	if len(g.EOS) == 0 {
		return nil, errors.New("constrained decoding needs an end-of-sequence token, and the generator has none")
	}
	v, err := grammar.VocabFromTokenizer(tok, g.EOS, g.Model.VocabSize())
	if err != nil {
		return nil, err
	}
	g.vocab = v
	return v, nil
}

// JSONSchema compiles a JSON schema for the generator's vocabulary; pass
// the result to Grammar. The error of a schema the compiler refuses is a
// *grammar.Error naming the keyword and its JSON pointer.
func (g *Generator) JSONSchema(schema []byte, opts *grammar.Options) (*grammar.Constraint, error) {
	v, err := g.GrammarVocab()
	if err != nil {
		return nil, err
	}
	gr, err := grammar.CompileSchema(schema, opts)
	if err != nil {
		return nil, fmt.Errorf("JSON schema: %w", err)
	}
	return grammar.NewConstraint(gr, v), nil
}
