package simd

import (
	"fmt"
	"testing"

	"github.com/gozoo/gozoo/internal/quant"
)

// smolLM2Layer is the [in, out] of SmolLM2-135M's products in a decoder
// layer: q, k, v, o, gate, up, down.
var smolLM2Layer = [][2]int{{576, 576}, {576, 192}, {576, 192}, {576, 576}, {576, 1536}, {576, 1536}, {1536, 576}}

// BenchmarkDecodeLayers runs the matrix-vector products of one decode step
// of a model's 30 layers (SmolLM2-135M shapes) over distinct, touched
// weights, so every step streams them from memory as a real step does:
// read as GB/s of weights.
func BenchmarkDecodeLayers(b *testing.B) {
	shapes := smolLM2Layer
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

// BenchmarkDecodeLayersQuant is BenchmarkDecodeLayers on quantized
// weights, as llama.cpp's quantizer writes them for the bench's two
// models: Q4_0 layers with SmolLM2-135M's Q8_0 head (49152 rows) and
// Qwen3-0.6B's Q6_K head (151936 rows), in fast and exact mode, each
// step streaming every weight from memory.
func BenchmarkDecodeLayersQuant(b *testing.B) {
	models := []struct {
		name   string
		layers int
		shapes [][2]int
		head   quant.Format
		vocab  int
	}{
		{"SmolLM2", 30, smolLM2Layer, quant.Q8_0, 49152},
		{"Qwen3", 28, [][2]int{{1024, 2048}, {1024, 1024}, {1024, 1024}, {2048, 1024}, {1024, 3072}, {1024, 3072}, {3072, 1024}}, quant.Q6_K, 151936},
	}
	type product struct {
		w       Weight
		in, out int
	}
	for _, m := range models {
		var ps []product
		var bytes int
		add := func(f quant.Format, in, out int) {
			rb, _ := f.RowBytes(in)
			buf := make([]byte, out*rb)
			src := make([]float32, in)
			for j := 0; j < out; j++ {
				for i := range src {
					src[i] = float32((i*7+j)%13-6) * 0.01
				}
				quant.QuantizeRow(f, src, buf[j*rb:(j+1)*rb])
			}
			ps = append(ps, product{Weight{Kind: Quant, Format: f, Bytes: buf}, in, out})
			bytes += len(buf)
		}
		for l := 0; l < m.layers; l++ {
			for _, s := range m.shapes {
				add(quant.Q4_0, s[0], s[1])
			}
		}
		add(m.head, m.shapes[0][0], m.vocab)
		x, y := make([]float32, 3072), make([]float32, m.vocab)
		for i := range x {
			x[i] = float32(i%17-8) * 0.1
		}
		for _, mode := range []string{"exact", "fast"} {
			b.Run(fmt.Sprintf("%s/Q4_0/%s/%s", m.name, mode, Name()), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for _, p := range ps {
						if mode == "fast" {
							MulTFast(y, x, 1, p.w, p.out, p.in)
						} else {
							MulT(y, x, 1, p.w, p.out, p.in)
						}
					}
				}
				b.ReportMetric(float64(bytes)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
			})
		}
	}
}
