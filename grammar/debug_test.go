package grammar

import (
	"testing"
	"time"
)

func TestDebugWalks(t *testing.T) {
	tok, v := qwen3(t)
	g, err := CompileSchema([]byte(benchSchema), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(g, "trie nodes", v.TrieNodes())
	c := NewConstraint(g, v)
	steps := benchSteps(t, tok, v)
	m := c.NewMatcher()
	var total time.Duration
	for k, id := range steps {
		t0 := time.Now()
		mask := m.Mask()
		d := time.Since(t0)
		total += d
		fr := m.m.tab.frames[m.m.cores[0]]
		if d > 50*time.Microsecond {
			t.Logf("step %d %q state %d rule %s: %v, %d allowed", k, v.Token(id), fr.state, g.names[g.rule[fr.state]], d, Count(mask))
		}
		m.Accept(id)
	}
	t.Log("total", total)
}

func BenchmarkWalkString(b *testing.B) {
	_, v := qwen3(b)
	g, err := CompileSchema([]byte(`{"type":"string"}`), nil)
	if err != nil {
		b.Fatal(err)
	}
	c := NewConstraint(g, v)
	m := c.NewMatcher()
	m.Accept(int(mustID(b, v, `"`)))
	fr := m.m.tab.frames[m.m.cores[0]]
	b.Log(g, fr)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.walk(-1, fr.state)
	}
}

func mustID(t testing.TB, v *Vocab, s string) int {
	for id := range v.tokens {
		if string(v.tokens[id]) == s {
			return id
		}
	}
	t.Fatalf("no token %q", s)
	return 0
}

func BenchmarkTrieScan(b *testing.B) {
	_, v := qwen3(b)
	b.ResetTimer()
	s := 0
	for i := 0; i < b.N; i++ {
		for j := range v.tb {
			s += int(v.tdepth[j]) + int(v.tb[j]) + int(v.tend[j])
		}
	}
	b.Log(s)
}

func TestTextStats(t *testing.T) {
	_, v := qwen3(t)
	clean, cleanTop := 0, 0
	for i := range v.tb {
		if v.textNeed[i] != noText {
			clean++
		}
	}
	// nodes a free-text walk visits: those not inside a clean subtree
	// (a node is visited if no ancestor is clean).
	visited := 0
	for i := 0; i < len(v.tb); {
		visited++
		if v.textNeed[i] != noText {
			cleanTop++
			i = int(v.tend[i])
			continue
		}
		i++
	}
	t.Logf("nodes %d clean %d visited %d cleanTop %d", len(v.tb), clean, visited, cleanTop)
}
