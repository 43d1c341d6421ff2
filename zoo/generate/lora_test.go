package generate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
)

// TestEngineMixesAdapters: one engine generates greedily for prompts
// naming adapter a, adapter b and the bare base at once, and each
// generation equals the same one in an engine of its own. The three
// differ, so a sequence run with another's adapter would show.
func TestEngineMixesAdapters(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "golden", "llama_lora_qv")
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := loaders.ReadLoRA(filepath.Join(dir, "adapter"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Params().ApplyLoRA("a", a); err != nil {
		t.Fatal(err)
	}
	// b: a's factors with B negated, on q_proj only.
	cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["q_proj"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b := &loaders.LoRA{Config: cfg}
	for _, x := range a.Tensors {
		if strings.HasSuffix(x.Module, "q_proj") {
			if x.Factor == 'B' {
				x.Data = slices.Clone(x.Data)
				for i := range x.Data {
					x.Data[i] = -x.Data[i]
				}
			}
			b.Tensors = append(b.Tensors, x)
		}
	}
	if _, err := m.Params().ApplyLoRA("b", b); err != nil {
		t.Fatal(err)
	}
	g := &Generator{Model: m}
	prompt := graphs.IDs(5, 17, 250, 3, 99, 42)
	names := []string{"a", "b", NoAdapter, ""}
	opts := make([]Options, len(names))
	prompts := make([]graphs.Input, len(names))
	for i, n := range names {
		opts[i], prompts[i] = Options{MaxTokens: 8, IgnoreEOS: true, Adapter: n}, prompt
	}
	ctx := context.Background()
	together, err := newEngine(t, g, EngineOptions{}).GenerateBatch(ctx, prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	var alone [][]int
	for i := range names {
		r, err := newEngine(t, g, EngineOptions{}).GenerateBatch(ctx, prompts[i:i+1], opts[i:i+1])
		if err != nil {
			t.Fatal(err)
		}
		alone = append(alone, r[0][0].Tokens)
		if got := together[i][0].Tokens; !slices.Equal(got, r[0][0].Tokens) {
			t.Errorf("adapter %q: %v in a shared engine, %v alone", names[i], got, r[0][0].Tokens)
		}
	}
	// "" is the first adapter; a, b and the base differ.
	if !slices.Equal(alone[0], alone[3]) || slices.Equal(alone[0], alone[1]) || slices.Equal(alone[0], alone[2]) || slices.Equal(alone[1], alone[2]) {
		t.Errorf("generations by adapter a, b, base, default: %v", alone)
	}
	if _, err := newEngine(t, g, EngineOptions{}).Submit(ctx, prompt, Options{Adapter: "c"}); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("an unknown adapter: %v", err)
	}
}
