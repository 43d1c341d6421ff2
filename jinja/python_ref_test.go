package jinja

import (
	"bufio"
	"errors"
	"os"
	"testing"
	"time"
)

// TestPythonReference renders the snippets of testdata/python_ref.jsonl,
// whose expected results were produced by Python's jinja2 3.1.6 in
// transformers' chat-template environment (testdata/gen_python_ref.py).
// Renders must match byte for byte; where Python failed, the engine must
// fail too, with the same message for raise_exception (TemplateError).
func TestPythonReference(t *testing.T) {
	f, err := os.Open("testdata/python_ref.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	clock := func() time.Time { return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC) }
	n := 0
	for sc.Scan() {
		v, err := DecodeJSON(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		c := v.(*Dict)
		get := func(k string) (string, bool) {
			x, ok := c.Get(k)
			s, _ := x.(string)
			return s, ok
		}
		name, _ := get("name")
		src, _ := get("template")
		want, isRender := get("rendered")
		errType, _ := get("error_type")
		errMsg, _ := get("error")
		varsV, _ := c.Get("vars")
		vars := map[string]Value{}
		varsV.(*Dict).Range(func(k, v Value) bool {
			vars[k.(string)] = v
			return true
		})
		n++
		t.Run(name, func(t *testing.T) {
			got, err := render(src, vars, clock)
			switch {
			case isRender && err != nil:
				t.Fatalf("template %q: unexpected error: %v", src, err)
			case isRender && got != want:
				t.Fatalf("template %q:\n got: %q\nwant: %q", src, got, want)
			case !isRender && err == nil:
				t.Fatalf("template %q: rendered %q, want %s: %s", src, got, errType, errMsg)
			case errType == "TemplateError":
				var te *TemplateError
				if !errors.As(err, &te) || te.Error() != errMsg {
					t.Fatalf("template %q: got %T %v, want TemplateError %q", src, err, err, errMsg)
				}
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d reference cases", n)
	}
}

func render(src string, vars map[string]Value, now func() time.Time) (string, error) {
	tmpl, err := Parse("t", src)
	if err != nil {
		return "", err
	}
	return tmpl.Render(vars, &RenderOptions{Now: now})
}
