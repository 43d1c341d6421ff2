package zoo_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// maxFuzzConfig caps the configs FuzzConfig decodes.
const maxFuzzConfig = 1 << 16

// FuzzConfig decodes arbitrary JSON as a config.json of any registered
// model_type. It never panics nor allocates more than hostileAlloc
// (loaders.CheckConfigSizes bounds what parsing and declaring may size),
// and a config that parses declares its
// tensors without a runtime error in a family's New, every dimension
// positive, and a parameter count that neither overflows nor passes
// loaders.MaxParameters. The seeds (testdata/fuzz/FuzzConfig) are every
// config.json under testdata, also under every other model_type, made by
// TestWriteConfigSeeds.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`{"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "eos_token_id": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzConfig {
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		defer func() {
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > hostileAlloc {
				t.Fatalf("parsing and declaring allocated %d MiB", alloc>>20)
			}
		}()
		cfg, err := zoo.ParseConfig(data)
		if err != nil {
			return
		}
		params, err := zoo.Tensors(cfg)
		if err != nil {
			// declare turns a panic in New into an error; a runtime
			// error (index out of range, nil map, division by zero)
			// there is a family bug, not a refused config.
			if strings.Contains(err.Error(), "runtime error") {
				t.Fatalf("declaring the tensors of a config that parsed: %v", err)
			}
			return
		}
		var total int64
		for _, p := range params {
			n := int64(1)
			for _, d := range p.Shape {
				if d <= 0 || n > math.MaxInt64/int64(d) {
					t.Fatalf("tensor %q: shape %v", p.Name, p.Shape)
				}
				n *= int64(d)
			}
			if total > math.MaxInt64-n {
				t.Fatalf("the parameter count overflows at tensor %q", p.Name)
			}
			total += n
		}
		if total > loaders.MaxParameters {
			t.Fatalf("%d parameters passed the declaration", total)
		}
	})
}

// TestWriteConfigSeeds writes FuzzConfig's seed corpus when
// GOZOO_WRITE_FUZZ_SEEDS is set: every config.json of
// testdata/golden/*/, testdata/models/*/ and testdata/configs/*.json as
// it is and under each other registered model_type.
func TestWriteConfigSeeds(t *testing.T) {
	if os.Getenv("GOZOO_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set GOZOO_WRITE_FUZZ_SEEDS=1 to rewrite testdata/fuzz/FuzzConfig")
	}
	var paths []string
	for _, pattern := range []string{"../testdata/golden/*/config.json", "../testdata/models/*/config.json", "../testdata/configs/*.json"} {
		m, _ := filepath.Glob(pattern)
		paths = append(paths, m...)
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzConfig")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		stem := filepath.Base(filepath.Dir(path))
		if filepath.Base(path) != "config.json" {
			stem = strings.TrimSuffix(filepath.Base(path), ".json")
		}
		writeSeed(t, dir, stem, data)
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil || m["model_type"] == nil {
			continue
		}
		own, _ := strconv.Unquote(string(m["model_type"]))
		for _, mt := range zoo.Supported() {
			if mt == own {
				continue
			}
			m["model_type"], _ = json.Marshal(mt)
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetIndent("", " ")
			if err := enc.Encode(m); err != nil {
				t.Fatal(err)
			}
			writeSeed(t, dir, stem+"-as-"+mt, b.Bytes())
		}
	}
}

// writeSeed writes one input in the Go fuzzing corpus format.
func writeSeed(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
