package chat

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gozoo/gozoo/jinja"
)

// TestRenderLimits: a hostile template fails with a *jinja.LimitError
// naming its file and the limit that tripped (10^10 loop iterations stop
// at MaxLoopIterations); RenderOptions.Limits reaches the engine; a
// context's deadline stops an unlimited render. No time is measured.
func TestRenderLimits(t *testing.T) {
	tmpl, err := New("hostile.jinja", "{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{{ m.content }}{% endfor %}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	_, err = tmpl.Render(msgs, RenderOptions{})
	var le *jinja.LimitError
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "hostile.jinja line 1: ") {
		t.Fatalf("got %T %v, want a *jinja.LimitError naming the template", err, err)
	}
	if def := jinja.DefaultLimits(); le.Limit != "MaxLoopIterations" || le.Max != def.MaxLoopIterations {
		t.Errorf("got %v, want MaxLoopIterations = %d", err, def.MaxLoopIterations)
	}

	_, err = tmpl.Render(msgs, RenderOptions{Limits: &jinja.Limits{MaxLoopIterations: 10}})
	if !errors.As(err, &le) || le.Limit != "MaxLoopIterations" || le.Max != 10 {
		t.Errorf("got %v, want MaxLoopIterations = 10", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = tmpl.RenderContext(ctx, msgs, RenderOptions{Limits: &jinja.Limits{MaxSteps: -1, MaxLoopIterations: -1, MaxOutputBytes: -1, MaxAllocBytes: -1}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want context.DeadlineExceeded", err)
	}
}

// TestLongConversation renders 1,000 turns with the vendored reference
// templates under the default limits.
func TestLongConversation(t *testing.T) {
	for _, name := range vendoredTemplates {
		t.Run(name, func(t *testing.T) {
			tmpl, err := ParseFile(filepath.Join(templateDir(t, name), "template.jinja"))
			if err != nil {
				t.Fatal(err)
			}
			var msgs []any
			for i := 0; i < 1000; i++ {
				role := []string{"user", "assistant"}[i%2]
				text := fmt.Sprintf("message %d: %s", i, strings.Repeat("lorem ipsum ", 50))
				if name == "smolvlm" {
					msgs = append(msgs, map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": text}}})
				} else {
					msgs = append(msgs, map[string]any{"role": role, "content": text})
				}
			}
			out, err := tmpl.Render(msgs, RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"bos_token": "<s>", "eos_token": "</s>"}})
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(out, "lorem ipsum"); n != 50*1000 {
				t.Errorf("%d of 50000 words rendered", n)
			}
		})
	}
}
