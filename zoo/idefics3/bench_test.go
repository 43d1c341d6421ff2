package idefics3_test

import (
	"os"
	"testing"

	"github.com/gozoo/gozoo/internal/familytest"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// BenchmarkVisionTile runs one tile through the vision tower and the
// connector of the checkpoint in $GOZOO_BENCH_MODEL (for example `gozoo
// random --config testdata/configs/smolvlm-instruct.json`: 384x384
// tiles), or of the tiny golden model, reported as GFLOP/s of its
// products.
func BenchmarkVisionTile(b *testing.B) {
	var m zoo.Model
	if dir := os.Getenv("GOZOO_BENCH_MODEL"); dir != "" {
		var err error
		if m, err = zoo.Load(dir); err != nil {
			b.Fatal(err)
		}
	} else {
		m = familytest.Load(b, familytest.GoldenDir("smolvlm-full"))
	}
	vlm := m.(*idefics3.Model)
	v := vlm.Config.VisionConfig
	pixels := make([]float32, v.NumChannels*v.ImageSize*v.ImageSize)
	for i := range pixels {
		pixels[i] = float32(i%251)/125.5 - 1
	}
	if _, err := vlm.EncodeImages(pixels, 1); err != nil { // builds the graph
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := vlm.EncodeImages(pixels, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(vlm.TileFLOPs()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
