package chat

import (
	"github.com/gozoo/gozoo/internal/testfiles"

	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gozoo/gozoo/jinja"
)

// The reference cases: real templates with renders by Python's jinja2,
// driven as transformers drives it (see ../shared/chat_templates/README.md).
// Five templates are vendored under testdata/; Gemma 3's and Llama 3's are
// under other licences and only read from ../shared.

var vendoredTemplates = []string{"qwen3", "mistral", "smollm2", "smollm3", "smolvlm"}

var sharedOnlyTemplates = []string{"gemma3", "llama3"}

// pinnedNow is the clock the reference renders used.
func pinnedNow() time.Time { return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC) }

func repoRoot(t *testing.T) string { return testfiles.Root(t) }

// sharedDir returns ../shared/<rel> next to the repo (see testfiles.Require).
func sharedDir(t *testing.T, rel ...string) string {
	t.Helper()
	return testfiles.Require(t, filepath.Join(append([]string{repoRoot(t), "..", "shared"}, rel...)...))
}

// templateDir is where a reference template and its cases live.
func templateDir(t *testing.T, name string) string {
	t.Helper()
	return testfiles.Fixture(t, "chat_templates", name)
}

type refCase struct {
	Name      string
	Messages  jinja.Value
	Kwargs    *jinja.Dict
	Rendered  string
	Error     string // empty for render cases
	ErrorType string // TemplateError: the message must match exactly
}

func loadCases(t *testing.T, path string) []refCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []refCase
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		v, err := jinja.DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		d := v.(*jinja.Dict)
		str := func(k string) string {
			s, _ := d.Get(k)
			x, _ := s.(string)
			return x
		}
		c := refCase{Name: str("name"), Rendered: str("rendered"), Error: str("error"), ErrorType: str("error_type")}
		c.Messages, _ = d.Get("messages")
		kw, _ := d.Get("kwargs")
		c.Kwargs, _ = kw.(*jinja.Dict)
		if c.Kwargs == nil {
			c.Kwargs = jinja.NewDict()
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return out
}

func kwargsMap(d *jinja.Dict) map[string]any {
	m := map[string]any{}
	d.Range(func(k, v jinja.Value) bool {
		m[k.(string)] = v
		return true
	})
	return m
}

// checkCase compares one render with the reference and reports whether it
// matched.
func checkCase(t *testing.T, c refCase, got string, err error) bool {
	t.Helper()
	if c.Error == "" {
		if err != nil {
			t.Errorf("%s: unexpected error: %v", c.Name, err)
			return false
		}
		if got != c.Rendered {
			t.Errorf("%s: render differs\n got: %q\nwant: %q", c.Name, got, c.Rendered)
			return false
		}
		return true
	}
	if err == nil {
		t.Errorf("%s: want error %s %q, got render %q", c.Name, c.ErrorType, c.Error, got)
		return false
	}
	if c.ErrorType == "TemplateError" {
		var te *jinja.TemplateError
		if !errors.As(err, &te) || err.Error() != c.Error {
			t.Errorf("%s: want TemplateError %q, got %T %q", c.Name, c.Error, err, err.Error())
			return false
		}
	}
	return true
}

// templateSHA256 pins the reference templates byte for byte (the values
// published in ../shared/chat_templates/README.md): an edited copy would
// make the reference renders meaningless.
var templateSHA256 = map[string]string{
	"qwen3":   "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5",
	"gemma3":  "7de1c58e208eda46e9c7f86397df37ec49883aeece39fb961e0a6b24088dd3c4",
	"llama3":  "ba03a121d097859c7b5b9cd03af99aafe95275210d2876f642ad9929a150f122",
	"mistral": "7e995b379ec01747807246483647cd99030abf331653f1119e16d7ac041a3495",
	"smolvlm": "830005085ddd94cec605b6e21b885b28ffad6e3f82ee6a212c523533e8f04f01",
	"smollm2": "872be49dbb638044ad01b60388f48d469ff2980e5f0dccdc22ec907db54d0788",
	"smollm3": "3e0e275a527f249670056e0078e474eadbdd007c134b4fdfae5a7b3089702814",
}

// TestReferenceCases renders every case of the seven reference templates
// through the chat API and compares byte for byte.
func TestReferenceCases(t *testing.T) {
	for _, name := range append(append([]string{}, vendoredTemplates...), sharedOnlyTemplates...) {
		t.Run(name, func(t *testing.T) {
			dir := templateDir(t, name)
			src, err := os.ReadFile(filepath.Join(dir, "template.jinja"))
			if err != nil {
				t.Fatal(err)
			}
			if sum := sha256.Sum256(src); hex.EncodeToString(sum[:]) != templateSHA256[name] {
				t.Fatalf("%s/template.jinja is not the reference template (sha256 %x)", dir, sum)
			}
			tmpl, err := ParseFile(filepath.Join(dir, "template.jinja"))
			if err != nil {
				t.Fatal(err)
			}
			tmpl.Now = pinnedNow
			var rendered, renderedOK, errs, errsOK int
			for _, c := range loadCases(t, filepath.Join(dir, "cases.jsonl")) {
				got, err := tmpl.Render(c.Messages, RenderOptions{Kwargs: kwargsMap(c.Kwargs)})
				ok := checkCase(t, c, got, err)
				if c.Error == "" {
					rendered++
					if ok {
						renderedOK++
					}
				} else {
					errs++
					if ok {
						errsOK++
					}
				}
			}
			t.Logf("%s: %d/%d rendered cases, %d/%d error cases", name, renderedOK, rendered, errsOK, errs)
		})
	}
}

// TestSharedDirMissing checks the skip rule itself: an absent shared
// fixture skips (outside CI).
func TestSharedDirMissing(t *testing.T) {
	if os.Getenv("CI") == "true" {
		t.Skip("under CI=true a missing shared fixture fails the test by design")
	}
	reached := false
	t.Run("absent", func(t *testing.T) {
		sharedDir(t, "chat_templates", "no-such-template")
		reached = true
	})
	if reached {
		t.Error("sharedDir returned for a missing folder instead of skipping")
	}
}
