package idefics3

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/images"
	"github.com/gozoo/gozoo/internal/canceltest"
	"github.com/gozoo/gozoo/internal/leaktest"
	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/zoo"
)

// TestMain fails the package's run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	testfiles.MustExpand()
	leaktest.VerifyTestMain(m)
}

func noiseImage(w, h int, seed uint64) *images.RGB {
	m := images.NewRGB(w, h)
	s := seed
	for i := range m.Pix {
		s = s*6364136223846793005 + 1442695040888963407
		m.Pix[i] = uint8(s >> 56)
	}
	return m
}

// TestPreprocessContext cancels SmolVLM's preprocessing of two images
// (one split into tiles) at every poll of its context in turn: between
// images, inside each of the resizes and between tiles. Each stops with
// an error wrapping context.Canceled, no resize worker is left running,
// and an uncancelled run equals Preprocess's.
func TestPreprocessContext(t *testing.T) {
	cfg := DefaultProcessorConfig()
	cfg.Size.LongestEdge, cfg.MaxImageSize = 256, 96
	imgs := []*images.RGB{noiseImage(300, 210, 1), noiseImage(45, 60, 2)}
	want, err := Preprocess(cfg, imgs)
	if err != nil {
		t.Fatal(err)
	}
	stages := map[string]bool{}
	for n := 0; ; n++ {
		got, err := PreprocessContext(canceltest.After(n), cfg, imgs)
		if err == nil {
			if got.NumTiles != want.NumTiles || !slices.Equal(got.PixelValues, want.PixelValues) {
				t.Fatal("a cancellable preprocessing differs from Preprocess")
			}
			t.Logf("%d polls", n)
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at poll %d: %v does not wrap context.Canceled", n+1, err)
		}
		for _, s := range []string{"before image 1", "resize (size)", "resize_for_vision_encoder", "global image", "before tile"} {
			if strings.Contains(err.Error(), s) {
				stages[s] = true
			}
		}
		if n > 100000 {
			t.Fatal("the preprocessing never ran to its end")
		}
	}
	for _, s := range []string{"before image 1", "resize (size)", "resize_for_vision_encoder", "global image", "before tile"} {
		if !stages[s] {
			t.Errorf("no cancellation stopped at %q (%v)", s, stages)
		}
	}
	// A batch stops too, naming the sample.
	if _, err := PreprocessBatchContext(canceltest.After(0), cfg, [][]*images.RGB{imgs}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "sample 0") {
		t.Fatalf("cancelled batch: %v", err)
	}
	leaktest.VerifyNone(t)
}

// TestPipelineContext: a pipeline asked to open or prepare images under
// a cancelled context stops before any work, with an error wrapping
// context.Canceled.
func TestPipelineContext(t *testing.T) {
	cfg := DefaultProcessorConfig()
	cfg.Size.LongestEdge, cfg.MaxImageSize = 64, 32
	p := &Pipeline{Processor: cfg}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.ImagesContext(ctx, "no/such/image.png"); !errors.Is(err, context.Canceled) {
		t.Errorf("ImagesContext: %v", err)
	}
	if _, err := p.PrepareContext(ctx, "describe", []*images.RGB{noiseImage(40, 30, 3)}); !errors.Is(err, context.Canceled) {
		t.Errorf("PrepareContext: %v", err)
	}
	if _, err := p.PrepareContext(canceltest.After(1), "describe", []*images.RGB{noiseImage(40, 30, 3)}); !errors.Is(err, context.Canceled) {
		t.Errorf("PrepareContext cancelled midway: %v", err)
	}
}

// TestEncodeImagesContext cancels the vision tower at every poll of its
// context in turn: it stops before the run or between encoder layers,
// with an error wrapping context.Canceled that names the layer, and the
// cached tower then encodes as before.
func TestEncodeImagesContext(t *testing.T) {
	m, pixels, _ := twoTiles(t)
	v := m.Config.VisionConfig
	want, err := m.EncodeImages(pixels, 2)
	if err != nil {
		t.Fatal(err)
	}
	layersHit := map[string]bool{}
	for n := 0; ; n++ {
		got, err := m.EncodeImagesContext(canceltest.After(n), pixels, 2)
		if err == nil {
			if !slices.Equal(got.Rows, want.Rows) {
				t.Fatal("a cancellable encoding differs from EncodeImages")
			}
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at poll %d: %v does not wrap context.Canceled", n+1, err)
		}
		if i := strings.Index(err.Error(), "vision layer "); i >= 0 {
			layersHit[err.Error()[i:]] = true
		}
		if n > 100 {
			t.Fatal("the tower never ran to its end")
		}
	}
	if len(layersHit) != v.NumHiddenLayers-1 {
		t.Errorf("stopped between %d pairs of encoder layers, want all %d: %v", len(layersHit), v.NumHiddenLayers-1, layersHit)
	}
	again, err := m.EncodeImages(pixels, 2)
	if err != nil || !slices.Equal(again.Rows, want.Rows) {
		t.Fatalf("after the cancellations: %v", err)
	}
}

// TestConcurrentEncodeImages encodes from four goroutines at once, with
// one and two tiles (two cached programs) and with a capture (a fresh
// program, outside the cache's lock): each result equals the same call
// made alone. Meant for -race (.ci/run).
func TestConcurrentEncodeImages(t *testing.T) {
	m, pixels, per := twoTiles(t)
	calls := []struct {
		tiles   int
		capture []string
	}{{1, nil}, {2, nil}, {2, []string{PixelShuffled}}, {1, nil}}
	want := make([][]float32, len(calls))
	for i, c := range calls {
		f, err := m.EncodeImages(pixels[:c.tiles*per], c.tiles, c.capture...)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = f.Rows
	}
	got := make([][]float32, len(calls))
	errs := make([]error, len(calls))
	done := make(chan int)
	for i, c := range calls {
		go func() {
			f, err := m.EncodeImages(pixels[:c.tiles*per], c.tiles, c.capture...)
			if err == nil {
				got[i] = f.Rows
			}
			errs[i] = err
			done <- i
		}()
	}
	for range calls {
		<-done
	}
	for i := range calls {
		if errs[i] != nil {
			t.Errorf("call %d: %v", i, errs[i])
		} else if !slices.Equal(got[i], want[i]) {
			t.Errorf("call %d (%d tiles, capture %v) differs from the same call alone", i, calls[i].tiles, calls[i].capture)
		}
	}
}

// twoTiles loads the smolvlm-full case and makes two tiles of normalised
// pixels (per values each) for its vision tower.
func twoTiles(t *testing.T) (m *Model, pixels []float32, per int) {
	t.Helper()
	mm, err := zoo.Load("../../testdata/golden/smolvlm-full")
	if err != nil {
		t.Fatal(err)
	}
	m = mm.(*Model)
	v := m.Config.VisionConfig
	per = v.NumChannels * v.ImageSize * v.ImageSize
	pixels = make([]float32, 2*per)
	for i := range pixels {
		pixels[i] = float32(i%89)/44.5 - 1
	}
	return m, pixels, per
}
