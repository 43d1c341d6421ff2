package grammar

import (
	"sync"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/tokenizer"
)

// qwen3VocabSize is Qwen3's logits length (config.json's vocab_size):
// more than the tokenizer's 151,669 ids.
const qwen3VocabSize = 151936

var (
	qwenOnce  sync.Once
	qwenTok   *tokenizer.Tokenizer
	qwenVocab *Vocab
	qwenErr   error
)

// qwen3 loads the Qwen3 tokenizer (Apache-2.0, vendored in testdata) and
// its Vocab, or skips when it is absent.
func qwen3(t testing.TB) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	dir := testfiles.Fixture(t, "tokenizers", "qwen3")
	qwenOnce.Do(func() {
		qwenTok, qwenErr = tokenizer.Load(dir)
		if qwenErr != nil {
			return
		}
		eos, _ := qwenTok.TokenID("<|im_end|>")
		eot, _ := qwenTok.TokenID("<|endoftext|>")
		qwenVocab, qwenErr = VocabFromTokenizer(qwenTok, []int{eos, eot}, qwen3VocabSize)
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok, qwenVocab
}

// benchSchema is a realistic response schema: strings (one with a
// pattern, one bounded), integers with bounds, an enum, an array of
// objects, optional properties.
const benchSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "score": {"type": "number", "minimum": 0, "maximum": 100},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "city"]
    },
    "active": {"type": "boolean"},
    "notes": {"type": ["string", "null"]}
  },
  "required": ["name", "age", "role", "tags", "active"]
}`

const benchDoc = `{"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "role": "editor", "score": 97.5, "tags": ["math", "engines", "poetry"], "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"}, "active": true, "notes": null}`

// benchSteps returns the token ids of benchDoc followed by EOS.
func benchSteps(b testing.TB, tok *tokenizer.Tokenizer, v *Vocab) []int {
	ids, err := tok.Encode(benchDoc, false)
	if err != nil {
		b.Fatal(err)
	}
	return append(ids, v.EOS()[0])
}

func BenchmarkMask(b *testing.B) {
	tok, v := qwen3(b)
	g, err := CompileSchema([]byte(benchSchema), nil)
	if err != nil {
		b.Fatal(err)
	}
	steps := benchSteps(b, tok, v)
	run := func(b *testing.B, fresh bool) {
		c := NewConstraint(g, v)
		if !fresh {
			// Warm: one pass fills the cache first.
			m := c.NewMatcher()
			for _, id := range steps {
				m.Mask()
				m.Accept(id)
			}
		}
		m := c.NewMatcher()
		k := 0
		h0, m0, _ := c.CacheStats()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if k == len(steps) {
				k = 0
				if fresh {
					c = NewConstraint(g, v)
				}
				m = c.NewMatcher()
			}
			mask := m.Mask()
			id := steps[k]
			if mask[id>>6]>>(id&63)&1 == 0 {
				b.Fatalf("step %d: token %d (%q) not allowed", k, id, v.Token(id))
			}
			if !m.Accept(id) {
				b.Fatalf("step %d: token %d refused", k, id)
			}
			k++
		}
		b.StopTimer()
		h, miss, bytes := c.CacheStats()
		if !fresh {
			h, miss = h-h0, miss-m0
		}
		b.ReportMetric(float64(h)/float64(max(h+miss, 1))*100, "hit%")
		b.ReportMetric(float64(bytes)/(1<<20), "cacheMiB")
		b.ReportMetric(float64(len(steps)), "steps/seq")
	}
	b.Run("warm", func(b *testing.B) { run(b, false) })
	b.Run("cold", func(b *testing.B) { run(b, true) })
	// serving: one Constraint from cold, three documents in turn (each
	// meets states the others did not), the cost amortized over b.N steps.
	b.Run("serving", func(b *testing.B) {
		var seqs [][]int
		for _, doc := range benchDocs {
			ids, err := tok.Encode(doc, false)
			if err != nil {
				b.Fatal(err)
			}
			seqs = append(seqs, append(ids, v.EOS()[0]))
		}
		c := NewConstraint(g, v)
		m := c.NewMatcher()
		q, k := 0, 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if k == len(seqs[q]) {
				q, k = (q+1)%len(seqs), 0
				m = c.NewMatcher()
			}
			id := seqs[q][k]
			if mask := m.Mask(); mask[id>>6]>>(id&63)&1 == 0 || !m.Accept(id) {
				b.Fatalf("doc %d step %d: token %q refused", q, k, v.Token(id))
			}
			k++
		}
		b.StopTimer()
		h, miss, bytes := c.CacheStats()
		b.ReportMetric(float64(h)/float64(max(h+miss, 1))*100, "hit%")
		b.ReportMetric(float64(bytes)/(1<<20), "cacheMiB")
	})
}

// benchDocs are documents for benchSchema of different shapes.
var benchDocs = []string{
	benchDoc,
	`{"name": "Grace Hopper", "age": 85, "role": "admin", "tags": ["navy", "cobol"], "active": false}`,
	`{
  "name": "Émilie du Châtelet",
  "age": 42,
  "email": "emilie.chatelet@sciences.fr",
  "role": "viewer",
  "score": 88.25,
  "tags": ["physics", "translation", "Newton", "énergie", "philosophy"],
  "address": {"street": "Rue de Cirey", "city": "Cirey-sur-Blaise"},
  "active": true,
  "notes": "Wrote \"Institutions de physique\" (1740)\nand translated the Principia."
}`,
}

// BenchmarkMaskWalk is the cost of one state's first mask (a cache
// miss): a walk of the trie.
func BenchmarkMaskWalk(b *testing.B) {
	tok, v := qwen3(b)
	g, err := CompileSchema([]byte(benchSchema), nil)
	if err != nil {
		b.Fatal(err)
	}
	steps := benchSteps(b, tok, v)
	c := NewConstraint(g, v)
	// The states after these many tokens of benchDoc.
	for _, tc := range []struct {
		name string
		at   int
	}{{"start", 0}, {"after-brace-quote", 1}, {"in-bounded-string", 5}, {"in-pattern-string", 21}, {"in-string", 44}} {
		m := c.NewMatcher()
		for _, id := range steps[:tc.at] {
			m.Accept(id)
		}
		state := m.m.tab.frames[m.m.cores[0]].state
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.walk(-1, state)
			}
		})
	}
}

// BenchmarkApply is the processor's other cost: setting the logits of
// the tokens not allowed to -Inf (a cached mask).
func BenchmarkApply(b *testing.B) {
	tok, v := qwen3(b)
	g, err := CompileSchema([]byte(benchSchema), nil)
	if err != nil {
		b.Fatal(err)
	}
	steps := benchSteps(b, tok, v)
	c := NewConstraint(g, v)
	logits := make([]float32, qwen3VocabSize)
	for _, tc := range []struct {
		name string
		at   int
	}{{"few-allowed", 1}, {"in-string", 44}} {
		m := c.NewMatcher()
		for _, id := range steps[:tc.at] {
			m.Accept(id)
		}
		m.Mask()
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				m.Apply(logits)
			}
		})
	}
}
