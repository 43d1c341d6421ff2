package chat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/jinja"
	"github.com/gozoo/gozoo/loaders"
)

// probe renders every variable LoadTemplate may set, so a test sees which
// template was picked and which special tokens were read.
const probe = `{{ which }}|{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token is defined }}|{{ additional_special_tokens }}`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func jsonString(s string) string {
	return fmt.Sprintf("%q", s) // Go quoting is valid JSON for these ASCII templates
}

func TestLoadTemplate(t *testing.T) {
	tmpl := func(which string) string { return strings.Replace(probe, "{{ which }}", which, 1) }
	tokenConfig := func(chatTemplate string) string {
		return `{"bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>", "lstrip": false},
			"unk_token": null, "pad_token": null,
			"additional_special_tokens": ["<a>", {"content": "<b>"}]` + chatTemplate + `}`
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    string // render of probe
		wantErr []string
	}{
		{
			name:  "chat_template.jinja",
			files: map[string]string{"chat_template.jinja": tmpl("jinja") + "\n"},
			want:  "jinja||||False|",
		},
		{
			name:  "chat_template.json",
			files: map[string]string{"chat_template.json": `{"chat_template": ` + jsonString(tmpl("json")) + `}`},
			want:  "json||||False|",
		},
		{
			name:  "tokenizer_config string, tokens as strings and AddedToken objects",
			files: map[string]string{"tokenizer_config.json": tokenConfig(`, "chat_template": ` + jsonString(tmpl("config")))},
			want:  "config|<s>|</s>||False|['<a>', '<b>']",
		},
		{
			name: "tokenizer_config list picks default",
			files: map[string]string{"tokenizer_config.json": tokenConfig(`, "chat_template": [
				{"name": "tool_use", "template": "tools"}, {"name": "default", "template": ` + jsonString(tmpl("default")) + `}]`)},
			want: "default|<s>|</s>||False|['<a>', '<b>']",
		},
		{
			name: "precedence: jinja over json over config; tokens still from config",
			files: map[string]string{
				"chat_template.jinja":   tmpl("jinja"),
				"chat_template.json":    `{"chat_template": "json"}`,
				"tokenizer_config.json": tokenConfig(`, "chat_template": "config"`),
			},
			want: "jinja|<s>|</s>||False|['<a>', '<b>']",
		},
		{
			name: "an empty chat_template.jinja is still the template",
			files: map[string]string{
				"chat_template.jinja":   "",
				"tokenizer_config.json": tokenConfig(`, "chat_template": "config"`),
			},
			want: "",
		},
		{
			name: "json over config",
			files: map[string]string{
				"chat_template.json":    `{"chat_template": ` + jsonString(tmpl("json")) + `}`,
				"tokenizer_config.json": tokenConfig(`, "chat_template": "config"`),
			},
			want: "json|<s>|</s>||False|['<a>', '<b>']",
		},
		{
			name:    "nothing found names the folder and the three places",
			files:   map[string]string{"tokenizer_config.json": tokenConfig("")},
			wantErr: []string{"no chat template in", "chat_template.jinja", "chat_template.json", `"chat_template" key of tokenizer_config.json`},
		},
		{
			name:    "empty folder",
			files:   map[string]string{},
			wantErr: []string{"no chat template in"},
		},
		{
			name:    "list without default",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "a", "template": "x"}]}`},
			wantErr: []string{"tokenizer_config.json", `["a"]`, `no "default"`},
		},
		{
			name:    "chat_template.json without the key",
			files:   map[string]string{"chat_template.json": `{"template": "x"}`},
			wantErr: []string{"chat_template.json", `no "chat_template" string`},
		},
		{
			name:    "chat_template.json not JSON",
			files:   map[string]string{"chat_template.json": `{`},
			wantErr: []string{"chat_template.json"},
		},
		{
			name:    "malformed tokenizer_config.json",
			files:   map[string]string{"chat_template.jinja": "x", "tokenizer_config.json": `{"bos_token": `},
			wantErr: []string{"tokenizer_config.json", "invalid JSON"},
		},
		{
			name:    "bad token type",
			files:   map[string]string{"tokenizer_config.json": `{"bos_token": 7, "chat_template": "x"}`},
			wantErr: []string{"tokenizer_config.json", "bos_token"},
		},
		{
			name:    "syntax error in chat_template.jinja names file, line and column",
			files:   map[string]string{"chat_template.jinja": "ok\n{% for %}"},
			wantErr: []string{"chat_template.jinja:2:8:"},
		},
		{
			name:    "syntax error in tokenizer_config template names the key",
			files:   map[string]string{"tokenizer_config.json": `{"chat_template": "{{ 1 + }}"}`},
			wantErr: []string{"tokenizer_config.json (chat_template):1:8:"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			tmpl, err := LoadTemplate(dir)
			sameAsFromFolder(t, dir, tmpl, err)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; template from %s", tmpl.Path)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				if strings.Contains(tc.wantErr[0], "no chat template") && !strings.Contains(err.Error(), dir) {
					t.Errorf("error %q does not name the folder %s", err, dir)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(nil, RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := LoadTemplate(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Error("missing folder: no error")
	}
}

// sameAsFromFolder checks that TemplateFromFolder, given the files of dir
// read by loaders.ReadFolder, gives what LoadTemplate(dir) gave (tmpl or
// err), with the folder removed first: it must not touch the disk. dir is
// removed.
func sameAsFromFolder(t *testing.T, dir string, tmpl *Template, err error) {
	t.Helper()
	f, ferr := loaders.ReadFolder(dir, loaders.ChatTemplateJinjaFile, loaders.ChatTemplateJSONFile, loaders.TokenizerConfigFile)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if ferr := os.RemoveAll(dir); ferr != nil {
		t.Fatal(ferr)
	}
	got, gotErr := TemplateFromFolder(f)
	switch {
	case err != nil || gotErr != nil:
		if err == nil || gotErr == nil || gotErr.Error() != err.Error() {
			t.Errorf("TemplateFromFolder error %v, LoadTemplate error %v", gotErr, err)
		}
	case got.Source != tmpl.Source || got.Path != tmpl.Path || !reflect.DeepEqual(got.SpecialTokens, tmpl.SpecialTokens):
		t.Errorf("TemplateFromFolder gave %q from %s with %v; LoadTemplate %q from %s with %v",
			got.Source, got.Path, got.SpecialTokens, tmpl.Source, tmpl.Path, tmpl.SpecialTokens)
	}
}

// TestTemplateFromOpenFolder loads the template of a full checkpoint
// folder through loaders.OpenFolder, as generate.Load does, with the
// folder removed before TemplateFromFolder runs.
func TestTemplateFromOpenFolder(t *testing.T) {
	src := testfiles.Fixture(t, "models", "qwen3-tiny")
	want, err := LoadTemplate(src)
	if err != nil {
		t.Fatal(err)
	}
	if want.Path != filepath.Join(src, "tokenizer_config.json (chat_template)") || len(want.SpecialTokens) == 0 {
		t.Fatalf("fixture changed: template from %s with %v", want.Path, want.SpecialTokens)
	}
	files := map[string]string{}
	for _, name := range []string{"config.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(data)
	}
	dir := writeFiles(t, files)
	f, err := loaders.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	got, err := TemplateFromFolder(f)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != want.Source || !reflect.DeepEqual(got.SpecialTokens, want.SpecialTokens) {
		t.Errorf("got %q with %v, want %q with %v", got.Source, got.SpecialTokens, want.Source, want.SpecialTokens)
	}
	if got.Path != filepath.Join(dir, "tokenizer_config.json (chat_template)") {
		t.Errorf("Path %q does not name the folder's tokenizer_config.json", got.Path)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	a, errA := want.Render(msgs, RenderOptions{AddGenerationPrompt: true})
	b, errB := got.Render(msgs, RenderOptions{AddGenerationPrompt: true})
	if errA != nil || errB != nil || a != b || a == "" {
		t.Errorf("renders differ: %q, %v vs %q, %v", b, errB, a, errA)
	}
}

// TestLoadTemplateRealConfigs loads the tokenizer_config.json files of real
// checkpoints (in ../shared/tokenizers) and renders the reference cases
// with the special tokens taken from the config instead of the case's
// kwargs: the result must not change.
func TestLoadTemplateRealConfigs(t *testing.T) {
	for _, name := range []string{"qwen3", "gemma3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			tmpl, err := LoadTemplate(sharedDir(t, "tokenizers", name))
			if err != nil {
				t.Fatal(err)
			}
			tmpl.Now = pinnedNow
			for _, c := range loadCases(t, filepath.Join(templateDir(t, name), "cases.jsonl")) {
				kw := kwargsMap(c.Kwargs)
				for _, k := range specialTokenKeys {
					delete(kw, k)
				}
				got, err := tmpl.Render(c.Messages, RenderOptions{Kwargs: kw})
				checkCase(t, c, got, err)
			}
		})
	}
	t.Run("mistral config has no template", func(t *testing.T) {
		_, err := LoadTemplate(sharedDir(t, "tokenizers", "mistral"))
		if err == nil || !strings.Contains(err.Error(), "no chat template") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestRenderOptions(t *testing.T) {
	tmpl, err := New("opts", `{% for m in messages %}{{ m.role }}={{ m.content }}{% if m.tool_calls is defined %}+calls{% endif %};{% endfor %}`+
		`{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ eos_token }}|{{ enable_thinking }}|{{ strftime_now('%Y') }}`)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SpecialTokens = map[string]any{"eos_token": "</s>"}
	tmpl.Now = func() time.Time { return time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC) }
	msgs := []Message{
		{Role: "system", Content: "s"},
		{Role: "assistant", Content: nil, ToolCalls: []any{map[string]any{"name": "f"}}},
	}
	for _, tc := range []struct {
		name string
		opts RenderOptions
		want string
	}{
		{"defaults", RenderOptions{}, "system=s;assistant=None+calls;False|None|None|</s>||1999"},
		{"options", RenderOptions{
			AddGenerationPrompt: true,
			Tools:               []any{map[string]any{"type": "function"}},
			Documents:           []string{"d"},
			Now:                 func() time.Time { return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC) },
		}, "system=s;assistant=None+calls;True|[{'type': 'function'}]|['d']|</s>||2030"},
		{"kwargs override special tokens and options", RenderOptions{
			AddGenerationPrompt: true,
			Kwargs:              map[string]any{"eos_token": "<E>", "add_generation_prompt": false, "enable_thinking": false},
		}, "system=s;assistant=None+calls;False|None|None|<E>|False|1999"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(msgs, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestRenderMessageForms(t *testing.T) {
	tmpl, err := New("forms", `{% for m in messages %}{{ m | tojson }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := jinja.DecodeJSON([]byte(`[{"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}], "z": 1}]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msgs any
		want string
	}{
		{"[]Message", []Message{{Role: "user", Content: "hi", ReasoningContent: "r"}}, `{"role": "user", "content": "hi", "reasoning_content": "r"}`},
		{"decoded JSON keeps key order", decoded, `{"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}], "z": 1}`},
		{"[]map sorts keys", []map[string]any{{"role": "user", "content": "x"}}, `{"content": "x", "role": "user"}`},
		{"nil", nil, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tmpl.Render(tc.msgs, RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := tmpl.Render(make(chan int), RenderOptions{}); err == nil {
		t.Error("unconvertible messages: no error")
	}
}

func TestRenderErrors(t *testing.T) {
	tmpl, err := New("errs.jinja", "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}\n{{ messages[0].content + 1 }}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "system", Content: "x"}}, RenderOptions{})
	var te *jinja.TemplateError
	if !errors.As(err, &te) || err.Error() != "first message must be from the user" {
		t.Errorf("got %T %v", err, err)
	}
	_, err = tmpl.Render([]Message{{Role: "user", Content: "x"}}, RenderOptions{})
	var re *jinja.RuntimeError
	if !errors.As(err, &re) || re.Kind != "TypeError" || re.Line != 2 || !strings.Contains(err.Error(), "errs.jinja line 2") {
		t.Errorf("got %T %v", err, err)
	}
}

// TestConcurrentRenders renders one template from many goroutines; run
// with -race to check that renders share no mutable state.
func TestConcurrentRenders(t *testing.T) {
	tmpl, err := ParseFile(filepath.Join(templateDir(t, "qwen3"), "template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	cases := loadCases(t, filepath.Join(templateDir(t, "qwen3"), "cases.jsonl"))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				c := cases[(g+i)%len(cases)]
				got, err := tmpl.Render(c.Messages, RenderOptions{Kwargs: kwargsMap(c.Kwargs)})
				if err != nil || got != c.Rendered {
					t.Errorf("%s: concurrent render differs (err %v)", c.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
