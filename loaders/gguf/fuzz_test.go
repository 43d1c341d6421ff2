package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, must
// refuse with a *FormatError naming the file and an offset inside it, and
// whatever it accepts must be usable without further checks (every tensor's
// data in range and dequantizable, every getter safe).
//
// Run it with: go test -run '^$' -fuzz FuzzParse -fuzztime 20s ./loaders/gguf/
func FuzzParse(f *testing.F) {
	for _, tc := range hostileCases {
		var w builder
		tc.build(&w)
		f.Add(w.bytes())
	}
	f.Add(fullFile())
	var w builder
	f.Add(w.header(2, 1, 1).kvStr("general.name", "v2").tensor("t", []uint64{4}, TypeF32, 0).pad(32).zeros(16).bytes())
	// The real files' first 64 KB and shorter prefixes (header, metadata and
	// tensor infos, cut at various points).
	root := filepath.Join(testfiles.Root(f), "testdata", "gguf")
	for _, name := range []string{"gpt2_q4_0", "llama_q4_0", "gemma3_q3_k_m"} {
		data, err := os.ReadFile(filepath.Join(root, name, "model.gguf"))
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range []int{64 << 10, 16 << 10, 4 << 10, 1 << 10, 100, 30} {
			f.Add(data[:min(n, len(data))])
		}
	}

	const name = "fuzz.gguf"
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(name, data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) || fe.File != name || fe.Offset < 0 || fe.Offset > int64(len(data)) {
				t.Fatalf("error %v (%T)", err, err)
			}
			return
		}
		for _, key := range file.Keys {
			file.String(key)
			file.Uint(key)
			file.Float(key)
			file.Bool(key)
		}
		budget := 1 << 20 // values to dequantize per input
		for _, ti := range file.Tensors {
			d := file.Data(ti)
			if int64(len(d)) != ti.Bytes() || ti.Bytes() <= 0 {
				t.Fatalf("%s: %d bytes of data, Bytes() %d", ti.Name, len(d), ti.Bytes())
			}
			if got, ok := file.Tensor(ti.Name); !ok || got.Offset != ti.Offset {
				t.Fatalf("Tensor(%q) = %+v, %v", ti.Name, got, ok)
			}
			_ = ti.Shape()
			if ti.RowBytes() <= 0 || int64(ti.RowBytes()) > ti.Bytes() {
				t.Fatalf("%s: row bytes %d of %d", ti.Name, ti.RowBytes(), ti.Bytes())
			}
			n := ti.Elements()
			if !ti.Type.Supported() || n > int64(budget) {
				continue
			}
			budget -= int(n)
			vals := make([]float32, n)
			if err := Dequantize(ti.Type, d, vals); err != nil {
				t.Fatalf("%s: %v", ti.Name, err)
			}
			row := make([]float32, ti.Dims[0])
			DequantizeRow(ti.Type, d[:ti.RowBytes()], row)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
