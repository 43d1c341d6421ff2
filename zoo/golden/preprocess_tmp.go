package golden

import (
	"errors"

	"github.com/gozoo/gozoo/loaders"
)

func runPreprocess(dir string, g *loaders.SafetensorsFile, m vlmMeta, r *Result) error {
	return errors.New("preprocess: not yet")
}
