package tokenizer

import (
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

func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// tokenizerDir returns the directory of a reference tokenizer. A missing
// ../shared file fails the test under CI=true and skips it elsewhere.
func tokenizerDir(t testing.TB, name string) string {
	t.Helper()
	root := repoRoot(t)
	dir := filepath.Join(root, "testdata", "tokenizers", name)
	if name != "qwen3" && name != "mistral" {
		dir = filepath.Join(root, "..", "shared", "tokenizers", name)
	}
	for _, f := range []string{"tokenizer.json", "cases.jsonl"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("reference file %s is missing (CI=true requires ../shared beside the clone): %v", p, err)
			}
			t.Skipf("reference file %s is missing (licensed files stay outside the repo; set up ../shared to run this): %v", p, err)
		}
	}
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
