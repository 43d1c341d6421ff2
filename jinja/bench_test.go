package jinja

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// qwen3Template parses the vendored Qwen3 reference template.
func qwen3Template(tb testing.TB) *Template {
	tb.Helper()
	path := filepath.Join(testfiles.Fixture(tb, "chat_templates", "qwen3"), "template.jinja")
	src, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl, err := Parse(path, string(src))
	if err != nil {
		tb.Fatal(err)
	}
	return tmpl
}

// conversation builds a system prompt followed by n-1 alternating user and
// assistant turns; assistant turns carry a <think> block, as Qwen3's do.
func conversation(n int) *List {
	msgs := NewList()
	for i := 0; i < n; i++ {
		m := NewDict()
		switch {
		case i == 0:
			m.SetString("role", "system")
			m.SetString("content", "You are a helpful assistant. Answer briefly and cite your sources.")
		case i%2 == 1:
			m.SetString("role", "user")
			m.SetString("content", fmt.Sprintf("Question %d: what is %d times %d, and why does it matter?", i, i, i+1))
		default:
			m.SetString("role", "assistant")
			m.SetString("content", fmt.Sprintf("<think>\n%d times %d is %d.\n</think>\n\nIt is %d; it matters because arithmetic is the basis of most things.", i-1, i, (i-1)*i, (i-1)*i))
		}
		msgs.Items = append(msgs.Items, m)
	}
	return msgs
}

// BenchmarkRender renders the Qwen3 template over a 20-message
// conversation: the cost of one prompt on a typical chat.
func BenchmarkRender(b *testing.B) {
	tmpl := qwen3Template(b)
	vars := map[string]Value{"messages": conversation(20), "add_generation_prompt": true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(vars, nil); err != nil {
			b.Fatal(err)
		}
	}
}
