package zoo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gozoo/gozoo/golden"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

var ggufCases = []string{"gemma3_q4_k_m", "gpt2_q4_0", "llama_q4_0", "qwen3_f16", "qwen3_q8_0", "qwen3moe_q8_0",
	"llama_q5_k_m", "qwen3_q4_1", "qwen3_iq4_nl", "gemma3_q3_k_m"}

// ggufDir is a GGUF case, vendored or from ../shared (testfiles.Fixture).
func ggufDir(t testing.TB, name string) string { return testfiles.Fixture(t, "gguf", name) }

// TestGGUFGolden runs llama.cpp's quantized files against transformers'
// float32 forward of the dequantized weights: logits, hidden states and
// the KV-cached greedy continuation.
func TestGGUFGolden(t *testing.T) {
	for _, name := range ggufCases {
		t.Run(name, func(t *testing.T) {
			for _, batch := range []int{1, 8} {
				r := golden.RunWith(ggufDir(t, name), golden.Options{Batch: batch})
				if !r.Pass || r.GreedyTotal == 0 || r.GreedyMatched != r.GreedyTotal {
					t.Fatalf("batch %d: %v", batch, r)
				}
				t.Logf("batch %d: %v", batch, r)
			}
		})
	}
}

// TestGGUFConfig: the config each file's metadata gives is the one the
// golden was computed with (golden.json hf_config), and the weights keep
// their stored type.
func TestGGUFConfig(t *testing.T) {
	for _, name := range ggufCases {
		t.Run(name, func(t *testing.T) {
			var meta struct {
				HFConfig    map[string]any    `json:"hf_config"`
				TensorTypes map[string]string `json:"tensor_types"`
			}
			b, err := os.ReadFile(filepath.Join(ggufDir(t, name), "golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			m, err := zoo.Load(ggufDir(t, name))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := meta.HFConfig["eos_token_id"]; !ok {
				meta.HFConfig["eos_token_id"] = 0 // not part of the architecture
			}
			want, err := zoo.ParseConfig(mustJSON(t, meta.HFConfig))
			if err != nil {
				t.Fatal(err)
			}
			ref, err := zoo.NewRandom(want, 1)
			if err != nil {
				t.Fatal(err)
			}
			if m.ModelType() != ref.ModelType() || m.NumLayers() != ref.NumLayers() || m.VocabSize() != ref.VocabSize() ||
				m.HiddenSize() != ref.HiddenSize() || m.MaxPositions() != ref.MaxPositions() || !reflect.DeepEqual(m.Params().Caches(), ref.Params().Caches()) {
				t.Errorf("model from the metadata differs from hf_config's: %s %d layers, vocab %d, hidden %d, %d positions, caches %v",
					m.ModelType(), m.NumLayers(), m.VocabSize(), m.HiddenSize(), m.MaxPositions(), m.Params().Caches())
			}
			var names []string
			for _, p := range ref.Params().All() {
				names = append(names, p.Name)
			}
			for _, n := range names {
				if _, ok := m.Params().Get(n); !ok {
					t.Errorf("tensor %s is missing", n)
				}
			}
			// A quantized matrix stays in its blocks.
			quantized := 0
			for _, p := range m.Params().All() {
				if _, ok := p.DType.Quant(); ok {
					quantized++
				}
			}
			wantQuant := 0
			for _, typ := range meta.TensorTypes {
				if strings.HasPrefix(typ, "Q") || strings.HasPrefix(typ, "IQ") {
					wantQuant++
				}
			}
			if wantQuant > 0 && quantized == 0 {
				t.Errorf("no weight kept quantized (%d quantized tensors in the file)", wantQuant)
			}
		})
	}
}

// TestGGUFRegistered: the families register their GGUF architectures.
func TestGGUFRegistered(t *testing.T) {
	if got, want := zoo.SupportedGGUF(), []string{"gemma3", "gpt2", "llama", "qwen3", "qwen3moe"}; !slices.Equal(got, want) {
		t.Errorf("GGUF architectures %v, want %v", got, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGGUFErrors: files that do not describe a supported model fail with
// the file and the key or tensor named.
func TestGGUFErrors(t *testing.T) {
	if _, err := zoo.Load(filepath.Join(t.TempDir(), "none.gguf")); err == nil || !strings.Contains(err.Error(), "none.gguf") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := zoo.Load(bad); err == nil || !strings.Contains(err.Error(), "bad.gguf") {
		t.Errorf("truncated file: %v", err)
	}
}

// TestParamsKeepTheirMapping: parameters taken from a model keep the
// memory-mapped file alive after the model itself is gone (the mapping is
// released only when no parameter is reachable).
func TestParamsKeepTheirMapping(t *testing.T) {
	for _, dir := range []string{ggufDir(t, "qwen3_q8_0"), filepath.Join("..", "testdata", "golden", "qwen3_gqa_tied")} {
		m, err := zoo.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		params := m.Params().All()
		m = nil
		runtime.GC()
		runtime.GC()
		for _, p := range params {
			for _, v := range p.Float32s() {
				if v != v {
					t.Fatalf("%s: NaN", p.Name)
				}
			}
		}
	}
}

// TestGGUFBadModels: files that parse but do not describe a model the
// metadata promises fail naming the file and the tensor or key.
func TestGGUFBadModels(t *testing.T) {
	src, err := gguf.Open(filepath.Join(ggufDir(t, "llama_q4_0"), "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rewrite := func(t *testing.T, edit func(meta []gguf.KV, tensors []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) string {
		t.Helper()
		var meta []gguf.KV
		for _, k := range src.Keys {
			meta = append(meta, gguf.KV{Key: k, Value: src.Metadata[k]})
		}
		var tensors []gguf.WriteTensor
		for _, ti := range src.Tensors {
			tensors = append(tensors, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: src.Data(ti)})
		}
		meta, tensors = edit(meta, tensors)
		path := filepath.Join(t.TempDir(), "bad.gguf")
		var buf bytes.Buffer
		if err := gguf.Write(&buf, meta, tensors); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	setKey := func(key string, v any) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(meta []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range meta {
				if meta[i].Key == key {
					meta[i].Value = v
				}
			}
			return meta, ts
		}
	}
	for _, tc := range []struct {
		name string
		edit func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
		want string
	}{
		{"missing tensor", func(meta []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			for i := range ts {
				if ts[i].Name == "blk.1.ffn_up.weight" {
					ts = append(ts[:i], ts[i+1:]...)
					break
				}
			}
			return meta, ts
		}, `missing tensor "blk.1.ffn_up.weight"`},
		{"metadata disagrees with a tensor", setKey("llama.feed_forward_length", uint32(128)), `"blk.0.ffn_gate.weight" has shape`},
		{"heads that do not divide", setKey("llama.attention.head_count_kv", uint32(4)), "num_key_value_heads"},
		{"unknown architecture", setKey("general.architecture", "mamba"), `"mamba" is not supported`},
		{"layer count beyond the tensors", setKey("llama.block_count", uint32(9)), `missing tensor "blk.3.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := rewrite(t, tc.edit)
			_, err := zoo.Load(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Errorf("want an error naming bad.gguf and %q, got %v", tc.want, err)
			}
		})
	}
}

// TestGGUFLlamaQKStayPermuted: a llama GGUF's Q and K weights stay in
// llama.cpp's row order in the mapping (no copy); Float32s gives them in
// Hugging Face's order, and a checkpoint written from the model (in that
// order) runs to the same logits, so nothing downstream sees the
// permutation.
func TestGGUFLlamaQKStayPermuted(t *testing.T) {
	path := filepath.Join(ggufDir(t, "llama_q4_0"), "model.gguf")
	m, err := zoo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	q, ok := m.Params().Get("model.layers.0.self_attn.q_proj.weight")
	if !ok {
		t.Fatal("no q_proj")
	}
	cfg, err := zoo.GGUFConfigJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	var dims struct {
		Hidden int `json:"hidden_size"`
		Heads  int `json:"num_attention_heads"`
	}
	if err := json.Unmarshal(cfg, &dims); err != nil || dims.Heads == 0 {
		t.Fatalf("config %s: %v", cfg, err)
	}
	hd := dims.Hidden / dims.Heads
	if q.PermutedHeads != hd {
		t.Fatalf("q_proj PermutedHeads %d, want the head size %d", q.PermutedHeads, hd)
	}
	// Row 1 in HF's order is stored row 2: compare against a fresh
	// dequantization of the stored rows.
	src, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tq, _ := src.Tensor("blk.0.attn_q.weight")
	stored := make([]float32, q.Numel())
	if err := gguf.Dequantize(tq.Type, src.Data(tq), stored); err != nil {
		t.Fatal(err)
	}
	in := q.Shape[1]
	got := q.Float32s()
	for _, r := range [][2]int{{0, 0}, {1, 2}, {hd / 2, 1}, {hd/2 + 1, 3}, {hd + 1, hd + 2}} {
		if g, w := got[r[0]*in:(r[0]+1)*in], stored[r[1]*in:(r[1]+1)*in]; !slices.Equal(g, w) {
			t.Errorf("HF row %d is not stored row %d", r[0], r[1])
		}
	}
	ids := []int{3, 17, 5, 99, 42, 7}
	want := lastLogits(t, m, ids)
	dir := t.TempDir()
	if err := zoo.WriteCheckpoint(dir, cfg, m.Params()); err != nil {
		t.Fatal(err)
	}
	back, err := zoo.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := back.Params().Get(q.Name); p.PermutedHeads != 0 {
		t.Errorf("a safetensors checkpoint loaded with permuted rows")
	}
	if d := maxAbsDiff(lastLogits(t, back, ids), want); d > 1e-4 {
		t.Errorf("the checkpoint written from the GGUF model gives logits off by %g", d)
	}
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestGGUFUnsupportedType: a matrix of a ggml type the zoo has no format
// for (Q8_K, a valid layout llama.cpp only uses for activations) fails
// naming the file, the tensor, the type and the supported types.
func TestGGUFUnsupportedType(t *testing.T) {
	src, err := gguf.Open(filepath.Join(ggufDir(t, "gemma3_q3_k_m"), "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var meta []gguf.KV
	for _, k := range src.Keys {
		meta = append(meta, gguf.KV{Key: k, Value: src.Metadata[k]})
	}
	var tensors []gguf.WriteTensor
	for _, ti := range src.Tensors {
		wt := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: src.Data(ti)}
		if ti.Name == "blk.1.attn_q.weight" {
			wt.Type, wt.Data = gguf.TypeQ8_K, make([]byte, ti.Elements()/256*292)
		}
		tensors = append(tensors, wt)
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = zoo.Load(path)
	t.Log(err)
	for _, want := range []string{"bad.gguf", `"blk.1.attn_q.weight"`, "Q8_K", "supported: F32, F16, Q4_0, Q4_1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error with %q, got %v", want, err)
		}
	}
}

// TestGGUFModelKeepsOnlyMapping: a model loaded from a GGUF file keeps the
// file's mapping for its tensors but not the File, whose metadata (a
// tokenizer's vocabulary and merges) goes with it; the model still runs
// from the mapping, as a model loaded afresh does.
func TestGGUFModelKeepsOnlyMapping(t *testing.T) {
	path := filepath.Join(ggufDir(t, "llama_q4_0"), "model.gguf")
	ids := []int{3, 17, 5, 99}
	fresh, err := zoo.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := lastLogits(t, fresh, ids)
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Mapping().Holds(f.Data(f.Tensors[0])) {
		t.Fatal("the File's mapping does not hold its tensors")
	}
	dropped := make(chan struct{})
	runtime.AddCleanup(f, func(c chan struct{}) { close(c) }, dropped)
	m, err := zoo.LoadGGUFFileContext(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	f = nil
	for i := 0; ; i++ {
		runtime.GC()
		select {
		case <-dropped:
		default:
			if i == 200 {
				t.Fatal("the model keeps its *gguf.File (and the metadata) reachable")
			}
			time.Sleep(5 * time.Millisecond)
			continue
		}
		break
	}
	if got := lastLogits(t, m, ids); golden.MaxAbsDiff(got, want) != 0 {
		t.Fatalf("logits moved once the File was dropped: %v, want %v", got[:4], want[:4])
	}
	runtime.KeepAlive(m)
}

// TestMappingClosesOnce: a File and its Mapping unmap the file once,
// whichever closes first; afterwards neither holds the tensors.
func TestMappingClosesOnce(t *testing.T) {
	f, err := gguf.Open(filepath.Join(ggufDir(t, "llama_q4_0"), "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	data, m := f.Data(f.Tensors[0]), f.Mapping()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Holds(data) || f.Holds(data) {
		t.Fatal("a closed mapping still holds the tensors")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("closing the File after its Mapping: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("closing the Mapping twice: %v", err)
	}
	var none *gguf.Mapping
	if none.Holds(data) || none.Close() != nil {
		t.Fatal("a nil Mapping (a File made by Parse) holds bytes or fails to close")
	}
}
