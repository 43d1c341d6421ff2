// Command prepare expands the compressed test fixtures and writes the
// generated test models (internal/testmodels): run it once before using
// testdata/ outside `go test`, e.g. `gozoo run --model
// testdata/models/qwen3-tiny --chat` or the notebooks.
package main

import (
	"fmt"
	"os"

	"github.com/gozoo/gozoo/internal/testmodels"
)

func main() {
	if err := testmodels.Prepare(); err != nil {
		fmt.Fprintln(os.Stderr, "prepare:", err)
		os.Exit(1)
	}
}
