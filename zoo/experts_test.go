package zoo_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nlpodyssey/safetensors"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/simd"
	"github.com/gozoo/gozoo/layers"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// tinyMoE is a two-layer qwen3_moe config with 4 experts of width 8.
const tinyMoE = `{"model_type": "qwen3_moe", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
	"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
	"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "norm_topk_prob": true,
	"mlp_only_layers": [], "max_position_embeddings": 64, "eos_token_id": 1}`

// rawView is a safetensors tensor given by its bytes.
type rawView struct {
	dtype safetensors.DType
	shape []int
	data  []byte
}

func (v rawView) DType() safetensors.DType { return v.dtype }
func (v rawView) Shape() []uint64 {
	s := make([]uint64, len(v.shape))
	for i, d := range v.shape {
		s[i] = uint64(d)
	}
	return s
}
func (v rawView) DataLen() uint64 { return uint64(len(v.data)) }
func (v rawView) Data() []byte    { return v.data }

// encode stores float32 values as F32 or BF16 (truncated: both layouts
// of a case get the same bytes, which is all the tests compare).
func encode(dtype safetensors.DType, vals []float32) []byte {
	if dtype == safetensors.BF16 {
		out := make([]byte, 2*len(vals))
		for i, x := range vals {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(math.Float32bits(x)>>16))
		}
		return out
	}
	out := make([]byte, 4*len(vals))
	for i, x := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

// writeMoECheckpoint writes the tensors of a random tinyMoE model into a
// new folder, the experts as layout has them: "per-expert"
// (experts.<e>.<proj>.weight), "stacked" (experts.<proj> [E, out, in]) or
// "fused" (v5's experts.gate_up_proj [E, 2·inter, hidden] and a stacked
// down_proj). edit may change the tensors before they are written.
func writeMoECheckpoint(t *testing.T, layout string, dtype safetensors.DType, edit func(map[string]rawView)) string {
	t.Helper()
	return writeMoEConfig(t, tinyMoE, layout, dtype, edit)
}

// writeMoEConfig is writeMoECheckpoint for another qwen3_moe config.
func writeMoEConfig(t *testing.T, config, layout string, dtype safetensors.DType, edit func(map[string]rawView)) string {
	t.Helper()
	cfg, err := zoo.ParseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	m, err := zoo.NewRandom(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]rawView{}
	for _, p := range m.Params().All() {
		vals := p.Float32s()
		prefix, isStack := strings.CutSuffix(p.Name, ".experts.gate_proj")
		switch {
		case len(p.Parts) == 0:
			views[p.Name] = rawView{dtype, p.Shape, encode(dtype, vals)}
		case layout == "per-expert":
			for i, part := range p.Parts {
				q := p.Part(i, part)
				views[part] = rawView{dtype, q.Shape, encode(dtype, q.Float32s())}
			}
		case layout == "fused" && isStack:
			up, _ := m.Params().Get(prefix + ".experts.up_proj")
			E, n := p.Shape[0], len(vals)/p.Shape[0]
			var fused []float32
			for e := 0; e < E; e++ {
				fused = append(fused, vals[e*n:(e+1)*n]...)
				fused = append(fused, up.Float32s()[e*n:(e+1)*n]...)
			}
			views[prefix+".experts.gate_up_proj"] = rawView{dtype, []int{E, 2 * p.Shape[1], p.Shape[2]}, encode(dtype, fused)}
		case layout == "fused" && strings.HasSuffix(p.Name, ".experts.up_proj"):
		default:
			views[p.Name] = rawView{dtype, p.Shape, encode(dtype, vals)}
		}
	}
	if edit != nil {
		edit(views)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := safetensors.SerializeToWriter(views, nil, f); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFloatExpertsCoded: a float checkpoint's experts are coded in 12 or
// 28 bits when a graph binds them, every expert of a stack, not only those
// a token routes to, wherever a dense matrix of the same checkpoint is
// coded: the model gives the same logits as with its experts stacked.
func TestFloatExpertsCoded(t *testing.T) {
	// Experts of 64x512 values, 64 KB in BF16: as large as decode packs.
	wide := strings.NewReplacer(`"hidden_size": 32`, `"hidden_size": 512`, `"moe_intermediate_size": 8`, `"moe_intermediate_size": 64`,
		`"head_dim": 16`, `"head_dim": 256`).Replace(tinyMoE)
	ids := []int{3}
	var ref []float32
	for _, layout := range []string{"per-expert", "stacked"} {
		m := zooLoad(t, writeMoEConfig(t, wide, layout, safetensors.BF16, nil))
		logits := lastLogits(t, m, ids)
		if ref == nil {
			ref = logits
		} else if d := golden.MaxAbsDiff(logits, ref); d != 0 {
			t.Errorf("%s: logits differ from the per-expert checkpoint's by %g", layout, d)
		}
		dense, _ := m.Params().Get("model.layers.0.self_attn.o_proj.weight")
		wantPacked := len(layers.Packings(dense)) == 1 && simd.CodesFloats() // coded, not in panels
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			name := "model.layers.1.mlp.experts." + proj
			p, ok := m.Params().Get(name)
			if !ok {
				t.Fatalf("no %s", name)
			}
			if got := len(layers.Packings(p)); (got == 4) != wantPacked || got != 0 && got != 4 {
				t.Errorf("%s %s: %d of 4 experts packed after one token of top-2 routing; a dense matrix packed: %v", layout, name, got, wantPacked)
			}
		}
	}
}

// TestStackedExperts loads the same expert weights stored per expert
// (transformers 4.x), stacked (llama.cpp's and transformers v5's 3-D
// tensors) and as v5's fused gate_up_proj: the logits must be identical,
// the stacked weights keep the stored dtype, and what names weights for
// users keeps the checkpoint's names (gradients per expert for a
// per-expert checkpoint; checkpoints written per expert whatever was
// loaded).
func TestStackedExperts(t *testing.T) {
	ids := []int{3, 17, 5, 60, 42, 7, 25, 9}
	const gate = "model.layers.1.mlp.experts.gate_proj"
	for _, dtype := range []safetensors.DType{safetensors.F32, safetensors.BF16} {
		want := graphs.F32
		if dtype == safetensors.BF16 {
			want = graphs.BF16
		}
		ref := zooLoad(t, writeMoECheckpoint(t, "per-expert", dtype, nil))
		refLogits := lastLogits(t, ref, ids)
		refGrads, err := train.LossAndGradients(ref, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			layout string
			parts  bool // the gradients are named per expert
		}{{"per-expert", true}, {"stacked", false}, {"fused", false}} {
			t.Run(fmt.Sprintf("%s/%s", dtype, c.layout), func(t *testing.T) {
				dir := writeMoECheckpoint(t, c.layout, dtype, nil)
				m := zooLoad(t, dir)
				p, ok := m.Params().Get(gate)
				if !ok {
					t.Fatalf("no stacked %s", gate)
				}
				if !slices.Equal(p.Shape, []int{4, 8, 32}) || p.DType != want {
					t.Errorf("%s: %s %v, want %s [4 8 32]", gate, p.DType, p.Shape, want)
				}
				// Per-expert and fused tensors are read in place, not
				// copied into a stack, until a training step binds it.
				if sliced := c.layout != "stacked"; (p.Slices != nil) != sliced || (p.Data == nil) != sliced {
					t.Errorf("%s: %d slices, stacked data %v; want slices in place: %v", gate, len(p.Slices), p.Data != nil, sliced)
				}
				if d := golden.MaxAbsDiff(lastLogits(t, m, ids), refLogits); d != 0 {
					t.Errorf("logits differ from the per-expert checkpoint's by %g", d)
				}
				if c.layout != "stacked" && p.Data != nil {
					t.Errorf("%s was stacked by inference", gate)
				}

				g, err := train.LossAndGradients(m, ids)
				if err != nil {
					t.Fatal(err)
				}
				part := "model.layers.1.mlp.experts.2.gate_proj.weight"
				if _, has := g.Weights[part]; has != c.parts {
					t.Errorf("gradient %s present = %v, want %v (names %v)", part, has, c.parts, g.Names)
				}
				for _, name := range refGrads.Names {
					r := refGrads.Weights[name].Data().([]float32)
					var got []float32
					if gw, ok := g.Weights[name]; ok {
						if !slices.Equal([]int(gw.Shape()), []int(refGrads.Weights[name].Shape())) {
							t.Errorf("gradient %s has shape %v, want %v", name, gw.Shape(), refGrads.Weights[name].Shape())
						}
						got = gw.Data().([]float32)
					} else {
						// An expert's slice of a stacked gradient:
						// <prefix>.experts.<e>.<proj>.weight is slice e of
						// <prefix>.experts.<proj>.
						i := strings.Index(name, ".experts.")
						num, proj, _ := strings.Cut(strings.TrimSuffix(name[i+len(".experts."):], ".weight"), ".")
						e, err := strconv.Atoi(num)
						if i < 0 || err != nil {
							t.Fatalf("no gradient for %s (names %v)", name, g.Names)
						}
						stack := name[:i] + ".experts." + proj
						sg, ok := g.Weights[stack]
						if !ok {
							t.Fatalf("no gradient for %s, nor for %s (names %v)", name, stack, g.Names)
						}
						all := sg.Data().([]float32)
						got = all[e*len(r) : (e+1)*len(r)]
					}
					if d := golden.MaxAbsDiff(got, r); d != 0 {
						t.Errorf("gradient of %s differs from the per-expert checkpoint's by %g", name, d)
					}
				}

				// Written back, the experts are per-expert tensors again.
				out := t.TempDir()
				if err := zoo.WriteCheckpoint(out, []byte(tinyMoE), m.Params()); err != nil {
					t.Fatal(err)
				}
				f, err := loaders.OpenSafetensors(filepath.Join(out, "model.safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if !f.Has(part) || f.Has(gate) {
					t.Errorf("the written checkpoint holds %s: %v, %s: %v; want only the per-expert tensor", part, f.Has(part), gate, f.Has(gate))
				}
				back := zooLoad(t, out)
				if d := golden.MaxAbsDiff(lastLogits(t, back, ids), lastLogits(t, m, ids)); d != 0 && dtype == safetensors.F32 {
					t.Errorf("the written checkpoint's logits differ by %g", d)
				}
			})
		}
	}
}

// TestStackedExpertsRefused: a per-expert checkpoint with an expert
// missing, of another shape or of another dtype is refused before any
// weight is read, naming the tensor at fault.
func TestStackedExpertsRefused(t *testing.T) {
	const victim = "model.layers.1.mlp.experts.2.up_proj.weight"
	for _, c := range []struct {
		name   string
		edit   func(map[string]rawView)
		errHas []string
	}{
		{"missing expert", func(v map[string]rawView) { delete(v, victim) },
			[]string{"missing tensor", victim, "model.layers.1.mlp.experts.up_proj"}},
		{"expert of another shape", func(v map[string]rawView) {
			r := v[victim]
			v[victim] = rawView{r.dtype, []int{4, 64}, r.data}
		}, []string{victim, "[4 64]", "[8 32]"}},
		{"expert of another dtype", func(v map[string]rawView) {
			r := v[victim]
			vals := make([]float32, len(r.data)/4)
			v[victim] = rawView{safetensors.BF16, r.shape, encode(safetensors.BF16, vals)}
		}, []string{victim, "BF16", "one dtype"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeMoECheckpoint(t, "per-expert", safetensors.F32, c.edit)
			_, err := zoo.Load(dir)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, s := range c.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
	}
}

func zooLoad(t *testing.T, dir string) zoo.Model {
	t.Helper()
	m, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGGUFStackedExperts: llama.cpp's ffn_*_exps bind whole, in their
// block type, to the stacked weights; written as safetensors, they become
// per-expert tensors that load back to the same model.
func TestGGUFStackedExperts(t *testing.T) {
	path := filepath.Join(ggufDir(t, "qwen3moe_q8_0"), "model.gguf")
	m := zooLoad(t, path)
	p, ok := m.Params().Get("model.layers.0.mlp.experts.down_proj")
	if !ok {
		t.Fatal("no stacked down_proj")
	}
	if len(p.Shape) != 3 || p.DType != graphs.Q8_0 || len(p.Parts) != p.Shape[0] {
		t.Fatalf("down_proj: %s %v with %d parts, want Q8_0 [experts, hidden, inter] named per expert", p.DType, p.Shape, len(p.Parts))
	}
	cfgJSON, err := zoo.GGUFConfigJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := zoo.WriteCheckpoint(out, cfgJSON, m.Params()); err != nil {
		t.Fatal(err)
	}
	f, err := loaders.OpenSafetensors(filepath.Join(out, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.Has("model.layers.0.mlp.experts.1.down_proj.weight") {
		t.Errorf("the written checkpoint has no per-expert down_proj: %v", f.Names())
	}
	ids := []int{3, 17, 5, 99, 42}
	if d := golden.MaxAbsDiff(lastLogits(t, zooLoad(t, out), ids), lastLogits(t, m, ids)); d > 1e-4 {
		t.Errorf("the dequantized checkpoint's logits differ by %g", d)
	}
}

// TestQuantizedExpertsPackedAtBind: a quantized stack's experts are
// regrouped when a graph binds them, every expert, not only those a
// token routes to, wherever the kernels regroup a dense matrix of the
// same format: a batch binds its graphs before any run, and its first
// prompt would otherwise pack them as it goes.
func TestQuantizedExpertsPackedAtBind(t *testing.T) {
	path := filepath.Join(ggufDir(t, "qwen3moe_q8_0"), "model.gguf")
	for _, fast := range []bool{false, true} {
		m := zooLoad(t, path)
		b, err := graphs.NewBatch(m, graphs.BatchOptions{Options: graphs.Options{Fast: fast, Capacity: 16}})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Prepare(4); err != nil {
			t.Fatal(err)
		}
		q, ok := m.Params().Get("model.layers.0.self_attn.q_proj.weight")
		if !ok {
			t.Fatal("no q_proj")
		}
		wantPacked := len(layers.Packings(q)) == 1 // the format regroups here
		for _, proj := range []string{"gate_proj", "up_proj", "down_proj"} {
			name := "model.layers.1.mlp.experts." + proj
			p, ok := m.Params().Get(name)
			if !ok {
				t.Fatalf("no %s", name)
			}
			E := p.Shape[0]
			if got := len(layers.Packings(p)); (got == E) != wantPacked || got != 0 && got != E {
				t.Errorf("fast=%v %s: %d of %d experts packed once the graphs are bound, before any run; a dense matrix packed: %v", fast, name, got, E, wantPacked)
			}
		}
		b.Close()
	}
}
