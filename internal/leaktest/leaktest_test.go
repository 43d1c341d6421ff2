package leaktest

import (
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that keeps its errors instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, format)
}

// TestSlowExitIsNotALeak: a goroutine that ends a second after the check
// begins (longer than goleak's own retries, about half a second) is
// waited for, not reported.
func TestSlowExitIsNotALeak(t *testing.T) {
	done := make(chan struct{})
	go func() { <-done }()
	time.AfterFunc(time.Second, func() { close(done) })
	r := &recorder{TB: t}
	VerifyNone(r)
	if len(r.errs) > 0 {
		t.Errorf("a goroutine that ended after a second was reported as leaked: %v", r.errs)
	}
}

// TestLeakIsReported: a goroutine that never ends is reported once settle
// (shortened here) has passed.
func TestLeakIsReported(t *testing.T) {
	defer func(d time.Duration) { settle = d }(settle)
	settle = 200 * time.Millisecond
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	r := &recorder{TB: t}
	VerifyNone(r)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "leaked goroutines") {
		t.Errorf("a goroutine that never ends: got errors %q, want one naming the leak", r.errs)
	}
}
