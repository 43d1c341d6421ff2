package serve

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo/generate"
)

// TestServeAdapters: a model served with LoRA adapters lists BASE and
// BASE:NAME, a request's model picks the adapter (or none), and an
// unknown adapter is a 404 naming the model.
func TestServeAdapters(t *testing.T) {
	// A model of its own: the shared ones must stay without adapters.
	g, _, err := LoadModel(context.Background(), kjvTiny)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj","v_proj"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Model.Params().NewLoRA("bold", cfg, rand.New(rand.NewPCG(1, 2)), 0.5); err != nil {
		t.Fatal(err)
	}
	s, err := New(g, Options{Name: "kjv-tiny", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer func() { hs.Close(); s.Close() }()

	_, body := do(t, hs, http.MethodGet, "/v1/models", nil, nil)
	list := decode[struct{ Data []struct{ ID string } }](t, body)
	if len(list.Data) != 2 || list.Data[0].ID != "kjv-tiny" || list.Data[1].ID != "kjv-tiny:bold" {
		t.Fatalf("models %s", body)
	}
	if resp, _ := do(t, hs, http.MethodGet, "/v1/models/kjv-tiny:bold", nil, nil); resp.StatusCode != 200 {
		t.Errorf("GET /v1/models/kjv-tiny:bold: %d", resp.StatusCode)
	}
	text := func(model string) string {
		_, body := post(t, hs, "/v1/completions", `{"model": "`+model+`", "prompt": "In the beginning", "max_tokens": 8, "temperature": 0}`)
		c := decode[struct {
			Model   string
			Choices []struct{ Text string }
		}](t, body)
		if len(c.Choices) != 1 || c.Model != model {
			t.Fatalf("model %s: %s", model, body)
		}
		return c.Choices[0].Text
	}
	base, adapted := text("kjv-tiny"), text("kjv-tiny:bold")
	if base == adapted {
		t.Errorf("the adapter changed nothing: %q", base)
	}
	// The base as served equals the model without an adapter.
	ids, _ := g.Encode("In the beginning")
	if ref := alone(t, load(t, kjvTiny).g, ids, 8); ref.Text != base {
		t.Errorf("base %q, the model without adapters %q", base, ref.Text)
	}
	resp, body := post(t, hs, "/v1/completions", `{"model": "kjv-tiny:other", "prompt": "x", "max_tokens": 1}`)
	wantError(t, resp, body, 404, "model")
	// Embeddings too: the base's without an adapter, the adapter's with.
	embed := func(model string) []float64 {
		_, body := post(t, hs, "/v1/embeddings", `{"model": "`+model+`", "input": "In the beginning"}`)
		e := decode[struct {
			Model string
			Data  []struct{ Embedding []float64 }
		}](t, body)
		if len(e.Data) != 1 || e.Model != model {
			t.Fatalf("embeddings for %s: %s", model, body)
		}
		return e.Data[0].Embedding
	}
	eb, ea := embed("kjv-tiny"), embed("kjv-tiny:bold")
	ref, err := generate.Embed(context.Background(), load(t, kjvTiny).g.Model, [][]int{ids}, generate.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(eb, ref[0], func(a float64, b float32) bool { return math.Abs(a-float64(b)) < 1e-6 }) {
		t.Errorf("the base's embedding differs from the model's without adapters")
	}
	if slices.Equal(eb, ea) {
		t.Errorf("the adapter does not change the embedding")
	}
}
