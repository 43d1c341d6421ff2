package jinja

import (
	"regexp"
	"bufio"
	"os"
	"testing"
	"time"
)

var genRe = regexp.MustCompile(`(<[a-z_]+ object(?: [a-z_]+)?) at 0x[0-9a-f]+>`)

func TestTmpFuzz(t *testing.T) {
	f, err := os.Open(os.Getenv("FUZZFILE"))
	if err != nil {
		t.Skip()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	bad := 0
	for sc.Scan() {
		v, _ := DecodeJSON(sc.Bytes())
		c := v.(*Dict)
		src, _ := c.Get("template")
		want, isRender := c.Get("rendered")
		et, _ := c.Get("error_type")
		em, _ := c.Get("error")
		varsV, _ := c.Get("vars")
		vars := map[string]Value{}
		varsV.(*Dict).Range(func(k, v Value) bool { vars[k.(string)] = v; return true })
		got, err := render(src.(string), vars, time.Now)
		if ws, ok := want.(string); ok {
			want = genRe.ReplaceAllString(ws, "$1>")
		}
		ok := (isRender && err == nil && got == want) || (!isRender && err != nil)
		if !ok {
			bad++
			if bad < 60 {
				t.Logf("%s\n   py: %q %v %v\n   go: %q %v", src, want, et, em, got, err)
			}
		}
	}
	t.Logf("mismatches: %d", bad)
}
