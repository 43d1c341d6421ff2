// Package leaktest is the goroutine-leak check (go.uber.org/goleak) that
// the tests of packages which start goroutines share: generation, the
// image resizer's row workers, the graphs behind them. It knows the one
// kind of goroutine this module keeps for the life of the process on
// purpose, so that a check fails only on a real leak.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// simdWorker is the loop of internal/simd's persistent workers.
const simdWorker = "github.com/gozoo/gozoo/internal/simd.(*worker).loop"

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

// VerifyNone fails t if any goroutine other than the test's own and the
// ones Options ignores is still running (goleak retries for a while, so
// goroutines that are finishing are given time to).
func VerifyNone(t testing.TB, extra ...goleak.Option) {
	t.Helper()
	goleak.VerifyNone(t, Options(extra...)...)
}

// VerifyTestMain runs a package's tests and then fails the run if any
// goroutine is left behind: use it as the package's TestMain.
func VerifyTestMain(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, Options(extra...)...)
}
