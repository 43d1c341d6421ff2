package main

import (
	"github.com/gozoo/gozoo/internal/testfiles"

	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reference chat templates: five vendored under testdata/, Gemma 3's
// and Llama 3's (other licences) only in ../shared next to the repo.
var (
	templateVendored   = []string{"qwen3", "mistral", "smollm2", "smollm3", "smolvlm"}
	templateSharedOnly = []string{"gemma3", "llama3"}
)

// templateCaseDir finds a reference template's folder (see
// testfiles.Fixture).
func templateCaseDir(t *testing.T, name string) string {
	t.Helper()
	return testfiles.Fixture(t, "chat_templates", name)
}

type templateRun struct {
	code   int
	stdout string
	stderr string
}

func runTemplateCmd(t *testing.T, stdin string, args ...string) templateRun {
	t.Helper()
	var out, errOut bytes.Buffer
	code := dispatch(append([]string{"template"}, args...), strings.NewReader(stdin), &out, &errOut)
	return templateRun{code: code, stdout: out.String(), stderr: errOut.String()}
}

// TestTemplateReferenceCases pipes each reference cases.jsonl through
// `gozoo template` (the extra name/rendered/error keys are ignored by the
// command) and checks every output line.
func TestTemplateReferenceCases(t *testing.T) {
	for _, name := range append(append([]string{}, templateVendored...), templateSharedOnly...) {
		t.Run(name, func(t *testing.T) {
			dir := templateCaseDir(t, name)
			input, err := os.ReadFile(filepath.Join(dir, "cases.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			res := runTemplateCmd(t, string(input), "--template", filepath.Join(dir, "template.jinja"), "--now", "2025-07-10T12:00:00")
			if res.code != 0 {
				t.Fatalf("exit %d, stderr: %s", res.code, res.stderr)
			}
			type refCase struct {
				Name      string  `json:"name"`
				Rendered  *string `json:"rendered"`
				Error     string  `json:"error"`
				ErrorType string  `json:"error_type"`
			}
			var cases []refCase
			for _, line := range strings.Split(strings.TrimSpace(string(input)), "\n") {
				var c refCase
				if err := json.Unmarshal([]byte(line), &c); err != nil {
					t.Fatal(err)
				}
				cases = append(cases, c)
			}
			outLines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
			if len(outLines) != len(cases) {
				t.Fatalf("%d output lines for %d cases:\n%s", len(outLines), len(cases), res.stdout)
			}
			var rendered, renderedOK, errs, errsOK int
			for i, c := range cases {
				var got struct {
					Rendered *string `json:"rendered"`
					Error    *string `json:"error"`
				}
				if err := json.Unmarshal([]byte(outLines[i]), &got); err != nil {
					t.Fatalf("%s: output line %q: %v", c.Name, outLines[i], err)
				}
				if c.Rendered != nil {
					rendered++
					if got.Rendered == nil || *got.Rendered != *c.Rendered {
						t.Errorf("%s: got %s, want rendered %q", c.Name, outLines[i], *c.Rendered)
						continue
					}
					renderedOK++
					continue
				}
				errs++
				switch {
				case got.Error == nil:
					t.Errorf("%s: got %s, want error %q", c.Name, outLines[i], c.Error)
				case c.ErrorType == "TemplateError" && *got.Error != c.Error:
					t.Errorf("%s: error %q, want exactly %q", c.Name, *got.Error, c.Error)
				default:
					errsOK++
				}
			}
			t.Logf("%s: %d/%d rendered cases, %d/%d error cases", name, renderedOK, rendered, errsOK, errs)
		})
	}
}

func TestTemplateCommandInputHandling(t *testing.T) {
	dir := t.TempDir()
	tmplPath := filepath.Join(dir, "t.jinja")
	src := "{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}{{ extra | tojson if extra is defined }}{% if add_generation_prompt %}>{% endif %}" +
		"{% if messages and messages[0].content == 'boom' %}{{ raise_exception('no boom') }}{% endif %}"
	if err := os.WriteFile(tmplPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	input := strings.Join([]string{
		`{"messages": [{"role": "user", "content": "hi <b>"}], "kwargs": {"extra": {"z": 1, "a": [1, 2.0, null]}}}`,
		``,
		`not json`,
		`{"messages": [{"role": "user", "content": "boom"}]}`,
		`[1, 2]`,
		`{"kwargs": {}}`,
		`{"messages": {}, "kwargs": {}}`,
		`{"messages": [], "kwargs": []}`,
		`{"messages": [], "kwargs": {"add_generation_prompt": true}, "name": "ignored"}`,
		`{"messages": [{"role": "user", "content": "no newline at end"}]}`,
	}, "\n")
	res := runTemplateCmd(t, input, "--template", tmplPath)
	if res.code != 1 {
		t.Errorf("exit %d, want 1 (some lines malformed); stderr %s", res.code, res.stderr)
	}
	want := []string{
		`{"rendered":"user:hi <b>|{\"z\": 1, \"a\": [1, 2.0, null]}"}`,
		`{"error":"line 3: invalid JSON: invalid character 'o' in literal null (expecting 'u')"}`,
		`{"error":"no boom"}`,
		`{"error":"line 5: want a JSON object {\"messages\": [...], \"kwargs\": {...}}"}`,
		`{"error":"line 6: no \"messages\" key"}`,
		`{"error":"line 7: \"messages\" must be a list"}`,
		`{"error":"line 8: \"kwargs\" must be an object"}`,
		`{"rendered":">"}`,
		`{"rendered":"user:no newline at end|"}`,
	}
	got := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), res.stdout)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, got[i], want[i])
		}
	}

	// All lines valid: exit 0 even though a render failed.
	res = runTemplateCmd(t, `{"messages": [{"role": "user", "content": "boom"}]}`+"\n", "--template", tmplPath)
	if res.code != 0 || res.stdout != `{"error":"no boom"}`+"\n" {
		t.Errorf("exit %d, stdout %q", res.code, res.stdout)
	}
}

func TestTemplateCommandClock(t *testing.T) {
	dir := t.TempDir()
	tmplPath := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(tmplPath, []byte(`{{ strftime_now("%d %B %Y %H:%M") }}`), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runTemplateCmd(t, `{"messages": []}`, "--template", tmplPath, "--now", "2025-07-10T12:00:00")
	if res.code != 0 || res.stdout != `{"rendered":"10 July 2025 12:00"}`+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	// Default clock: today's date, whatever it is.
	res = runTemplateCmd(t, `{"messages": []}`, "--template", tmplPath)
	if res.code != 0 || !strings.HasPrefix(res.stdout, `{"rendered":"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

func TestTemplateCommandModelDir(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"bos_token": {"content": "<s>", "__type": "AddedToken"}, "eos_token": "</s>",
		"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}"}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runTemplateCmd(t, `{"messages": [{"role": "user", "content": "x"}], "kwargs": {"eos_token": "<E>"}}`, "--model", dir)
	if res.code != 0 || res.stdout != `{"rendered":"<s>x<E>"}`+"\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

func TestTemplateCommandUsageErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(bad, []byte("line one\n{% if %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"no template", nil, "exactly one of --template FILE or --model DIR"},
		{"both", []string{"--template", bad, "--model", dir}, "exactly one of"},
		{"missing file", []string{"--template", filepath.Join(dir, "nope.jinja")}, "nope.jinja"},
		{"syntax error names file and line", []string{"--template", bad}, bad + ":2:7: Expected an expression"},
		{"no template in model dir", []string{"--model", dir}, "no chat template in " + dir},
		{"bad clock", []string{"--template", bad, "--now", "tomorrow"}, `--now "tomorrow"`},
		{"stray argument", []string{"--template", bad, "extra"}, "unexpected arguments"},
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runTemplateCmd(t, "", tc.args...)
			if res.code != 2 {
				t.Errorf("exit %d, want 2", res.code)
			}
			if !strings.Contains(res.stderr, tc.wantStderr) {
				t.Errorf("stderr %q does not mention %q", res.stderr, tc.wantStderr)
			}
		})
	}
	res := runTemplateCmd(t, "", "-h")
	if res.code != 0 || !strings.Contains(res.stderr, "Exit status") {
		t.Errorf("-h: exit %d, stderr %q", res.code, res.stderr)
	}
}
