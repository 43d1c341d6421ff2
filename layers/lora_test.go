package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/loaders"
)

// loraLinear declares a Linear "m.q_proj" [out, in] stored as dtype, and
// attaches a LoRA of rank r with factors a, b at scaling alpha/r.
func loraLinear(t *testing.T, dtype graphs.DType, w, a, b []float32, in, out, r int, alpha float64) (Linear, *graphs.Params) {
	t.Helper()
	ps := graphs.NewParams()
	l := NewLinear(ps.Root().Sub("m", "q_proj"), in, out, false)
	var data *tensor.Dense
	switch dtype {
	case graphs.F32, graphs.BF16:
		d, _ := stored(w, dtype)
		data = tensor.New(tensor.WithShape(out, in), tensor.WithBacking(d))
	default:
		f, _ := dtype.Quant()
		rb, err := f.RowBytes(in)
		if err != nil {
			t.Fatal(err)
		}
		q := make([]byte, out*rb)
		for i := range out {
			quant.QuantizeRow(f, w[i*in:(i+1)*in], q[i*rb:(i+1)*rb])
		}
		data = tensor.New(tensor.WithShape(out, rb), tensor.WithBacking(q))
	}
	if err := l.Weight.Set(dtype, data); err != nil {
		t.Fatal(err)
	}
	cfg, err := loaders.ParseLoRAConfig([]byte(fmt.Sprintf(`{"peft_type":"LORA","r":%d,"lora_alpha":%g,"target_modules":["q_proj"]}`, r, alpha)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ps.ApplyLoRA("a", &loaders.LoRA{Config: cfg, Tensors: []loaders.LoRATensor{
		{Name: loaders.LoRAPrefix + "m.q_proj.lora_A.weight", Module: "m.q_proj", Factor: 'A', Shape: []int{r, in}, Data: a},
		{Name: loaders.LoRAPrefix + "m.q_proj.lora_B.weight", Module: "m.q_proj", Factor: 'B', Shape: []int{out, r}, Data: b},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return l, ps
}

// TestLinearLoRA checks an adapted Linear against x·Ŵᵀ + s·(x·Aᵀ)·Bᵀ in
// float64, where Ŵ is the base as stored (rounded to BF16, quantized):
// the base keeps its type and the update is float32 whatever it is.
func TestLinearLoRA(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const in, out, r, T = 256, 48, 4, 5
	for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16, graphs.Q8_0, graphs.Q4_0, graphs.Q4_K, graphs.Q6_K} {
		for _, heads := range []int{0, 6} {
			t.Run(fmt.Sprintf("%s/heads=%d", dtype, heads), func(t *testing.T) {
				w, a, b, x := randVals(rng, out*in, 0.1), randVals(rng, r*in, 0.2), randVals(rng, out*r, 0.2), randVals(rng, T*in, 1)
				l, ps := loraLinear(t, dtype, w, a, b, in, out, r, 8)
				s := graphs.NewTrainingStep(T)
				xn := G.NewTensor(s.G, tensor.Float32, 2, G.WithShape(T, in), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(T, in), tensor.WithBacking(x))))
				var y *G.Node
				if heads > 0 {
					y = l.ForwardHeads(s, xn, heads)
				} else {
					y = l.Forward(s, xn)
				}
				m := G.NewTapeMachine(s.G)
				defer m.Close()
				if err := m.RunAll(); err != nil {
					t.Fatal(err)
				}
				got := y.Value().(*tensor.Dense).Data().([]float32)
				want := refMatmulT(x, T, in, ps.All()[0].Float32s(), out)
				h := refMatmulT(x, T, in, a, r)
				for i := range T {
					for o := range out {
						var d float64
						for k := range r {
							d += h[i*r+k] * float64(b[o*r+k])
						}
						want[i*out+o] += 2 * d // alpha 8 / r 4
					}
				}
				assertClose(t, "adapted linear", got, want, 1e-4)
				// The update matters: the base alone is far from it.
				base := refMatmulT(x, T, in, ps.All()[0].Float32s(), out)
				var far float64
				for i := range base {
					far = max(far, math.Abs(base[i]-want[i]))
				}
				if far < 0.1 {
					t.Fatalf("the update changes the output by only %g", far)
				}
			})
		}
	}
}
