package train_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// TestLoRATargetsEveryFamily: target_modules finds its modules by their
// last names in every layer of every family: the attention of a MoE
// model, the dense MLPs between its expert layers (experts themselves are
// no Linear modules), Gemma3's MLP, GPT-2's Conv1D projections.
func TestLoRATargetsEveryFamily(t *testing.T) {
	for _, c := range []struct {
		golden, targets string
		want            int
		has             string
	}{
		{"llama_mha_untied", `["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"]`, 2 * 7, "model.layers.1.mlp.down_proj"},
		{"qwen3_gqa_tied", `["q_proj","v_proj"]`, 3 * 2, "model.layers.2.self_attn.v_proj"},
		// decoder_sparse_step 2: layers 0 and 2 dense, 1 and 3 experts.
		{"qwen3_moe_step2_nonorm", `["q_proj","o_proj","gate_proj","up_proj","down_proj"]`, 4*2 + 2*3, "model.layers.2.mlp.gate_proj"},
		{"gemma3_sliding_mqa", `["gate_proj","up_proj","down_proj"]`, 6 * 3, "model.layers.5.mlp.up_proj"},
		{"smollm3_nope", `.*\.layers\.[13]\.self_attn\.(q|k)_proj`, 2 * 2, "model.layers.3.self_attn.k_proj"},
		{"gpt2_prefixed", `["c_attn","c_fc"]`, 3 * 2, "h.2.mlp.c_fc"},
	} {
		t.Run(c.golden, func(t *testing.T) {
			m, err := zoo.NewRandom(familytest.ParseConfig(t, testdata(t, "golden", c.golden)), 1)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":2,"target_modules":` + quoteIfRegex(c.targets) + `}`))
			if err != nil {
				t.Fatal(err)
			}
			ids := sequence(8, m.VocabSize())
			before, err := train.LossAndGradients(m, ids)
			if err != nil {
				t.Fatal(err)
			}
			a, err := m.Params().NewLoRA("a", cfg, rand.New(rand.NewPCG(1, 1)), 0.1)
			if err != nil {
				t.Fatal(err)
			}
			// The update reaches the forward, and each factor its gradient.
			after, err := train.LossAndGradients(m, ids)
			if err != nil {
				t.Fatal(err)
			}
			if after.Loss == before.Loss || len(after.Weights) != 2*len(a.Modules) {
				t.Errorf("loss %v -> %v, %d gradients for %d modules", before.Loss, after.Loss, len(after.Weights), len(a.Modules))
			}
			if len(a.Modules) != c.want || !strings.Contains(strings.Join(a.Modules, " "), c.has) {
				t.Errorf("%d modules, want %d with %s: %v", len(a.Modules), c.want, c.has, a.Modules)
			}
		})
	}
}

// quoteIfRegex makes a JSON string of a regular expression; a list stays.
func quoteIfRegex(s string) string {
	if strings.HasPrefix(s, "[") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"`
}

// TestLoRAGPT2Prefix: PEFT names GPT-2's modules by their path in
// GPT2LMHeadModel (transformer.h.0.attn.c_attn); gozoo declares them
// without the prefix. The same factors under either name give the same
// model.
func TestLoRAGPT2Prefix(t *testing.T) {
	cfgPath := testdata(t, "golden", "gpt2_prefixed")
	m, err := zoo.NewRandom(familytest.ParseConfig(t, cfgPath), 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":2,"target_modules":["c_attn"],"fan_in_fan_out":true}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Params().NewLoRA("a", cfg, rand.New(rand.NewPCG(3, 3)), 0.1)
	if err != nil {
		t.Fatal(err)
	}
	ids := sequence(8, m.VocabSize())
	want, err := train.LossAndGradients(m, ids)
	if err != nil {
		t.Fatal(err)
	}
	var prefixed []loaders.LoRATensor
	for _, x := range a.Tensors() {
		x.Name = strings.Replace(x.Name, loaders.LoRAPrefix, loaders.LoRAPrefix+"transformer.", 1)
		x.Module = "transformer." + x.Module
		prefixed = append(prefixed, x)
	}
	fresh, err := zoo.NewRandom(familytest.ParseConfig(t, cfgPath), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fresh.Params().ApplyLoRA("b", &loaders.LoRA{Config: cfg, Tensors: prefixed})
	if err != nil {
		t.Fatal(err)
	}
	if b.Modules[0] != "transformer.h.0.attn.c_attn" {
		t.Errorf("modules %v", b.Modules)
	}
	got, err := train.LossAndGradients(fresh, ids)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != want.Loss {
		t.Errorf("loss %v with PEFT's names, %v with the declared ones", got.Loss, want.Loss)
	}
	if _, ok := got.Weights["base_model.model.transformer.h.1.attn.c_attn.lora_B.weight"]; !ok {
		t.Errorf("gradients named %v", got.Names)
	}
}
