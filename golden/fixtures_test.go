package golden

import (
	"os"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
)

// TestMain expands the compressed fixtures the cases read.
func TestMain(m *testing.M) {
	testfiles.MustExpand()
	os.Exit(m.Run())
}
