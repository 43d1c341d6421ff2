package gguf

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// golden is the part of a case's golden.json these tests use.
type golden struct {
	Arch        string            `json:"arch"`
	TensorTypes map[string]string `json:"tensor_types"`
	Metadata    map[string]any    `json:"gguf_metadata"`
	HFConfig    struct {
		VocabSize int `json:"vocab_size"`
	} `json:"hf_config"`
}

// TestRealFiles checks every llama.cpp case of testfiles.Cases (gpt2_q4_0,
// llama_q4_0, qwen3_q4_1, gemma3_q3_k_m vendored in testdata/gguf;
// qwen3_f16, qwen3_q8_0, qwen3moe_q8_0, gemma3_q4_k_m, llama_q5_k_m,
// qwen3_iq4_nl from ../shared/gguf; see
// ../shared/gguf/README.md for what each exercises).
func TestRealFiles(t *testing.T) {
	seen := map[string]bool{}
	for _, dir := range testfiles.Cases(t, "gguf") {
		name := filepath.Base(dir)
		seen[name] = true
		t.Run(name, func(t *testing.T) { checkCase(t, dir) })
	}
	// The small cases are the only real Q4_0, Q4_K, Q6_K, Q4_1, Q3_K and
	// Q5_K data; they must be there.
	for _, name := range []string{"gpt2_q4_0", "llama_q4_0", "qwen3_q4_1", "gemma3_q3_k_m"} {
		if !seen[name] {
			t.Errorf("testdata/gguf/%s is missing", name)
		}
	}
}

var (
	arraySummary  = regexp.MustCompile(`^<array of (\d+)>$`)
	stringSummary = regexp.MustCompile(`^<(\d+) chars>$`)
)

// checkCase opens dir/model.gguf and checks it against dir/golden.json and
// dir/golden.safetensors: metadata, tensor types, and every tensor
// dequantized bit for bit as the independent reference does, finite; the
// embedding rows of the golden's input_ids match hidden_states[0].
func checkCase(t *testing.T, dir string) {
	var g golden
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	f, err := Open(filepath.Join(dir, "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Metadata: every key, with its value or (for big ones) its size.
	if len(f.Keys) != len(g.Metadata) || len(f.Metadata) != len(g.Metadata) {
		t.Errorf("%d keys (%v), golden has %d", len(f.Keys), f.Keys, len(g.Metadata))
	}
	for key, want := range g.Metadata {
		got, ok := f.Metadata[key]
		if !ok {
			t.Errorf("missing key %s", key)
			continue
		}
		switch w := want.(type) {
		case string:
			if m := arraySummary.FindStringSubmatch(w); m != nil {
				n, _ := strconv.Atoi(m[1])
				if v := reflect.ValueOf(got); v.Kind() != reflect.Slice || v.Len() != n {
					t.Errorf("%s: %s, want an array of %d", key, typeName(got), n)
				}
			} else if m := stringSummary.FindStringSubmatch(w); m != nil {
				n, _ := strconv.Atoi(m[1])
				if s, err := f.String(key); err != nil || utf8.RuneCountInString(s) != n {
					t.Errorf("%s: %d chars, %v; want %d", key, utf8.RuneCountInString(s), err, n)
				}
			} else if s, err := f.String(key); s != w || err != nil {
				t.Errorf("%s = %q, %v; want %q", key, s, err, w)
			}
		case bool:
			if got != w {
				t.Errorf("%s = %v, want %v", key, got, w)
			}
		case float64:
			if v, err := f.Float(key); v != w || err != nil {
				t.Errorf("%s = %v, %v; want %v", key, v, err, w)
			}
		default:
			t.Errorf("%s: unexpected golden value %v", key, want)
		}
	}
	if arch, _ := f.String("general.architecture"); arch != g.Arch {
		t.Errorf("architecture %q, golden %q", arch, g.Arch)
	}
	if tokens, ok := f.Metadata["tokenizer.ggml.tokens"].([]string); !ok || len(tokens) != g.HFConfig.VocabSize {
		t.Errorf("tokenizer.ggml.tokens: %s of %d, want []string of %d", typeName(f.Metadata["tokenizer.ggml.tokens"]), len(tokens), g.HFConfig.VocabSize)
	}
	if _, ok := f.Metadata["tokenizer.ggml.token_type"].([]int32); !ok {
		t.Errorf("tokenizer.ggml.token_type is %s, want array of i32", typeName(f.Metadata["tokenizer.ggml.token_type"]))
	}

	// Tensors: the types golden.json lists, every one dequantized.
	if len(f.Tensors) != len(g.TensorTypes) {
		t.Errorf("%d tensors, golden lists %d", len(f.Tensors), len(g.TensorTypes))
	}
	for _, ti := range f.Tensors {
		if want := g.TensorTypes[ti.Name]; ti.Type.String() != want {
			t.Errorf("%s: type %s, golden %q", ti.Name, ti.Type, want)
		}
		if !ti.Type.Supported() {
			t.Errorf("%s: type %s not supported", ti.Name, ti.Type)
			continue
		}
		data := f.Data(ti)
		if int64(len(data)) != ti.Bytes() {
			t.Fatalf("%s: %d bytes, want %d", ti.Name, len(data), ti.Bytes())
		}
		vals := make([]float32, ti.Elements())
		if err := Dequantize(ti.Type, data, vals); err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		for i, v := range vals {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s [%d] = %g", ti.Name, i, v)
			}
		}
		want := reference(ti.Type, data, len(vals))
		for i := range vals {
			if !sameBits(vals[i], want[i]) {
				t.Fatalf("%s [%d] = %g, reference %g", ti.Name, i, vals[i], want[i])
			}
		}
		// Row by row with DequantizeRow gives the same values.
		row := make([]float32, ti.Dims[0])
		rb := ti.RowBytes()
		for r := 0; r < len(vals)/len(row); r++ {
			DequantizeRow(ti.Type, data[r*rb:(r+1)*rb], row)
			for i := range row {
				if math.Float32bits(row[i]) != math.Float32bits(vals[r*len(row)+i]) {
					t.Fatalf("%s row %d [%d]: DequantizeRow %g, Dequantize %g", ti.Name, r, i, row[i], vals[r*len(row)+i])
				}
			}
		}
	}

	checkEmbeddings(t, f, g, filepath.Join(dir, "golden.safetensors"))
}

// checkEmbeddings compares hidden_states[0] of the golden, the model's input
// embeddings for input_ids, with token_embd rows dequantized here: a check
// of the dequantization against the values the golden was computed from.
func checkEmbeddings(t *testing.T, f *File, g golden, path string) {
	st := readSafetensors(t, path)
	ids, hidden := st["input_ids"], st["hidden_states"]
	if ids.dtype != "I64" || hidden.dtype != "F32" || len(hidden.shape) != 3 {
		t.Fatalf("golden: input_ids %s, hidden_states %s %v", ids.dtype, hidden.dtype, hidden.shape)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		t.Fatal("no token_embd.weight")
	}
	h := hidden.shape[2]
	if shape := emb.Shape(); len(shape) != 2 || shape[0] != g.HFConfig.VocabSize || shape[1] != h {
		t.Fatalf("token_embd.weight shape %v, want [%d %d]", shape, g.HFConfig.VocabSize, h)
	}
	var pos []float32 // GPT-2's learned positions
	if g.Arch == "gpt2" {
		pt, _ := f.Tensor("position_embd.weight")
		pos = make([]float32, pt.Elements())
		if err := Dequantize(pt.Type, f.Data(pt), pos); err != nil {
			t.Fatal(err)
		}
	}
	row := make([]float32, h)
	data := f.Data(emb)
	rb := emb.RowBytes()
	T := hidden.shape[1]
	for p := range T {
		id := int(binary.LittleEndian.Uint64(ids.data[8*p:]))
		DequantizeRow(emb.Type, data[id*rb:(id+1)*rb], row)
		for i := range row {
			want := math.Float32frombits(binary.LittleEndian.Uint32(hidden.data[4*(p*h+i):]))
			got := row[i]
			switch g.Arch {
			case "gemma3":
				got *= float32(math.Sqrt(float64(h))) // a power of two here: exact
			case "gpt2":
				got += pos[p*h+i]
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("embedding of token %d (position %d) [%d] = %g, golden hidden_states[0] %g", id, p, i, got, want)
			}
		}
	}
}

type stTensor struct {
	dtype string
	shape []int
	data  []byte
}

// readSafetensors reads a small safetensors file whole (the golden outputs).
func readSafetensors(t *testing.T, path string) map[string]stTensor {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	body := b[8+n:]
	out := map[string]stTensor{}
	for name, msg := range header {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Dtype   string `json:"dtype"`
			Shape   []int  `json:"shape"`
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			t.Fatal(err)
		}
		out[name] = stTensor{e.Dtype, e.Shape, body[e.Offsets[0]:e.Offsets[1]]}
	}
	return out
}
