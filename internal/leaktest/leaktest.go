// Package leaktest is the goroutine-leak check (go.uber.org/goleak) that
// the tests of packages which start goroutines share: generation, the
// image resizer's row workers, the graphs behind them. It knows the one
// kind of goroutine this module keeps for the life of the process on
// purpose, so that a check fails only on a real leak, and it gives
// goroutines that are finishing a generous time to end, so that a loaded
// machine does not turn a slow exit into a leak.
package leaktest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// simdWorker is the loop of internal/simd's persistent workers.
const simdWorker = "github.com/gozoo/gozoo/internal/simd.(*worker).loop"

// settle is how long VerifyNone and VerifyTestMain wait for goroutines
// that are still running to end before they call them leaked. goleak's
// own retries give up after about half a second, which a goroutine on its
// way out can exceed on a loaded machine or under -race; a leaked
// goroutine never ends, so the wait costs nothing on a passing run and
// this long on a failing one. A variable for this package's tests.
var settle = time.Minute

// poll is the pause between two looks at the goroutines (each look is
// goleak.Find, which retries for a while itself).
const poll = 100 * time.Millisecond

// Options are goleak's options for this module, with extra appended:
//
//   - internal/simd starts one persistent worker per extra CPU in init
//     and keeps it for the life of the process (it spins briefly after a
//     job, then parks on a channel). They are the matrix kernels' thread
//     pool, shared by every session, never per call, so they are ignored
//     rather than stopped. Any goroutine whose stack holds their loop is
//     ignored; nothing else is.
func Options(extra ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{goleak.IgnoreAnyFunction(simdWorker)}, extra...)
}

// find returns goleak.Find's error for the goroutines still running
// after settle, nil as soon as none is.
func find(extra []goleak.Option) error {
	opts := Options(extra...)
	deadline := time.Now().Add(settle)
	for {
		err := goleak.Find(opts...)
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(poll)
	}
}

// VerifyNone fails t if any goroutine other than the test's own and the
// ones Options ignores is still running after settle (it returns as soon
// as none is).
func VerifyNone(t testing.TB, extra ...goleak.Option) {
	t.Helper()
	if err := find(extra); err != nil {
		t.Errorf("leaked goroutines (still running after %v): %v", settle, err)
	}
}

// VerifyTestMain runs a package's tests and then fails the run if any
// goroutine is left behind after settle: use it as the package's
// TestMain.
func VerifyTestMain(m *testing.M, extra ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := find(extra); err != nil {
			fmt.Fprintf(os.Stderr, "leaktest: goroutines still running %v after a successful test run: %v\n", settle, err)
			code = 1
		}
	}
	os.Exit(code)
}

// HangGuard is how long an operation on hostile input may run before a
// test calls it hung: the code under test stops at its own limit (steps,
// bytes, a budget), which the test checks by name; the guard only turns
// a limit that no longer trips into a failure, long before go test's
// -timeout, and never judges speed.
const HangGuard = 3 * time.Minute

// Guarded runs f, failing t as hung if f has not returned after
// HangGuard.
func Guarded(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(HangGuard):
		t.Fatalf("%s hung: still running after %v", what, HangGuard)
	}
}
