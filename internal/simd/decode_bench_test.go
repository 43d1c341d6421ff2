package simd

import (
	"fmt"
	"testing"
)

// BenchmarkDecodeLayers runs the matrix-vector products of one decode step
// of a model's 30 layers (SmolLM2-135M shapes) over distinct, touched
// weights, so every step streams them from memory as a real step does:
// read as GB/s of weights.
func BenchmarkDecodeLayers(b *testing.B) {
	shapes := [][2]int{{576, 576}, {576, 192}, {576, 192}, {576, 576}, {576, 1536}, {576, 1536}, {1536, 576}}
	for _, kind := range []Kind{F32, BF16} {
		var ws []Weight
		var bytes int
		for l := 0; l < 30; l++ {
			for _, s := range shapes {
				raw := make([]float32, s[0]*s[1])
				for i := range raw {
					raw[i] = float32(i%13) * 0.01 // touched pages, not the shared zero page
				}
				w, _ := weightOf(raw, kind)
				ws = append(ws, w)
				bytes += len(raw) * [...]int{4, 2, 2}[kind]
			}
		}
		x, y := make([]float32, 1536), make([]float32, 1536)
		b.Run(fmt.Sprintf("%s/%s", kindName(kind), Name()), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for k, w := range ws {
					s := shapes[k%len(shapes)]
					MulT(y, x, 1, w, s[1], s[0])
				}
			}
			b.ReportMetric(float64(bytes)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
		})
	}
}
