package idefics3

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/loaders"
)

// tinyFolder is the notebooks' SmolVLM folder: the golden model's weights
// and processor configs with a tokenizer and a chat template.
const tinyFolder = "../../notebooks/testdata/smolvlm-tiny"

// TestLoadPipeline: the pipeline takes its processor configs from the
// folder the generator was loaded from, as LoadProcessorConfig reads them.
func TestLoadPipeline(t *testing.T) {
	p, err := LoadPipeline(tinyFolder, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	want, err := LoadProcessorConfig(tinyFolder)
	if err != nil {
		t.Fatal(err)
	}
	if p.Processor != want {
		t.Errorf("pipeline processor %+v, want %+v", p.Processor, want)
	}
	f, err := loaders.OpenFolder(tinyFolder)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ProcessorConfigFromFolder(f); err != nil || got != want {
		t.Errorf("ProcessorConfigFromFolder: %+v, %v; want %+v", got, err, want)
	}
	if _, err := LoadPipeline(filepath.Join(t.TempDir(), "model.gguf"), nil); err == nil || !strings.Contains(err.Error(), "GGUF") {
		t.Errorf("a GGUF path: %v, want a refusal naming GGUF", err)
	}
}

// TestProcessorConfigMissing: a folder without an image processor config
// is an error matching fs.ErrNotExist that names the file.
func TestProcessorConfigMissing(t *testing.T) {
	_, err := ProcessorConfigFromFolder(&loaders.Folder{Dir: t.TempDir()})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "preprocessor_config.json") {
		t.Errorf("no configs: %v", err)
	}
}
