package jinja

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// measure renders src under DefaultLimits (or lim) and reports the error,
// the time taken and the bytes allocated meanwhile (TotalAlloc, which
// counts every allocation, freed or not: an upper bound on the memory
// the render could have held).
func measure(t *testing.T, name, src string, lim *Limits) (error, time.Duration, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	tmpl, err := Parse(name, src)
	if err == nil {
		_, err = tmpl.Render(nil, &RenderOptions{Limits: lim})
	}
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return err, took, after.TotalAlloc - before.TotalAlloc
}

// wantLimit checks that err is a *LimitError for one of limits, naming
// the template and the limit's value.
func wantLimit(t *testing.T, err error, name string, limits ...string) *LimitError {
	t.Helper()
	var le *LimitError
	if !errors.As(err, &le) {
		t.Fatalf("got %T %v, want a *LimitError", err, err)
	}
	if !contains1(limits, le.Limit) {
		t.Errorf("limit %s (%v), want one of %v", le.Limit, err, limits)
	}
	msg := err.Error()
	if le.Name != name || !strings.HasPrefix(msg, name) || !strings.Contains(msg, fmt.Sprintf("%s = %d", le.Limit, le.Max)) {
		t.Errorf("message %q does not name the template %q and the limit with its value", msg, name)
	}
	return le
}

// The report: nested loops of 10^10 iterations ran for hours.
func TestHostileNestedLoops(t *testing.T) {
	src := "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
	err, took, alloc := measure(t, "loops.jinja", src, nil)
	wantLimit(t, err, "loops.jinja", "MaxLoopIterations", "MaxSteps", "MaxOutputBytes")
	t.Logf("%v after %v, %d MiB allocated", err, took, alloc>>20)
	if took > 20*time.Second { // the bound; -race is several times slower
		t.Errorf("took %v, want well under 20 s", took)
	}
}

// The report: a template building a 10 GB string ran out of
// memory. It must fail before allocating it, whether in one expression or
// by doubling.
func TestHostileHugeString(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"multiplication", "{{ 'x' * 10000000000 }}"},
		{"doubling with ~", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"},
		{"doubling with +", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}"},
		{"doubling in a set block", "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set b %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = b %}{% endfor %}"},
		{"doubling in a macro", "{% macro d(s, n) %}{% if n %}{{ d(s ~ s, n - 1) }}{% else %}{{ s | length }}{% endif %}{% endmacro %}{{ d('x', 40) }}"},
		{"output", "{% set s = 'x' * 1000000 %}{% for i in range(10000) %}{{ s }}{% endfor %}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, took, alloc := measure(t, "huge.jinja", tc.src, nil)
			wantLimit(t, err, "huge.jinja", "MaxOutputBytes", "MaxAllocBytes")
			t.Logf("%v after %v, %d MiB allocated", err, took, alloc>>20)
			if alloc > 1<<30 {
				t.Errorf("allocated %d MiB, want far under 2 GB", alloc>>20)
			}
		})
	}
}

// A macro calling itself without end fails at MaxDepth; one calling itself
// twice (2^60 calls) at MaxSteps.
func TestHostileRecursion(t *testing.T) {
	err, _, _ := measure(t, "rec.jinja", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", nil)
	le := wantLimit(t, err, "rec.jinja", "MaxDepth")
	if le.Max != 256 || le.Line != 1 {
		t.Errorf("got %+v", le)
	}
	err, took, _ := measure(t, "rec.jinja", "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}", nil)
	wantLimit(t, err, "rec.jinja", "MaxSteps")
	t.Logf("%v after %v", err, took)
	err, _, _ = measure(t, "rec.jinja", "{% for x in [[[]]] recursive %}{{ loop([x]) }}{% endfor %}", nil)
	wantLimit(t, err, "rec.jinja", "MaxDepth")
	err, _, _ = measure(t, "rec.jinja", "{% macro m() %}{% call m() %}{% endcall %}{{ caller }}{% endmacro %}{{ m() }}", nil)
	wantLimit(t, err, "rec.jinja", "MaxDepth")
}

// TestHostileTemplates are the ways a template can ask for unbounded time
// or memory; each must fail with a *LimitError (or jinja2's own error),
// quickly, and having allocated little.
func TestHostileTemplates(t *testing.T) {
	if testing.Short() {
		t.Skip("about 10 s of hostile renders")
	}
	const big = "{% set s = 'x' * 1000000 %}"
	for _, tc := range []struct {
		name, src string
		limits    []string // empty: any error (jinja2's own) is fine
	}{
		{"range", "{{ range(10000000000) | length }}", nil},
		{"list multiplication", "{{ ([1, 2] * 10000000000) | length }}", []string{"MaxOutputBytes"}},
		{"tuple multiplication", "{{ ((1,) * 10000000000) | length }}", []string{"MaxOutputBytes"}},
		{"list doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", []string{"MaxOutputBytes", "MaxAllocBytes", "MaxSteps"}},
		{"str.center", "{{ 'x'.center(10000000000) }}", []string{"MaxOutputBytes"}},
		{"str.ljust", "{{ 'x'.ljust(10000000000, '*') }}", []string{"MaxOutputBytes"}},
		{"str.rjust", "{{ 'x'.rjust(10000000000) }}", []string{"MaxOutputBytes"}},
		{"str.zfill", "{{ '1'.zfill(10000000000) }}", []string{"MaxOutputBytes"}},
		{"center filter", "{{ 'x' | center(10000000000) }}", []string{"MaxOutputBytes"}},
		{"indent width", "{{ 'a\nb' | indent(10000000000) }}", []string{"MaxOutputBytes"}},
		{"indent lines", big + "{{ ('\n' * 1000000) | indent(s) }}", []string{"MaxOutputBytes"}},
		{"% width", "{{ '%10000000000s' % 'x' }}", []string{"MaxOutputBytes"}},
		{"% star width", "{{ '%*d' % (10000000000, 1) }}", []string{"MaxOutputBytes"}},
		{"% precision", "{{ '%.10000000000f' % 1.5 }}", []string{"MaxOutputBytes"}},
		{"% many", big + "{{ ('%s' * 1000) % ((s,) * 1000) }}", []string{"MaxOutputBytes"}},
		{"format width", "{{ '{:>10000000000}'.format('x') }}", []string{"MaxOutputBytes"}},
		{"format precision", "{{ '{:.999999999f}'.format(1.5) }}", []string{"MaxOutputBytes"}},
		{"format many", big + "{{ ('{0}' * 1000).format(s) }}", []string{"MaxOutputBytes"}},
		{"format nested specs", "{{ '{:{:{}}}'.format(1, 2, 3) }}", nil},
		{"tojson indent", "{{ [[1]] | tojson(indent=10000000000) }}", []string{"MaxOutputBytes"}},
		{"replace", big + "{{ s.replace('x', s) }}", []string{"MaxOutputBytes"}},
		{"replace filter", big + "{{ s | replace('x', s) }}", []string{"MaxOutputBytes"}},
		{"join filter", big + "{{ ([s] * 1000) | join }}", []string{"MaxOutputBytes"}},
		{"str.join", big + "{{ ''.join([s] * 1000) }}", []string{"MaxOutputBytes"}},
		{"~ chain", big + "{{ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s }}", []string{"MaxOutputBytes"}},
		{"repr of a shared list", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}", []string{"MaxOutputBytes", "MaxSteps"}},
		{"tojson of a shared list", "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l | tojson }}", []string{"MaxOutputBytes", "MaxSteps"}},
		{"comparing shared lists", "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a == ns.b }}", []string{"MaxSteps"}},
		{"ordering shared lists", "{% set ns = namespace(a=[1], b=[1]) %}{% for i in range(64) %}{% set ns.a = [ns.a, ns.a] %}{% set ns.b = [ns.b, ns.b] %}{% endfor %}{{ ns.a < ns.b }}", []string{"MaxSteps"}},
		{"hashing shared tuples", "{% set ns = namespace(t=(1,)) %}{% for i in range(64) %}{% set ns.t = (ns.t, ns.t) %}{% endfor %}{{ {ns.t: 1} | length }}", []string{"MaxOutputBytes", "MaxSteps"}},
		{"deeply nested list", "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}", []string{"MaxNesting"}},
		{"deeply nested comparison", "{% set ns = namespace(a=[], b=[]) %}{% for i in range(100000) %}{% set ns.a = [ns.a] %}{% set ns.b = [ns.b] %}{% endfor %}{{ ns.a == ns.b }}", []string{"MaxNesting"}},
		{"deeply nested dict key", "{% set ns = namespace(t=()) %}{% for i in range(100000) %}{% set ns.t = (ns.t,) %}{% endfor %}{{ {ns.t: 1} }}", []string{"MaxNesting"}},
		{"string to list", "{% set s = 'x' * 50000000 %}{{ s | list | length }}", []string{"MaxOutputBytes"}},
		{"loop over a string", "{% set s = 'x' * 50000000 %}{% for c in s %}{% endfor %}", []string{"MaxOutputBytes"}},
		{"split", "{{ (' x' * 30000000).split() | length }}", []string{"MaxOutputBytes"}},
		{"split on a separator", "{{ (',' * 60000000).split(',') | length }}", []string{"MaxOutputBytes"}},
		{"splitlines", "{{ ('\n' * 60000000).splitlines() | length }}", []string{"MaxOutputBytes"}},
		{"map over copies", big + "{{ ([s] * 1000) | map('upper') | list | length }}", []string{"MaxAllocBytes", "MaxSteps"}},
		{"set blocks in a loop", "{% set s = 'x' * 60000000 %}{% for i in range(1000) %}{% set b %}{{ s }}{% endset %}{% endfor %}", []string{"MaxAllocBytes", "MaxSteps"}},
		{"scanning in a loop", big + "{% for i in range(100000) %}{{ s.count('y') }}{% endfor %}", []string{"MaxSteps"}},
		{"comparing in a loop", big + "{% set t = 'x' * 1000000 %}{% for i in range(100000) %}{{ s == t }}{% endfor %}", []string{"MaxSteps"}},
		{"dict lookups in a loop", big + "{% set d = {s: 1} %}{% for i in range(100000) %}{{ d[s] }}{% endfor %}", []string{"MaxSteps"}},
		{"ranges in a loop", "{% for i in range(100000) %}{% set r = range(100000) %}{% endfor %}", []string{"MaxSteps", "MaxAllocBytes"}},
		{"sorting in a loop", "{% set l = range(100000) | list %}{% for i in range(100000) %}{% set r = l | sort %}{% endfor %}", []string{"MaxSteps", "MaxAllocBytes"}},
		{"loop filter", "{% for i in range(100000) %}{% for j in range(100000) if j < 0 %}{% endfor %}{% endfor %}", []string{"MaxLoopIterations", "MaxSteps"}},
		{"strftime_now", "{{ strftime_now('%c' * 10000000) }}", []string{"MaxOutputBytes"}},
		{"slice of a huge list", "{{ (range(100000) | list * 300)[::1] | length }}", []string{"MaxOutputBytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, took, alloc := measure(t, "hostile.jinja", tc.src, nil)
			if err == nil {
				t.Fatal("rendered")
			}
			if len(tc.limits) > 0 {
				wantLimit(t, err, "hostile.jinja", tc.limits...)
			}
			t.Logf("%v after %v, %d MiB allocated", err, took, alloc>>20)
			if took > 20*time.Second { // the bound; -race is several times slower
				t.Errorf("took %v", took)
			}
			if alloc > 1500<<20 {
				t.Errorf("allocated %d MiB", alloc>>20)
			}
		})
	}
}

// TestHostileParse: templates nested too deeply to evaluate (or even
// parse) on a bounded stack fail at parse time.
func TestHostileParse(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"parentheses", "{{ " + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + " }}"},
		{"lists", "{{ " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + " }}"},
		{"not", "{{ " + strings.Repeat("not ", 100000) + "1 }}"},
		{"unary minus", "{{ " + strings.Repeat("-", 100000) + "1 }}"},
		{"operator chain", "{{ 1" + strings.Repeat(" + 1", 100000) + " }}"},
		{"attribute chain", "{{ x" + strings.Repeat(".a", 100000) + " }}"},
		{"filter chain", "{{ x" + strings.Repeat(" | trim", 100000) + " }}"},
		{"conditional chain", "{{ 1" + strings.Repeat(" if x else 1", 100000) + " }}"},
		{"blocks", strings.Repeat("{% if x %}", 100000) + strings.Repeat("{% endif %}", 100000)},
		{"macros", strings.Repeat("{% macro m() %}", 100000) + strings.Repeat("{% endmacro %}", 100000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse("deep.jinja", tc.src)
			wantLimit(t, err, "deep.jinja", "MaxNesting")
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	// adjacent string literals concatenate in linear time
	start := time.Now()
	tmpl, err := Parse("s", "{{ "+strings.Repeat("'ab' ", 200000)+"}}")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tmpl.Render(nil, nil); err != nil || len(got) != 400000 {
		t.Errorf("got %d bytes, %v", len(got), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("200000 adjacent literals took %v", took)
	}
}

// A render stops soon after its context is cancelled or times out.
func TestRenderContextCancel(t *testing.T) {
	tmpl, err := Parse("slow.jinja", "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}
	unlimited := &RenderOptions{Limits: &Limits{MaxSteps: -1, MaxLoopIterations: -1, MaxOutputBytes: -1, MaxAllocBytes: -1}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tmpl.RenderContext(ctx, nil, unlimited); !errors.Is(err, context.Canceled) {
		t.Errorf("already cancelled: got %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	var cancelled time.Time
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancelled = time.Now()
		cancel()
	}()
	_, err = tmpl.RenderContext(ctx, nil, unlimited)
	lag := time.Since(cancelled)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "slow.jinja line 1: ") {
		t.Errorf("got %v, want a context.Canceled naming the template", err)
	}
	t.Logf("%v, %v after cancel", err, lag)
	if lag > time.Second {
		t.Errorf("stopped %v after cancel", lag)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tmpl.RenderContext(ctx, nil, unlimited); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: got %v", err)
	}
}

func TestLimitsOptions(t *testing.T) {
	src := "{% for i in range(100) %}{{ i }}{% endfor %}"
	tmpl, err := Parse("l", src)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Limits() != DefaultLimits() {
		t.Errorf("Limits() = %+v", tmpl.Limits())
	}
	_, err = tmpl.Render(nil, &RenderOptions{Limits: &Limits{MaxLoopIterations: 50}})
	if le := wantLimit(t, err, "l", "MaxLoopIterations"); le.Max != 50 {
		t.Errorf("got %+v", le)
	}
	_, err = tmpl.Render(nil, &RenderOptions{Limits: &Limits{MaxOutputBytes: 100}})
	wantLimit(t, err, "l", "MaxOutputBytes")
	_, err = tmpl.Render(nil, &RenderOptions{Limits: &Limits{MaxSteps: 100}})
	wantLimit(t, err, "l", "MaxSteps")
	// range(100) builds 1600 bytes, the output is 190
	if _, err := tmpl.Render(nil, &RenderOptions{Limits: &Limits{MaxLoopIterations: 100, MaxOutputBytes: 1600}}); err != nil {
		t.Errorf("exactly at the limits: %v", err)
	}
	// limits given to ParseWithLimits are the template's defaults
	tmpl, err = ParseWithLimits("l", src, Limits{MaxLoopIterations: 10})
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Limits().MaxLoopIterations != 10 || tmpl.Limits().MaxSteps != DefaultLimits().MaxSteps {
		t.Errorf("Limits() = %+v", tmpl.Limits())
	}
	_, err = tmpl.Render(nil, nil)
	wantLimit(t, err, "l", "MaxLoopIterations")
	if _, err := tmpl.Render(nil, &RenderOptions{Limits: &Limits{MaxLoopIterations: -1}}); err != nil {
		t.Errorf("limit turned off: %v", err)
	}
	// nesting
	if _, err := ParseWithLimits("n", "{{ ((((1)))) }}", Limits{MaxNesting: 4}); err == nil {
		t.Error("MaxNesting 4: no error")
	}
	if _, err := ParseWithLimits("n", "{{ ((((1)))) }}", Limits{MaxNesting: 20}); err != nil {
		t.Errorf("MaxNesting 20: %v", err)
	}
}

// referenceTemplates are the reference chat templates (Gemma 3's and
// Llama 3's only when ../shared is present).
var referenceTemplates = []string{"qwen3", "mistral", "smollm2", "smollm3", "smolvlm", "gemma3", "llama3"}

// longConversation is n alternating user and assistant turns in the form
// template name takes (SmolVLM's content is a list of parts).
func longConversation(name string, n int) *List {
	msgs := NewList()
	for i := 0; i < n; i++ {
		m := NewDict()
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m.SetString("role", role)
		text := fmt.Sprintf("Turn %d: %s", i, strings.Repeat("some words of a long conversation ", 20))
		if name == "smolvlm" {
			part := NewDict()
			part.SetString("type", "text")
			part.SetString("text", text)
			m.SetString("content", NewList(part))
		} else {
			m.SetString("content", text)
		}
		msgs.Items = append(msgs.Items, m)
	}
	return msgs
}

// TestLongConversations renders 1,000- and 10,000-message conversations
// with every reference template under DefaultLimits, and checks that they
// use a small fraction of the budget.
func TestLongConversations(t *testing.T) {
	lim := DefaultLimits()
	for _, name := range referenceTemplates {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(testfiles.Fixture(t, "chat_templates", name), "template.jinja")
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := Parse(path, string(src))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1000, 10000} {
				vars := map[string]Value{"messages": longConversation(name, n), "add_generation_prompt": true,
					"bos_token": "<s>", "eos_token": "</s>"}
				out, st, err := tmpl.render(context.Background(), vars, nil)
				if err != nil {
					t.Fatalf("%d messages: %v", n, err)
				}
				t.Logf("%d messages: %d bytes out; %d steps (%.2f%% of MaxSteps), %d iterations (%.2f%%), %d MiB built (%.1f%%)",
					n, len(out), st.steps, 100*float64(st.steps)/float64(lim.MaxSteps),
					st.iters, 100*float64(st.iters)/float64(lim.MaxLoopIterations),
					st.alloc>>20, 100*float64(st.alloc)/float64(lim.MaxAllocBytes))
				if n == 1000 && (st.steps > lim.MaxSteps/100 || st.iters > lim.MaxLoopIterations/100 || st.alloc > lim.MaxAllocBytes/20) {
					t.Errorf("1,000 messages use more than 1%% of the steps or iterations, or 5%% of the bytes")
				}
			}
		})
	}
}
