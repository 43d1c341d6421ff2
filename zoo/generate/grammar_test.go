package generate

import (
	"context"
	"encoding/json"
	"testing"
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
