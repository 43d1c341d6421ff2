package loaders

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// maxFuzzFile caps the inputs FuzzSafetensorsHeader parses, so that what
// one run allocates stays small.
const maxFuzzFile = 1 << 20

// FuzzSafetensorsHeader parses arbitrary bytes as a safetensors file: the
// result is an error naming the file, or a file whose every tensor reads
// back within the input, of exactly dtype times shape bytes. It never
// panics. The seeds (testdata/fuzz/FuzzSafetensorsHeader) are made from
// the real checkpoints under testdata by TestWriteSafetensorsSeeds.
func FuzzSafetensorsHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(safetensorsBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32bytes(1, 2)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzFile {
			return
		}
		sf, err := parseSafetensors("fuzz.safetensors", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.safetensors: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		checkReadsBack(t, sf, b)
	})
}

// checkReadsBack reads every tensor of a file parsed from b every way
// there is, checking that the data lie in b, cover its data section
// without overlap and match dtype times shape.
func checkReadsBack(t *testing.T, sf *SafetensorsFile, b []byte) {
	t.Helper()
	var covered int
	for _, name := range sf.Names() {
		dtype, shape, data, err := sf.Raw(name)
		if err != nil {
			t.Fatalf("Raw(%q): %v", name, err)
		}
		n := 1
		for _, d := range shape {
			if d < 0 {
				t.Fatalf("tensor %q: shape %v", name, shape)
			}
			n *= d
		}
		dt, _ := dtypeSize(dtype)
		if len(data) != n*dt {
			t.Fatalf("tensor %q: %s %v has %d bytes", name, dtype, shape, len(data))
		}
		if len(data) > 0 {
			off := int(uintptrOf(data) - uintptrOf(b))
			if off < 0 || off+len(data) > len(b) {
				t.Fatalf("tensor %q: data outside the file", name)
			}
		}
		covered += len(data)
		switch dtype {
		case "F32", "BF16", "F16":
			if _, _, err := sf.Float32s(name); err != nil {
				t.Fatalf("Float32s(%q): %v", name, err)
			}
		case "I64", "I32":
			if _, _, err := sf.ReadInt64(name); err != nil {
				t.Fatalf("ReadInt64(%q): %v", name, err)
			}
		default:
			if err := sf.ReadFloat32(name, make([]float32, n)); err == nil {
				t.Fatalf("ReadFloat32(%q) of %s: no error", name, dtype)
			}
		}
	}
	if int64(covered) != sf.DataBytes() {
		t.Fatalf("tensors cover %d bytes of a %d-byte data section", covered, sf.DataBytes())
	}
	sf.Close()
	for _, name := range sf.Names() {
		if _, _, _, err := sf.Raw(name); err == nil {
			t.Fatalf("Raw(%q) after Close: no error", name)
		}
	}
}

func dtypeSize(dtype string) (int, bool) {
	switch dtype {
	case "BOOL", "U8", "I8":
		return 1, true
	case "I16", "U16", "F16", "BF16":
		return 2, true
	case "I32", "U32", "F32":
		return 4, true
	case "I64", "U64", "F64":
		return 8, true
	}
	return 0, false
}

// safetensorsBytes is a whole file: header length, header, data.
func safetensorsBytes(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	return append(append(b, header...), data...)
}

// TestWriteSafetensorsSeeds writes FuzzSafetensorsHeader's seed corpus
// from the real checkpoints under testdata when GOZOO_WRITE_FUZZ_SEEDS is
// set: for each file, a valid small file of its smaller tensors (their
// names, dtypes, shapes and bytes, with its __metadata__) and its real
// header over a truncated data section.
func TestWriteSafetensorsSeeds(t *testing.T) {
	if os.Getenv("GOZOO_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set GOZOO_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz/FuzzSafetensorsHeader")
	}
	testfiles.Root(t) // expands the compressed checkpoints
	golden, _ := filepath.Glob("../testdata/golden/*/*.safetensors")
	models, _ := filepath.Glob("../testdata/models/*/*.safetensors")
	dir := filepath.Join("testdata", "fuzz", "FuzzSafetensorsHeader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range append(golden, models...) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sf, err := parseSafetensors(path, raw)
		if err != nil {
			t.Fatal(err)
		}
		stem := filepath.Base(filepath.Dir(path)) + "-" + strings.TrimSuffix(filepath.Base(path), ".safetensors")
		n := binary.LittleEndian.Uint64(raw[:8])
		head := raw[:min(len(raw), int(8+n)+64)]
		writeSeed(t, dir, stem+"-truncated", head)
		writeSeed(t, dir, stem+"-small", smallFile(t, sf, raw))
	}
}

// smallFile re-serializes up to 8 of a file's tensors of at most 1 KB,
// contiguously, with the file's own __metadata__.
func smallFile(t *testing.T, sf *SafetensorsFile, raw []byte) []byte {
	var md map[string]json.RawMessage
	n := binary.LittleEndian.Uint64(raw[:8])
	if err := json.Unmarshal(raw[8:8+n], &md); err != nil {
		t.Fatal(err)
	}
	var header strings.Builder
	header.WriteString("{")
	if m, ok := md["__metadata__"]; ok {
		header.WriteString(`"__metadata__":` + string(m))
	}
	var data []byte
	kept := 0
	for _, tn := range sf.tensors {
		if kept == 8 || tn.end-tn.begin > 1024 {
			continue
		}
		shape, _ := json.Marshal(tn.shape)
		if header.Len() > 1 {
			header.WriteString(",")
		}
		name, _ := json.Marshal(tn.name)
		fmt.Fprintf(&header, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, tn.dtype, shape, len(data), len(data)+int(tn.end-tn.begin))
		data = append(data, sf.data[tn.begin:tn.end]...)
		kept++
	}
	header.WriteString("}")
	h := header.String()
	h += strings.Repeat(" ", (8-len(h)%8)%8)
	b := safetensorsBytes(h, data)
	if _, err := parseSafetensors("seed", b); err != nil {
		t.Fatal(err)
	}
	return b
}

// writeSeed writes one input in the Go fuzzing corpus format.
func writeSeed(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
