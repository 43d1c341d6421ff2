package generate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/gozoo/gozoo/graphs"
)

const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":120},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3}},"required":["name","age","tags"]}`

// TestJSONSchemaGeneration: random weights, sampled at temperature 1,
// still give JSON that validates, ended by EOS.
func TestJSONSchemaGeneration(t *testing.T) {
	for _, dir := range []string{"../../testdata/models/qwen3-tiny", "../../testdata/models/kjv-tiny"} {
		g, err := Load(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := g.JSONSchema([]byte(personSchema), nil)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := g.JSONSchema([]byte(personSchema), nil); err != nil || again != c {
			t.Errorf("the same schema again is not the cached constraint: %v", err)
		}
		prompt, _ := g.Encode("A person:")
		done := 0
		for seed := uint64(0); seed < 6; seed++ {
			// Top-k runs after the constraint: it keeps the 5 most likely
			// tokens the grammar allows.
			res, err := g.Generate(context.Background(), prompt, Options{MaxTokens: 400, Sampling: Sampling{DoSample: true, Temperature: 1, TopK: 5, Seed: seed, Extra: []LogitsProcessor{Grammar(c)}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.StopReason != StopEOS {
				t.Logf("%s seed %d: stopped by %s after %d tokens: %q", dir, seed, res.StopReason, len(res.Tokens), res.Text)
				continue
			}
			done++
			var v struct {
				Name *string  `json:"name"`
				Age  *int     `json:"age"`
				Tags []string `json:"tags"`
			}
			if err := json.Unmarshal([]byte(res.Text), &v); err != nil || v.Name == nil || v.Age == nil || v.Tags == nil {
				t.Errorf("%s seed %d: %q: %v", dir, seed, res.Text, err)
				continue
			}
			if len([]rune(*v.Name)) > 20 || *v.Age < 0 || *v.Age > 120 || len(v.Tags) > 3 {
				t.Errorf("%s seed %d: %q breaks the schema", dir, seed, res.Text)
			}
			t.Logf("%s seed %d: %d tokens: %s", dir, seed, len(res.Tokens), res.Text)
		}
		if done == 0 {
			t.Errorf("%s: no generation ended", dir)
		}
		g.Close()
	}
}

// TestJSONSchemaEngine: an Engine request with N samples gives each
// sample its own automaton, so every sample is valid JSON.
func TestJSONSchemaEngine(t *testing.T) {
	g, err := Load("../../testdata/models/qwen3-tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := g.JSONSchema([]byte(`{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":1,"maxItems":3}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, g, EngineOptions{})
	prompt, _ := g.Encode("Numbers:")
	res, err := e.GenerateBatch(context.Background(), []graphs.Input{graphs.IDs(prompt...)}, []Options{{N: 3, MaxTokens: 300, Sampling: Sampling{DoSample: true, Temperature: 1, Seed: 5, Extra: []LogitsProcessor{Grammar(c)}}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[0] {
		var v []int
		if r.StopReason != StopEOS || json.Unmarshal([]byte(r.Text), &v) != nil || len(v) < 1 || len(v) > 3 {
			t.Errorf("sample %d: %s %q", i, r.StopReason, r.Text)
		}
		for _, x := range v {
			if x < 0 || x > 9 {
				t.Errorf("sample %d: %q", i, r.Text)
			}
		}
	}
}
