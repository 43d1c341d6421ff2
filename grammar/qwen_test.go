package grammar

import (
	"math/rand/v2"
	"testing"
)

// TestQwen3Masks checks masks over Qwen3's real vocabulary (151,936 ids,
// byte-level BPE with partial UTF-8 tokens) against reading every token's
// bytes, along random walks, and that the walks end in valid JSON.
func TestQwen3Masks(t *testing.T) {
	_, v := qwen3(t)
	schemas := []walkSchema{
		{"bench", benchSchema},
		{"json_object", ""},
		{"short strings", `{"type":"array","items":{"type":"string","minLength":1,"maxLength":3},"maxItems":4}`},
		{"recursive", `{"type":"object","properties":{"name":{"type":"string","maxLength":4},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["name","next"]}`},
		{"patterns", `{"type":"array","items":{"anyOf":[{"type":"string","pattern":"^[a-z0-9.]+@[a-z]+$"},{"type":"string","pattern":"^\\d+[a-f ]*$"}]},"maxItems":3}`},
		{"numbers", `{"type":"array","items":{"anyOf":[{"type":"integer","minimum":-20,"maximum":300},{"type":"number","exclusiveMinimum":0.5,"maximum":2}]}}`},
	}
	steps := 12
	if testing.Short() {
		steps = 4
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range schemas {
		c := NewConstraint(compileWalk(t, s), v)
		tm := c.NewMatcher()
		var text []byte
		for step := 0; step < steps && !tm.Done(); step++ {
			got, want := tm.Mask(), bruteMask(tm)
			if !slicesEqual(got, want) {
				var extra, missing []uint64
				for i := range got {
					extra = append(extra, got[i]&^want[i])
					missing = append(missing, want[i]&^got[i])
				}
				t.Fatalf("%s: after %q: mask also allows %v, misses %v", s.name, text, tokStrings(v, allowedIDs(extra)), tokStrings(v, allowedIDs(missing)))
			}
			id := pick(rng, v, allowedIDs(got))
			tm.Accept(id)
			text = append(text, v.Token(id)...)
		}
	}
	if !testing.Short() {
		for i, s := range schemas {
			runWalks(t, s, v, 6, 300, uint64(i))
		}
	}
}

// TestQwen3BenchDoc checks the masks along benchDoc's own tokens (a
// bounded string, a pattern, enums, numbers) against reading every
// token's bytes.
func TestQwen3BenchDoc(t *testing.T) {
	if testing.Short() {
		t.Skip("brute-force masks over 151,936 tokens")
	}
	tok, v := qwen3(t)
	c := NewConstraint(compileWalk(t, walkSchema{"bench", benchSchema}), v)
	tm := c.NewMatcher()
	steps := benchSteps(t, tok, v)
	for k, id := range steps[:min(len(steps), 32)] {
		if got, want := tm.Mask(), bruteMask(tm); !slicesEqual(got, want) {
			t.Fatalf("step %d (%q): masks differ", k, v.Token(id))
		}
		tm.Accept(id)
	}
}
