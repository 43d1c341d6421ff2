package tokenizer

import (
	"github.com/gozoo/gozoo/internal/testfiles"

	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// refCase is one line of a cases.jsonl file (see ../shared/tokenizers/README.md).
type refCase struct {
	Text               string `json:"text"`
	IDs                []int  `json:"ids"`
	IDsWithSpecial     []int  `json:"ids_with_special"`
	Decoded            string `json:"decoded"`
	DecodedSkipSpecial string `json:"decoded_skip_special"`
	Category           string `json:"category"`
}

// allTokenizers are the reference tokenizers. The first two are
// Apache-2.0 and live in testdata/; the others stay in ../shared.
var allTokenizers = []string{"qwen3", "mistral", "gemma3", "llama3", "cohere", "smol-synthetic"}

// tokenizerDir returns the directory of a reference tokenizer: vendored
// (qwen3, mistral) or in ../shared, whose absence fails the test under
// CI=true and skips it elsewhere.
func tokenizerDir(t testing.TB, name string) string {
	t.Helper()
	dir := testfiles.Fixture(t, "tokenizers", name)
	testfiles.Require(t, filepath.Join(dir, "cases.jsonl"))
	return dir
}

var (
	tokMu    sync.Mutex
	tokCache = map[string]*Tokenizer{}
)

// loadRef loads a reference tokenizer once per test binary.
func loadRef(t testing.TB, name string) *Tokenizer {
	t.Helper()
	dir := tokenizerDir(t, name)
	tokMu.Lock()
	defer tokMu.Unlock()
	if tok, ok := tokCache[name]; ok {
		return tok
	}
	tok, err := Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", name, err)
	}
	tokCache[name] = tok
	return tok
}

func loadCases(t testing.TB, name string) []refCase {
	t.Helper()
	path := filepath.Join(tokenizerDir(t, name), "cases.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []refCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var c refCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
