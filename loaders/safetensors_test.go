package loaders

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/x448/float16"
)

// rawFile writes a safetensors file from a literal header and data.
func rawFile(t *testing.T, header string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(append(b, header...), data...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestOpenSafetensorsRejectsBadFiles(t *testing.T) {
	good := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`
	cases := []struct {
		name   string
		write  func(t *testing.T) string
		errHas []string
	}{
		{"empty file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "model.safetensors")
			os.WriteFile(p, nil, 0o644)
			return p
		}, []string{"truncated", "model.safetensors"}},
		{"shorter than the length prefix", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "model.safetensors")
			os.WriteFile(p, []byte{1, 2, 3}, 0o644)
			return p
		}, []string{"truncated"}},
		{"header length past the end", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "model.safetensors")
			b := make([]byte, 16)
			binary.LittleEndian.PutUint64(b, 1<<40)
			os.WriteFile(p, b, 0o644)
			return p
		}, []string{"header length", "past the end"}},
		{"header not JSON", func(t *testing.T) string { return rawFile(t, `{"a": nope}`, nil) }, []string{"model.safetensors", "JSON"}},
		{"data truncated", func(t *testing.T) string { return rawFile(t, good, f32bytes(1, 2)) }, []string{`"b"`, "past the end"}},
		{"offsets out of range", func(t *testing.T) string {
			return rawFile(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,400]}}`, f32bytes(1, 2, 3))
		}, []string{`"b"`}},
		{"overlapping tensors", func(t *testing.T) string {
			return rawFile(t, `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, f32bytes(1, 2, 3))
		}, []string{`"a"`, `"b"`}},
		{"unknown dtype", func(t *testing.T) string {
			return rawFile(t, `{"a":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2))
		}, []string{`"F7"`}},
		{"shape disagrees with offsets", func(t *testing.T) string {
			return rawFile(t, `{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, f32bytes(1, 2))
		}, []string{`"a"`, "needs 12 bytes"}},
		{"trailing bytes", func(t *testing.T) string { return rawFile(t, good, f32bytes(1, 2, 3, 4)) }, []string{"data section"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.write(t)
			f, err := OpenSafetensors(path)
			if err == nil {
				f.Close()
				t.Fatal("no error")
			}
			for _, want := range c.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}

func TestReadFloat32Dtypes(t *testing.T) {
	vals := []float32{1.5, -2.25, 0, 3e-5, 65504, -0.125}
	bf := make([]byte, 2*len(vals))
	f16 := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(bf[2*i:], uint16(math.Float32bits(v)>>16))
		binary.LittleEndian.PutUint16(f16[2*i:], float16.Fromfloat32(v).Bits())
	}
	header := func(dtype string, n int) string {
		return `{"w":{"dtype":"` + dtype + `","shape":[2,3],"data_offsets":[0,` + itoa(n) + `]}}`
	}
	cases := []struct {
		name string
		path string
		tol  float64
	}{
		{"F32", rawFile(t, header("F32", 24), f32bytes(vals...)), 0},
		{"BF16", rawFile(t, header("BF16", 12), bf), 0.01},
		{"F16", rawFile(t, header("F16", 12), f16), 0.001},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := OpenSafetensors(c.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got := make([]float32, 6)
			if err := f.ReadFloat32("w", got); err != nil {
				t.Fatal(err)
			}
			for i := range vals {
				if d := math.Abs(float64(got[i] - vals[i])); d > c.tol*math.Max(1, math.Abs(float64(vals[i]))) {
					t.Errorf("[%d] = %g, want %g", i, got[i], vals[i])
				}
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestCheckpointLoadChecksShapesAndNames(t *testing.T) {
	header := `{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}`
	for len(header)%8 != 0 { // as safetensors writers pad it, so the data is aligned
		header += " "
	}
	path := rawFile(t, header, f32bytes(1, 2, 3, 4, 5, 6))
	c, err := OpenCheckpoint(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Tensor("w", []int{3, 2}); err == nil || !strings.Contains(err.Error(), `"w"`) || !strings.Contains(err.Error(), "[3 2]") {
		t.Errorf("shape mismatch: got %v", err)
	}
	if _, _, err := c.Tensor("missing.weight", []int{2}); err == nil || !strings.Contains(err.Error(), `"missing.weight"`) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("missing tensor: got %v", err)
	}
	dtype, data, err := c.Tensor("w", []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	// PyTorch's [out, in] layout, unconverted, viewed in place when aligned.
	w, ok := Float32View(data)
	if dtype != "F32" || !ok || !slices.Equal(w, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("weight read as %s %v (view %v), want F32 [1 2 3 4 5 6]", dtype, w, ok)
	}
	if !ok || &w[0] != (*float32)(unsafe.Pointer(&data[0])) {
		t.Error("the F32 view copied the data")
	}
	if _, ok := Float32View(data[1:5]); ok {
		t.Error("a misaligned view was accepted")
	}
}

func TestShardedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	write := func(name, header string, data []byte) {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, uint64(len(header)))
		os.WriteFile(filepath.Join(dir, name), append(append(b, header...), data...), 0o644)
	}
	write("model-00001-of-00002.safetensors", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32bytes(7))
	write("model-00002-of-00002.safetensors", `{"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(8, 9))
	index := `{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(index), 0o644)
	c, err := OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.Tensor("b", []int{2})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 2)
	if err := c.ReadFloat32("b", got); err != nil || !slices.Equal(got, []float32{8, 9}) {
		t.Errorf("b = %v", got)
	}
	if !slices.Equal(c.Names(), []string{"a", "b"}) {
		t.Errorf("names %v", c.Names())
	}

	// An index naming a tensor its shard lacks is refused by name.
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(`{"weight_map":{"zz":"model-00001-of-00002.safetensors"}}`), 0o644)
	if _, err := OpenCheckpoint(dir); err == nil || !strings.Contains(err.Error(), `"zz"`) {
		t.Errorf("stale index: got %v", err)
	}
}

func TestIntList(t *testing.T) {
	for in, want := range map[string][]int{`2`: {2}, `[1, 3]`: {1, 3}, `null`: nil} {
		var l IntList
		if err := json.Unmarshal([]byte(in), &l); err != nil || !slices.Equal(l, want) {
			t.Errorf("%s: got %v %v", in, l, err)
		}
	}
}

// TestSafetensorsHeaderChecks crafts a file for each check of the header
// and the data layout; the error must name the file, the tensor and the
// offsets where there are some.
func TestSafetensorsHeaderChecks(t *testing.T) {
	entry := func(name, dtype, shape string, begin, end int) string {
		return `"` + name + `":{"dtype":"` + dtype + `","shape":` + shape + `,"data_offsets":[` + itoa(begin) + `,` + itoa(end) + `]}`
	}
	obj := func(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }
	ones := strings.TrimSuffix(strings.Repeat("1,", MaxSafetensorsRank+1), ",")
	cases := []struct {
		name   string
		header string
		data   []byte
		errHas []string // empty: the file is valid
	}{
		{"not an object", `[1, 2]`, nil, []string{"not a JSON object"}},
		{"bytes after the object", `{} {}`, nil, []string{"after its JSON object", "header byte 3", "file offset 11"}},
		{"invalid JSON at an offset", `{"a":{"dtype":"F32",,}}`, nil, []string{`tensor "a"`, "not valid JSON", "file offset"}},
		{"tensor named twice", obj(entry("a", "F32", "[1]", 0, 4), entry("a", "F32", "[1]", 4, 8)), f32bytes(1, 2), []string{`"a"`, "twice"}},
		{"unexpected key", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}}`, f32bytes(1), []string{`"a"`, `"extra"`}},
		{"missing key", `{"a":{"dtype":"F32","shape":[1]}}`, f32bytes(1), []string{`"a"`, `"data_offsets"`}},
		{"entry not an object", `{"a":[0,4]}`, f32bytes(1), []string{`"a"`, "not an object"}},
		{"dtype not a string", `{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, f32bytes(1), []string{`"a"`, "dtype"}},
		{"negative dimension", obj(entry("a", "F32", "[-1]", 0, 4)), f32bytes(1), []string{`"a"`, "shape"}},
		{"fractional dimension", obj(entry("a", "F32", "[1.5]", 0, 4)), f32bytes(1), []string{`"a"`, "shape"}},
		{"shape not a list", obj(entry("a", "F32", `"1"`, 0, 4)), f32bytes(1), []string{`"a"`, "not a list"}},
		{"rank over the cap", obj(entry("a", "F32", "["+ones+"]", 0, 4)), f32bytes(1), []string{`"a"`, "more than 64"}},
		{"dimension past int", obj(entry("a", "F32", "[18446744073709551615,0]", 0, 0)), nil, []string{`"a"`, "out of range"}},
		{"three offsets", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, f32bytes(1), []string{`"a"`, "two offsets"}},
		{"offset past 64 bits", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551616]}}`, f32bytes(1), []string{`"a"`, "data_offsets"}},
		{"end before begin", obj(entry("a", "F32", "[1]", 8, 4)), f32bytes(1, 2), []string{`"a"`, "[8, 4]", "end before they begin"}},
		{"offset out of range", obj(entry("a", "F32", "[1]", 0, 1<<60)), f32bytes(1), []string{`"a"`, "past the end", "data section (4 bytes"}},
		{"size overflows", obj(entry("a", "F32", "[4611686018427387904,8]", 0, 4)), f32bytes(1), []string{`"a"`, "overflows"}},
		{"size disagrees", obj(entry("a", "BF16", "[3]", 0, 4)), f32bytes(1), []string{`"a"`, "needs 6 bytes", "span 4"}},
		{"overlap", obj(entry("a", "F32", "[2]", 0, 8), entry("b", "F32", "[2]", 4, 12)), f32bytes(1, 2, 3), []string{`"a"`, `"b"`, "overlap at data offset 4"}},
		{"zero-size tensor inside another", obj(entry("a", "F32", "[2]", 0, 8), entry("b", "F32", "[0]", 4, 4)), f32bytes(1, 2), []string{`"a"`, `"b"`, "overlap"}},
		{"gap", obj(entry("a", "F32", "[1]", 0, 4), entry("b", "F32", "[1]", 8, 12)), f32bytes(1, 2, 3), []string{`"b"`, "data bytes [4, 8)", "to no tensor"}},
		{"trailing data", obj(entry("a", "F32", "[1]", 0, 4)), f32bytes(1, 2), []string{"data section is 8 bytes", "4 trailing bytes"}},
		{"metadata not strings", `{"__metadata__":{"format":1}}`, nil, []string{"__metadata__"}},
		{"metadata twice", `{"__metadata__":{},"__metadata__":{}}`, nil, []string{"__metadata__", "two"}},
		{"valid: no tensors", `{}`, nil, nil},
		{"valid: padded, metadata, out of order, zero-size", obj(`"__metadata__":{"format":"pt"}`, entry("b", "I64", "[1]", 4, 12), entry("z", "F16", "[0,7]", 4, 4), entry("a", "F32", "[1]", 0, 4)) + "   ", f32bytes(1, 2, 3), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := rawFile(t, c.header, c.data)
			f, err := OpenSafetensors(path)
			if len(c.errHas) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				checkReadsBack(t, f, f.mapping)
				return
			}
			if err == nil {
				f.Close()
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("error %q does not start with the file's path", err)
			}
			for _, want := range c.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}

// TestSafetensorsHeaderCap refuses a header over the format's 100 MB cap
// before reading it (the file is sparse: nothing is written or read).
func TestSafetensorsHeaderCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, MaxSafetensorsHeader+1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 8+MaxSafetensorsHeader+1); err != nil {
		t.Fatal(err)
	}
	_, err := OpenSafetensors(path)
	if err == nil || !strings.Contains(err.Error(), "100000001") || !strings.Contains(err.Error(), "cap") || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want the header length refused against the cap", err)
	}
	if _, err := OpenSafetensors(t.TempDir()); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("a directory: got %v", err)
	}
}
