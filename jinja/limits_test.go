package jinja

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/internal/testfiles"
)

// errHung is the cause of the hang guard's context.
var errHung = errors.New("hang guard: still running after " + leaktest.HangGuard.String())

// outcome is what a hostile render did: its error, the engine's state
// when it stopped (nil if the template did not parse), and the bytes the
// Go heap allocated meanwhile (TotalAlloc, which counts every
// allocation, freed or not: an upper bound on the memory the render could
// have held).
type outcome struct {
	err   error
	st    *state
	alloc uint64
}

// measure parses and renders src under DefaultLimits (or lim), with
// leaktest.HangGuard as its context's deadline.
func measure(t *testing.T, name, src string, lim *Limits) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(context.Background(), leaktest.HangGuard, errHung)
	defer cancel()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var o outcome
	tmpl, err := Parse(name, src)
	if err == nil {
		_, o.st, err = tmpl.render(ctx, nil, &RenderOptions{Limits: lim})
	}
	runtime.ReadMemStats(&after)
	o.err, o.alloc = err, after.TotalAlloc-before.TotalAlloc
	if errors.Is(err, errHung) {
		t.Fatalf("%s hung: %v", name, err)
	}
	return o
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

// overLimits names the limits whose counters (steps, loop iterations,
// bytes built) the render went past; nil for a nil state.
func (st *state) overLimits() []string {
	if st == nil {
		return nil
	}
	var over []string
	for _, c := range []struct {
		limit  string
		n, max int64
	}{
		{"MaxSteps", st.steps, st.lim.MaxSteps},
		{"MaxLoopIterations", st.iters, st.lim.MaxLoopIterations},
		{"MaxAllocBytes", st.alloc, st.lim.MaxAllocBytes},
	} {
		if c.n > c.max {
			over = append(over, c.limit)
		}
	}
	return over
}

// wantStopped checks, from the engine's own counters, that a render
// stopped by le had used up the limit le names and no other: of its
// steps, loop iterations and bytes built, the one le names (if it has a
// counter) is past its maximum and the others are within theirs. These
// counters, not the clock, are what bound a hostile template's time and
// memory.
func wantStopped(t *testing.T, o outcome, le *LimitError) {
	t.Helper()
	if o.st == nil {
		t.Fatalf("no render state for %v", o.err)
	}
	over := o.st.overLimits()
	switch le.Limit {
	case "MaxSteps", "MaxLoopIterations", "MaxAllocBytes":
		if len(over) != 1 || over[0] != le.Limit {
			t.Errorf("the error names %s, but the render counted past %v", le.Limit, over)
		}
	default:
		if len(over) != 0 {
			t.Errorf("the error names %s, but the render counted past %v", le.Limit, over)
		}
	}
	t.Logf("stopped at %s after %d steps, %d loop iterations, %d MiB built; Go allocated %d MiB",
		le.Limit, o.st.steps, o.st.iters, o.st.alloc>>20, o.alloc>>20)
}

// The report: nested loops of 10^10 iterations ran for hours.
// They stop at MaxLoopIterations, having run at most that many
// iterations (and no more than MaxSteps steps), however long that takes
// on a given machine.
func TestHostileNestedLoops(t *testing.T) {
	src := "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
	o := measure(t, "loops.jinja", src, nil)
	le := wantLimit(t, o.err, "loops.jinja", "MaxLoopIterations")
	wantStopped(t, o, le)
	if max := DefaultLimits().MaxLoopIterations; o.st.iters != max+1 {
		t.Errorf("%d loop iterations, want the render stopped by the one past MaxLoopIterations = %d", o.st.iters, max)
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
			o := measure(t, "huge.jinja", tc.src, nil)
			wantStopped(t, o, wantLimit(t, o.err, "huge.jinja", "MaxOutputBytes", "MaxAllocBytes"))
			if o.alloc > 1<<30 {
				t.Errorf("allocated %d MiB, want far under 2 GB", o.alloc>>20)
			}
		})
	}
}

// A macro calling itself without end fails at MaxDepth; one calling itself
// twice (2^60 calls) at MaxSteps.
func TestHostileRecursion(t *testing.T) {
	for _, tc := range []struct{ name, src, limit string }{
		{"endless", "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "MaxDepth"},
		{"2^60 calls", "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}", "MaxSteps"},
		{"recursive loop", "{% for x in [[[]]] recursive %}{{ loop([x]) }}{% endfor %}", "MaxDepth"},
		{"caller", "{% macro m() %}{% call m() %}{% endcall %}{{ caller }}{% endmacro %}{{ m() }}", "MaxDepth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := measure(t, "rec.jinja", tc.src, nil)
			le := wantLimit(t, o.err, "rec.jinja", tc.limit)
			wantStopped(t, o, le)
			if le.Limit == "MaxDepth" && (le.Max != 256 || le.Line != 1) {
				t.Errorf("got %+v", le)
			}
		})
	}
}

// TestHostileTemplates are the ways a template can ask for unbounded time
// or memory; each must fail with a *LimitError naming the limit that
// tripped (or jinja2's own error), the engine's counters showing it
// stopped at that limit, having allocated little. Time is not measured:
// the hang guard only catches a render that no limit stops.
func TestHostileTemplates(t *testing.T) {
	if testing.Short() {
		t.Skip("tens of seconds of CPU in hostile renders")
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
			o := measure(t, "hostile.jinja", tc.src, nil)
			if o.err == nil {
				t.Fatal("rendered")
			}
			if len(tc.limits) > 0 {
				wantStopped(t, o, wantLimit(t, o.err, "hostile.jinja", tc.limits...))
			} else {
				t.Log(o.err)
			}
			if o.alloc > 1500<<20 {
				t.Errorf("allocated %d MiB", o.alloc>>20)
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
			var err error
			leaktest.Guarded(t, "parsing "+tc.name, func() { _, err = Parse("deep.jinja", tc.src) })
			wantLimit(t, err, "deep.jinja", "MaxNesting")
		})
	}
}

// TestAdjacentLiteralsLinear: adjacent string literals concatenate in
// linear time, which the bytes allocated show without a clock: 10 times
// the literals must allocate about 10 times the bytes (at most 20), where
// joining them one by one would copy 100 times as many (about 40 GB for
// the 200,000 literals here).
func TestAdjacentLiteralsLinear(t *testing.T) {
	allocated := func(n int) uint64 {
		src := "{{ " + strings.Repeat("'ab' ", n) + "}}"
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var (
			got string
			err error
		)
		leaktest.Guarded(t, "parsing and rendering adjacent literals", func() {
			var tmpl *Template
			if tmpl, err = Parse("s", src); err == nil {
				got, err = tmpl.Render(nil, nil)
			}
		})
		runtime.ReadMemStats(&after)
		if err != nil || len(got) != 2*n {
			t.Fatalf("%d literals: got %d bytes, %v", n, len(got), err)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	const n = 20000
	small, large := allocated(n), allocated(10*n)
	ratio := float64(large) / float64(small)
	t.Logf("%d literals: %d KiB allocated; %d: %d KiB, ratio %.1f", n, small>>10, 10*n, large>>10, ratio)
	if ratio > 20 {
		t.Errorf("10 times the adjacent literals allocated %.1f times the bytes (%d KiB against %d KiB), want about 10", ratio, large>>10, small>>10)
	}
}

// A render stops within ctxEvery steps of its context being cancelled,
// or timing out, with an error naming the template. The cancellation
// happens at a known point of the render (strftime_now, which reads the
// render's clock, cancels it), so the test counts the loop iterations run
// after it rather than timing them.
func TestRenderContextCancel(t *testing.T) {
	unlimited := &Limits{MaxSteps: -1, MaxLoopIterations: -1, MaxOutputBytes: -1, MaxAllocBytes: -1}
	slow, err := Parse("slow.jinja", "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var st *state
		leaktest.Guarded(t, "the cancelled render", func() { _, st, err = slow.render(ctx, nil, &RenderOptions{Limits: unlimited}) })
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if st.iters != 0 {
			t.Errorf("%d loop iterations ran, want none", st.iters)
		}
	})

	// Each iteration counts at least one step, so no more than ctxEvery
	// iterations run between the cancel and the checkpoint that sees it.
	t.Run("mid-render", func(t *testing.T) {
		const at = 5000 // the iteration that cancels
		tmpl, err := Parse("slow.jinja", fmt.Sprintf("{%% for i in range(100000) %%}{%% if i == %d %%}{{ strftime_now('%%Y') }}{%% endif %%}{{ i }}{%% endfor %%}", at))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		clock := func() time.Time {
			cancel()
			return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC)
		}
		_, st, err := tmpl.render(ctx, nil, &RenderOptions{Limits: unlimited, Now: clock})
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "slow.jinja line 1: ") {
			t.Fatalf("got %v, want a context.Canceled naming the template", err)
		}
		if after := st.iters - (at + 1); after < 0 || after > ctxEvery {
			t.Errorf("%d loop iterations, cancelled in iteration %d: %d ran after the cancel, want at most %d", st.iters, at+1, after, ctxEvery)
		}
	})

	// From another goroutine, once the render is under way: the outcome
	// is checked, not how long it took to arrive.
	t.Run("from another goroutine", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		started := make(chan struct{})
		tmpl, err := Parse("slow.jinja", "{{ strftime_now('%Y') }}{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}")
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		clock := func() time.Time {
			once.Do(func() { close(started) })
			return time.Date(2025, 7, 10, 12, 0, 0, 0, time.UTC)
		}
		go func() {
			<-started
			cancel()
		}()
		var st *state
		leaktest.Guarded(t, "the cancelled render", func() { _, st, err = tmpl.render(ctx, nil, &RenderOptions{Limits: unlimited, Now: clock}) })
		if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "slow.jinja line 1: ") {
			t.Fatalf("got %v, want a context.Canceled naming the template", err)
		}
		t.Logf("%v after %d loop iterations", err, st.iters)
	})

	// A deadline (50 ms, against 10^10 iterations) stops it the same way.
	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var err error
		leaktest.Guarded(t, "the render past its deadline", func() { _, err = slow.RenderContext(ctx, nil, &RenderOptions{Limits: unlimited}) })
		if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "slow.jinja line 1: ") {
			t.Errorf("got %v, want a context.DeadlineExceeded naming the template", err)
		}
	})
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
