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
// *grammar.Error naming the keyword and its JSON pointer. The generator
// keeps the last constraints it made (constraintCacheSize), so a schema
// that comes again (a server's clients send the same few) reuses its
// compiled grammar and the masks already computed.
func (g *Generator) JSONSchema(schema []byte, opts *grammar.Options) (*grammar.Constraint, error) {
	return g.constraint("schema", schema, opts, func(o *grammar.Options) (*grammar.Grammar, error) {
		gr, err := grammar.CompileSchema(schema, o)
		if err != nil {
			return nil, fmt.Errorf("JSON schema: %w", err)
		}
		return gr, nil
	})
}

// JSONObject is the constraint of any JSON object (response_format
// json_object), cached as JSONSchema's are.
func (g *Generator) JSONObject(opts *grammar.Options) (*grammar.Constraint, error) {
	return g.constraint("json_object", nil, opts, grammar.JSONObject)
}

// constraintCacheSize is how many constraints a generator keeps.
const constraintCacheSize = 32

type cachedConstraint struct {
	key string
	c   *grammar.Constraint
}

func (g *Generator) constraint(kind string, schema []byte, opts *grammar.Options, compile func(*grammar.Options) (*grammar.Grammar, error)) (*grammar.Constraint, error) {
	v, err := g.GrammarVocab()
	if err != nil {
		return nil, err
	}
	o := grammar.Options{}
	if opts != nil {
		o = *opts
	}
	key := fmt.Sprintf("%s\x00%+v\x00%s", kind, o, schema)
	g.vocabMu.Lock()
	for i, e := range g.constraints {
		if e.key == key {
			// Most recent first.
			copy(g.constraints[1:i+1], g.constraints[:i])
			g.constraints[0] = e
			g.vocabMu.Unlock()
			return e.c, nil
		}
	}
	g.vocabMu.Unlock()
	gr, err := compile(&o)
	if err != nil {
		return nil, err
	}
	c := grammar.NewConstraint(gr, v)
	g.vocabMu.Lock()
	g.constraints = append([]cachedConstraint{{key, c}}, g.constraints...)
	if len(g.constraints) > constraintCacheSize {
		g.constraints = g.constraints[:constraintCacheSize]
	}
	g.vocabMu.Unlock()
	return c, nil
}
