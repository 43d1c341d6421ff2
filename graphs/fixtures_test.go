package graphs_test

import (
	"os"
	"testing"

	"github.com/gozoo/gozoo/internal/testmodels"
)

// TestMain expands the compressed fixtures and writes the generated test
// models (testdata/models/qwen3-tiny's weights) before any test or
// example reads them.
func TestMain(m *testing.M) {
	testmodels.MustPrepare()
	os.Exit(m.Run())
}
