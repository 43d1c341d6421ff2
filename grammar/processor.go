package grammar

// Processor constrains one sequence's generation to a Constraint's
// grammar. Its Process method is a generate.LogitsProcessor: it reads the
// tokens chosen since its last call from the end of the context, then sets
// the logits of the tokens the grammar does not allow next to -Inf (EOS
// only once the text is complete). A token it did not allow (another
// processor's choice, or an EOS past IgnoreEOS) stops the constraint:
// from then on only EOS is allowed. Use one Processor per sequence
// (zoo/generate's Grammar makes them).
type Processor struct {
	c      *Constraint
	m      *TokenMatcher
	base   int // the context's length at the first call (the prompt); -1 before
	seen   int // tokens after base read so far
	broken bool
}

// NewProcessor starts a sequence's processor.
func (c *Constraint) NewProcessor() *Processor {
	return &Processor{c: c, m: c.NewMatcher(), base: -1}
}

// Matcher returns the sequence's run of the grammar.
func (p *Processor) Matcher() *TokenMatcher { return p.m }

// Broken reports whether a token the grammar did not allow was chosen.
func (p *Processor) Broken() bool { return p.broken }

// Process masks logits for the next token; context is the prompt
// followed by the tokens chosen so far.
func (p *Processor) Process(logits []float32, context []int) {
	if p.base < 0 || len(context) < p.base+p.seen {
		// First call, or a context that is not this one's continuation
		// (a new generation): start over.
		p.base, p.seen, p.broken = len(context), 0, false
		p.m = p.c.NewMatcher()
	}
	for ; p.base+p.seen < len(context); p.seen++ {
		if !p.broken && !p.m.Accept(context[p.base+p.seen]) {
			p.broken = true
		}
	}
	if p.broken {
		for i := range logits {
			if !p.c.v.isEOS(i) {
				logits[i] = negInf
			}
		}
		return
	}
	p.m.Apply(logits)
}
