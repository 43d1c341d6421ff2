package loaders

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestRoPEFieldsResolve(t *testing.T) {
	def := func(theta float64) RoPE { return RoPE{Type: "default", Theta: theta, Factor: 1, AttentionFactor: 1} }
	yarnAF := 0.1*math.Log(4) + 1
	cases := []struct {
		name      string
		json      string
		layerType string
		want      RoPE
		errHas    string
	}{
		{"absent: default theta", `{}`, "", def(10000), ""},
		{"legacy theta", `{"rope_theta": 1e6, "rope_scaling": null}`, "", def(1e6), ""},
		{"legacy linear scaling", `{"rope_theta": 1e6, "rope_scaling": {"type": "linear", "factor": 4}}`, "",
			RoPE{Type: "linear", Theta: 1e6, Factor: 4, AttentionFactor: 1}, ""},
		{"v5 flat", `{"rope_parameters": {"rope_theta": 5e5, "rope_type": "default"}}`, "full_attention", def(5e5), ""},
		{"v5 per layer type", `{"rope_parameters": {"full_attention": {"rope_theta": 1e6, "rope_type": "linear", "factor": 8}, "sliding_attention": {"rope_theta": 1e4, "rope_type": "default"}}}`, "sliding_attention", def(1e4), ""},
		{"v5 missing layer type", `{"rope_parameters": {"full_attention": {"rope_theta": 1e6}}}`, "sliding_attention", RoPE{}, "sliding_attention"},

		// llama3, both serialisations and a per-layer-type dict.
		{"legacy llama3", `{"rope_theta": 5e5, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 32}}`, "",
			RoPE{Type: "llama3", Theta: 5e5, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 32, AttentionFactor: 1}, ""},
		{"v5 llama3", `{"rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 32}}`, "",
			RoPE{Type: "llama3", Theta: 5e5, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 32, AttentionFactor: 1}, ""},
		{"llama3 original defaults to max_position_embeddings", `{"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}}`, "",
			RoPE{Type: "llama3", Theta: 10000, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 64, AttentionFactor: 1}, ""},
		{"top-level original wins in the flat case", `{"original_max_position_embeddings": 16, "rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 32}}`, "",
			RoPE{Type: "llama3", Theta: 10000, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 16, AttentionFactor: 1}, ""},
		{"llama3 without factor", `{"rope_scaling": {"rope_type": "llama3", "low_freq_factor": 1, "high_freq_factor": 4, "original_max_position_embeddings": 32}}`, "", RoPE{}, `rope_scaling: rope type "llama3" needs factor`},
		{"llama3 without low_freq_factor", `{"rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4}}`, "", RoPE{}, "needs low_freq_factor"},
		{"llama3 without high_freq_factor", `{"rope_parameters": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 1}}`, "", RoPE{}, "rope_parameters: rope type \"llama3\" needs high_freq_factor"},
		{"llama3 bands reversed", `{"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1}}`, "", RoPE{}, "low_freq_factor < high_freq_factor"},

		// yarn.
		{"legacy yarn", `{"rope_theta": 1e6, "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 16}}`, "",
			RoPE{Type: "yarn", Theta: 1e6, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: yarnAF}, ""},
		{"v5 yarn, every key", `{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4, "original_max_position_embeddings": 16, "beta_fast": 16, "beta_slow": 2, "attention_factor": 1.5, "truncate": false}}`, "",
			RoPE{Type: "yarn", Theta: 1e6, Factor: 4, OriginalMaxPositions: 16, BetaFast: 16, BetaSlow: 2, Truncate: false, AttentionFactor: 1.5}, ""},
		{"yarn per layer type", `{"rope_parameters": {"full_attention": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4, "original_max_position_embeddings": 16}, "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}`, "full_attention",
			RoPE{Type: "yarn", Theta: 1e6, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: yarnAF}, ""},
		{"yarn mscale", `{"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 16, "mscale": 0.707, "mscale_all_dim": 0.707}}`, "",
			RoPE{Type: "yarn", Theta: 10000, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: 1}, ""},
		{"yarn zero and null betas mean the defaults", `{"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 16, "beta_fast": 0, "beta_slow": null, "truncate": null}}`, "",
			RoPE{Type: "yarn", Theta: 10000, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: false, AttentionFactor: yarnAF}, ""},
		{"yarn null factor: max / original", `{"rope_scaling": {"rope_type": "yarn", "factor": null, "original_max_position_embeddings": 16}}`, "",
			RoPE{Type: "yarn", Theta: 10000, Factor: 4, OriginalMaxPositions: 16, BetaFast: 32, BetaSlow: 1, Truncate: true, AttentionFactor: yarnAF}, ""},
		{"yarn without factor", `{"rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 16}}`, "", RoPE{}, `rope type "yarn" needs factor`},
		{"yarn negative attention_factor", `{"rope_scaling": {"rope_type": "yarn", "factor": 4, "attention_factor": -1}}`, "", RoPE{}, "rope_scaling.attention_factor"},
		{"yarn truncate not a bool", `{"rope_scaling": {"rope_type": "yarn", "factor": 4, "truncate": "yes"}}`, "", RoPE{}, "rope_scaling.truncate"},

		// dynamic.
		{"legacy dynamic", `{"rope_scaling": {"type": "dynamic", "factor": 2}}`, "",
			RoPE{Type: "dynamic", Theta: 10000, Factor: 2, MaxPositions: 64, AttentionFactor: 1}, ""},
		{"v5 dynamic", `{"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6, "factor": 2}}`, "",
			RoPE{Type: "dynamic", Theta: 1e6, Factor: 2, MaxPositions: 64, AttentionFactor: 1}, ""},
		{"dynamic without factor", `{"rope_scaling": {"type": "dynamic"}}`, "", RoPE{}, `rope type "dynamic" needs factor`},
		{"linear with null factor", `{"rope_scaling": {"type": "linear", "factor": null}}`, "", RoPE{}, `rope type "linear" needs factor`},

		{"unsupported type", `{"rope_scaling": {"rope_type": "longrope", "factor": 4}}`, "", RoPE{}, `rope_scaling: rope type "longrope" is not supported (supported: default, linear, dynamic, llama3, yarn)`},
		{"unsupported type per layer", `{"rope_parameters": {"full_attention": {"rope_type": "su"}}}`, "full_attention", RoPE{}, `rope_parameters.full_attention: rope type "su" is not supported`},
		{"partial rotary", `{"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}`, "", RoPE{}, "partial_rotary_factor"},
		{"factor not a number", `{"rope_scaling": {"type": "linear", "factor": "4"}}`, "", RoPE{}, "rope_scaling.factor"},
		{"rope_freqs", `{"rope_theta": 5e5, "rope_freqs": [1, 2.5, 8]}`, "",
			RoPE{Type: "default", Theta: 5e5, Factor: 1, AttentionFactor: 1, FreqFactors: []float64{1, 2.5, 8}}, ""},
		{"rope_freqs not positive", `{"rope_freqs": [1, 0]}`, "", RoPE{}, "rope_freqs[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f RoPEFields
			if err := json.Unmarshal([]byte(c.json), &f); err != nil {
				t.Fatal(err)
			}
			got, err := f.Resolve(c.layerType, 10000, 64)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("error %v, want one mentioning %s", err, c.errHas)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}
