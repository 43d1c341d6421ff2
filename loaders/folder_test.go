package loaders

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFolder writes files into a fresh temporary folder.
func writeFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fields returns a Folder's file fields by file name.
func fields(f *Folder) map[string][]byte {
	return map[string][]byte{
		ConfigFile:             f.Config,
		GenerationConfigFile:   f.GenerationConfig,
		TokenizerFile:          f.TokenizerJSON,
		TokenizerConfigFile:    f.TokenizerConfig,
		ChatTemplateJinjaFile:  f.ChatTemplateJinja,
		ChatTemplateJSONFile:   f.ChatTemplateJSON,
		PreprocessorConfigFile: f.PreprocessorConfig,
		ProcessorConfigFile:    f.ProcessorConfig,
	}
}

// checkFields checks that exactly the files of want are set, to their
// contents, and the others are nil.
func checkFields(t *testing.T, f *Folder, want map[string]string) {
	t.Helper()
	got := fields(f)
	if len(got) != len(folderFiles) {
		t.Fatalf("test covers %d files, folderFiles has %d", len(got), len(folderFiles))
	}
	for _, name := range folderFiles {
		b := got[name]
		content, present := want[name]
		switch {
		case present && b == nil:
			t.Errorf("%s: nil, want %q", name, content)
		case present && !bytes.Equal(b, []byte(content)):
			t.Errorf("%s: %q, want %q", name, b, content)
		case !present && b != nil:
			t.Errorf("%s: %q, want nil (absent)", name, b)
		}
	}
}

const qwenConfig = `{"model_type": "qwen3", "hidden_size": 8}`

func TestOpenFolder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"config only", map[string]string{ConfigFile: qwenConfig}},
		{"text checkpoint", map[string]string{
			ConfigFile:           qwenConfig,
			GenerationConfigFile: `{"do_sample": true}`,
			TokenizerFile:        `{"model": {}}`,
			TokenizerConfigFile:  `{"bos_token": "<s>"}`,
		}},
		{"every file", map[string]string{
			ConfigFile:             qwenConfig,
			GenerationConfigFile:   `{"do_sample": true}`,
			TokenizerFile:          `{"model": {}}`,
			TokenizerConfigFile:    `{"bos_token": "<s>"}`,
			ChatTemplateJinjaFile:  "{{ messages }}\n",
			ChatTemplateJSONFile:   `{"chat_template": "x"}`,
			PreprocessorConfigFile: `{"image_size": 224}`,
			ProcessorConfigFile:    `{"processor_class": "P"}`,
		}},
		{"empty files are present, not absent", map[string]string{
			ConfigFile:            qwenConfig,
			ChatTemplateJinjaFile: "",
			ProcessorConfigFile:   "",
		}},
		{"other files are ignored", map[string]string{
			ConfigFile:                qwenConfig,
			ChatTemplateJSONFile:      `{"chat_template": "x"}`,
			"special_tokens_map.json": `{}`,
			"model.safetensors":       "not read",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFolder(t, tc.files)
			f, err := OpenFolder(dir)
			if err != nil {
				t.Fatal(err)
			}
			if f.Dir != dir || f.ModelType != "qwen3" {
				t.Errorf("Dir %q ModelType %q, want %q and qwen3", f.Dir, f.ModelType, dir)
			}
			want := map[string]string{}
			for name, content := range tc.files {
				if slices.Contains(folderFiles, name) {
					want[name] = content
				}
			}
			checkFields(t, f, want)
			if got, want := f.Path(TokenizerFile), filepath.Join(dir, "tokenizer.json"); got != want {
				t.Errorf("Path = %q, want %q", got, want)
			}
		})
	}
}

func TestOpenFolderErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		dirs     []string // made as folders, so reading them fails
		notExist bool     // the error matches fs.ErrNotExist
		want     []string // the error names the first in the folder and mentions the rest
	}{
		{"no config.json", map[string]string{TokenizerFile: `{}`}, nil, true, []string{"config.json"}},
		{"empty folder", nil, nil, true, []string{"config.json"}},
		{"config.json without model_type", map[string]string{ConfigFile: `{"hidden_size": 8}`}, nil, false, []string{"config.json", "no model_type"}},
		{"config.json not JSON", map[string]string{ConfigFile: `{`}, nil, false, []string{"config.json"}},
		{"unreadable optional file", map[string]string{ConfigFile: qwenConfig}, []string{TokenizerFile}, false, []string{"tokenizer.json"}},
		{"unreadable config.json", nil, []string{ConfigFile}, false, []string{"config.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFolder(t, tc.files)
			for _, d := range tc.dirs {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			f, err := OpenFolder(dir)
			if err == nil {
				t.Fatalf("no error; model type %q", f.ModelType)
			}
			if errors.Is(err, fs.ErrNotExist) != tc.notExist {
				t.Errorf("errors.Is(%v, fs.ErrNotExist) = %v, want %v", err, !tc.notExist, tc.notExist)
			}
			if path := filepath.Join(dir, tc.want[0]); !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			for _, w := range tc.want[1:] {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "absent")
	if _, err := OpenFolder(missing); err == nil || !strings.Contains(err.Error(), filepath.Join(missing, "config.json")) {
		t.Errorf("missing folder: %v", err)
	}
}

func TestReadFolder(t *testing.T) {
	dir := writeFolder(t, map[string]string{
		TokenizerFile:         `{"model": {}}`,
		ChatTemplateJinjaFile: "{{ x }}",
		GenerationConfigFile:  `{}`,
	})
	for _, tc := range []struct {
		name  string
		names []string
		want  map[string]string
	}{
		{"no config.json needed", []string{TokenizerFile, TokenizerConfigFile},
			map[string]string{TokenizerFile: `{"model": {}}`}},
		{"only the named files are read", []string{ChatTemplateJinjaFile},
			map[string]string{ChatTemplateJinjaFile: "{{ x }}"}},
		{"absent config.json is nil", []string{ConfigFile, GenerationConfigFile, GenerationConfigFile},
			map[string]string{GenerationConfigFile: `{}`}},
		{"nothing", nil, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadFolder(dir, tc.names...)
			if err != nil {
				t.Fatal(err)
			}
			if f.Dir != dir || f.ModelType != "" {
				t.Errorf("Dir %q ModelType %q", f.Dir, f.ModelType)
			}
			checkFields(t, f, tc.want)
		})
	}

	t.Run("config.json is not decoded", func(t *testing.T) {
		dir := writeFolder(t, map[string]string{ConfigFile: `{`})
		f, err := ReadFolder(dir, ConfigFile)
		if err != nil || string(f.Config) != `{` || f.ModelType != "" {
			t.Errorf("got %+v, %v", f, err)
		}
	})
	t.Run("missing folder reads as empty", func(t *testing.T) {
		f, err := ReadFolder(filepath.Join(dir, "absent"), folderFiles...)
		if err != nil {
			t.Fatal(err)
		}
		checkFields(t, f, map[string]string{})
	})
	t.Run("unknown file name", func(t *testing.T) {
		_, err := ReadFolder(dir, "model.safetensors")
		if err == nil || !strings.Contains(err.Error(), "model.safetensors") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("read error names the file", func(t *testing.T) {
		dir := writeFolder(t, nil)
		if err := os.Mkdir(filepath.Join(dir, TokenizerConfigFile), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFolder(dir, TokenizerFile, TokenizerConfigFile)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, TokenizerConfigFile)) {
			t.Errorf("got %v", err)
		}
	})
}

// TestFolderKeepsNoFileOpen checks a Folder holds its bytes, not the
// files: removing the folder after OpenFolder changes nothing.
func TestFolderKeepsNoFileOpen(t *testing.T) {
	files := map[string]string{ConfigFile: qwenConfig, TokenizerConfigFile: `{"eos_token": "</s>"}`}
	dir := writeFolder(t, files)
	f, err := OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	checkFields(t, f, files)
}
