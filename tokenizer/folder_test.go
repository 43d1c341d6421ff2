package tokenizer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders"
)

// copyFiles copies the named files of src that exist into a fresh
// temporary folder.
func copyFiles(t *testing.T, src string, names ...string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// sameTokenizer checks b behaves as a: same config, vocabulary size and
// encodings and decodings of the reference texts of cases.
func sameTokenizer(t *testing.T, a, b *Tokenizer, cases []refCase) {
	t.Helper()
	if a.Config() != b.Config() {
		t.Errorf("Config %+v, want %+v", b.Config(), a.Config())
	}
	if a.VocabSize() != b.VocabSize() {
		t.Errorf("VocabSize %d, want %d", b.VocabSize(), a.VocabSize())
	}
	for _, c := range cases {
		for _, special := range []bool{false, true} {
			want, errA := a.Encode(c.Text, special)
			got, errB := b.Encode(c.Text, special)
			if (errA == nil) != (errB == nil) || !equalIDs(got, want) {
				t.Fatalf("Encode(%q, %v) = %v, %v; want %v, %v", c.Text, special, got, errB, want, errA)
			}
			wantText, _ := a.Decode(want, special)
			gotText, _ := b.Decode(want, special)
			if gotText != wantText {
				t.Fatalf("Decode(%v) = %q, want %q", want, gotText, wantText)
			}
		}
	}
}

// TestFromFolderMatchesLoad builds every reference tokenizer both ways.
func TestFromFolderMatchesLoad(t *testing.T) {
	for _, name := range allTokenizers {
		t.Run(name, func(t *testing.T) {
			ref := loadRef(t, name)
			f, err := loaders.ReadFolder(tokenizerDir(t, name), loaders.TokenizerFile, loaders.TokenizerConfigFile)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := FromFolder(f)
			if err != nil {
				t.Fatal(err)
			}
			sameTokenizer(t, ref, tok, loadCases(t, name))
		})
	}
}

// TestFromFolderReadsNoFile opens a full checkpoint folder, removes it and
// then builds the tokenizer: FromFolder must use only the bytes OpenFolder
// read, so tokenizer_config.json is read once per load.
func TestFromFolderReadsNoFile(t *testing.T) {
	src := testfiles.Fixture(t, "models", "qwen3-tiny")
	ref, err := Load(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := copyFiles(t, src, loaders.ConfigFile, loaders.GenerationConfigFile, loaders.TokenizerFile, loaders.TokenizerConfigFile)
	f, err := loaders.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := FromFolder(f)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Config().ChatTemplate == "" || ref.Config().EOSToken == "" {
		t.Fatalf("fixture lost its tokenizer_config.json: %+v", ref.Config())
	}
	sameTokenizer(t, ref, tok, loadCases(t, "qwen3"))
}

// TestFromFolderErrors checks FromFolder fails as Load does, with the same
// message naming the same file, on bytes read before the folder was
// removed.
func TestFromFolderErrors(t *testing.T) {
	const model = `"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}`
	for _, tc := range []struct {
		name     string
		files    map[string]string
		wantFile string // the file the error names
		notExist bool
	}{
		{"no tokenizer.json", map[string]string{"tokenizer_config.json": `{}`}, "tokenizer.json", true},
		{"empty folder", nil, "tokenizer.json", true},
		{"empty tokenizer.json", map[string]string{"tokenizer.json": ``}, "tokenizer.json", false},
		{"bad tokenizer.json", map[string]string{"tokenizer.json": `{` + model + `, "decoder": {"type": "Foo"}}`}, "tokenizer.json", false},
		{"bad tokenizer_config.json", map[string]string{"tokenizer.json": `{` + model + `}`, "tokenizer_config.json": `{"bos_token": 7}`}, "tokenizer_config.json", false},
		{"tokenizer_config.json not JSON", map[string]string{"tokenizer.json": `{` + model + `}`, "tokenizer_config.json": `{`}, "tokenizer_config.json", false},
		{"empty tokenizer_config.json", map[string]string{"tokenizer.json": `{` + model + `}`, "tokenizer_config.json": ``}, "tokenizer_config.json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, loadErr := Load(dir)
			if loadErr == nil {
				t.Fatal("Load: no error")
			}
			f, err := loaders.ReadFolder(dir, loaders.TokenizerFile, loaders.TokenizerConfigFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			_, err = FromFolder(f)
			if err == nil {
				t.Fatal("FromFolder: no error")
			}
			if err.Error() != loadErr.Error() {
				t.Errorf("FromFolder error %q, Load error %q", err, loadErr)
			}
			if path := filepath.Join(dir, tc.wantFile); !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			if errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) != %v", err, tc.notExist)
			}
			if tc.notExist {
				// The message is the one os.ReadFile gives, as before FromFolder.
				_, osErr := os.ReadFile(filepath.Join(dir, tc.wantFile))
				if want := "tokenizer: " + osErr.Error(); err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			}
		})
	}
}
