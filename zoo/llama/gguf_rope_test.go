package llama

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
)

// TestRopeFreqsDivisors: the rope_freqs.weight divisors written for
// Llama 3.1's scaling give back its table: the kept and divided pairs
// exactly, the smoothed ones within one float32 ulp.
func TestRopeFreqsDivisors(t *testing.T) {
	r := loaders.RoPE{Type: "llama3", Theta: 5e5, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192, AttentionFactor: 1}
	const dim = 128
	scaled, err := layers.NewScaledRoPE(dim, r)
	if err != nil {
		t.Fatal(err)
	}
	base := layers.NewRoPE(dim, r.Theta, 1).InvFreq
	exact, smoothed := 0, 0
	for i := range base {
		want := scaled.InvFreq[i]
		d := divisor(base[i], want)
		got := base[i] / d
		if got == want {
			exact++
		}
		if want != base[i] && want != base[i]/8 {
			smoothed++
		} else if got != want {
			t.Errorf("pair %d (kept or divided): %g, want %g", i, got, want)
		}
		if ulp := math.Nextafter32(want, float32(math.Inf(1))) - want; math.Abs(float64(got-want)) > float64(ulp) {
			t.Errorf("pair %d: %g, want %g (over one ulp)", i, got, want)
		}
	}
	if smoothed == 0 {
		t.Fatal("no smoothed pair: the case tests nothing")
	}
	t.Logf("%d of %d pairs exact, %d smoothed", exact, len(base), smoothed)
}

// TestGGUFRoPEConfig reads rope scaling as files from llama.cpp's
// converter carry it, and refuses what HF's rope has no counterpart for,
// naming the key.
func TestGGUFRoPEConfig(t *testing.T) {
	f32s := func(v ...float32) []byte {
		b := make([]byte, 0, 4*len(v))
		for _, x := range v {
			u := math.Float32bits(x)
			b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
		}
		return b
	}
	freqs := gguf.WriteTensor{Name: "rope_freqs.weight", Dims: []uint64{3}, Type: gguf.TypeF32, Data: f32s(1, 2.5, 8)}
	cases := []struct {
		name    string
		meta    []gguf.KV
		tensors []gguf.WriteTensor
		want    map[string]any // expected fields, as JSON would decode them
		errHas  string
	}{
		{"none", nil, nil, map[string]any{}, ""},
		{"legacy linear", []gguf.KV{{Key: "llama.rope.scale_linear", Value: float32(4)}}, nil,
			map[string]any{"rope_scaling": map[string]any{"rope_type": "linear", "factor": 4.0}}, ""},
		{"linear", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "linear"}, {Key: "llama.rope.scaling.factor", Value: float32(8)}}, nil,
			map[string]any{"rope_scaling": map[string]any{"rope_type": "linear", "factor": 8.0}}, ""},
		{"yarn", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "yarn"}, {Key: "llama.rope.scaling.factor", Value: float32(4)},
			{Key: "llama.rope.scaling.original_context_length", Value: uint32(32768)}, {Key: "llama.rope.scaling.yarn_beta_fast", Value: float32(16)},
			{Key: "llama.rope.scaling.yarn_attn_factor", Value: float32(1.5)}, {Key: "llama.rope.scaling.yarn_ext_factor", Value: float32(1)}}, nil,
			map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768.0, "beta_fast": 16.0, "attention_factor": 1.5}}, ""},
		{"rope_freqs", nil, []gguf.WriteTensor{freqs}, map[string]any{"rope_freqs": []any{1.0, 2.5, 8.0}}, ""},
		{"yarn without original context", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "yarn"}, {Key: "llama.rope.scaling.factor", Value: float32(4)}}, nil, nil,
			"llama.rope.scaling.original_context_length"},
		{"yarn log multiplier", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "yarn"}, {Key: "llama.rope.scaling.factor", Value: float32(4)},
			{Key: "llama.rope.scaling.original_context_length", Value: uint32(4096)}, {Key: "llama.rope.scaling.yarn_log_multiplier", Value: float32(0.1)}}, nil, nil,
			"llama.rope.scaling.yarn_log_multiplier"},
		{"longrope", []gguf.KV{{Key: "llama.rope.scaling.type", Value: "longrope"}}, nil, nil, `llama.rope.scaling.type "longrope" is not supported`},
		{"rope_freqs of two dimensions", nil, []gguf.WriteTensor{{Name: "rope_freqs.weight", Dims: []uint64{2, 2}, Type: gguf.TypeF32, Data: f32s(1, 2, 3, 4)}}, nil, "rope_freqs.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.gguf")
			var buf bytes.Buffer
			if err := gguf.Write(&buf, append([]gguf.KV{{Key: "general.architecture", Value: "llama"}}, c.meta...), c.tensors); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg := zoo.ConfigMap{}
			err = ggufRoPEConfig(zoo.GGUFMeta{File: f, Arch: "llama"}, cfg)
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("error %v, want one mentioning %s", err, c.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(cfg)
			var got map[string]any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("config %v, want %v", got, c.want)
			}
			// What it reads resolves.
			if _, err := resolveRoPE(zoo.ConfigMap(got)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
