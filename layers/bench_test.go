package layers

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/ops"
)

// Operation benchmarks at Qwen3-0.6B's dimensions, over sequence lengths
// (1 is a decode step). Each reports GB/s (bytes the op must move) and
// GFLOP/s next to ns/op, to read against the machine's limits: memory
// bandwidth for decode, FMA throughput for prefill. matvec and GEMM per
// weight type are in internal/simd.
const (
	qD, qF, qHq, qHkv, qDh = 1024, 3072, 16, 8, 128
)

// benchKernel runs one kernel on an arena as a session would, and reports
// bytes and flops per run as rates.
func benchKernel(b *testing.B, k ops.Kernel, bytes, flops float64, in func(g *graphT) []*G.Node) {
	g := &graphT{g: G.NewGraph()}
	nodes := in(g)
	n := ops.Apply(k, nodes...)
	arena := ops.NewArena()
	ops.Plan(g.g, arena)
	vals := make([]G.Value, len(nodes))
	for i, x := range nodes {
		vals[i] = x.Value()
	}
	op := n.Op()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		arena.Reset()
		if _, err := op.Do(vals...); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
}

var seqLens = []int{1, 32, 128}

func BenchmarkRMSNorm(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, T := range seqLens {
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) {
			benchKernel(b, rmsNorm{eps: 1e-6, dims: 2}, float64(8*T*qD), float64(4*T*qD), func(g *graphT) []*G.Node {
				return []*G.Node{g.input("x", randVals(r, T*qD, 1), T, qD), g.input("w", randVals(r, qD, 1), qD)}
			})
		})
	}
}

func BenchmarkRoPE(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, T := range seqLens {
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) {
			pos := make([]int, T)
			for i := range pos {
				pos[i] = 100 + i
			}
			benchKernel(b, rope{invFreq: NewRoPE(qDh, 1e6, 1).InvFreq, id: "q"}, float64(8*T*qHq*qDh), float64(6*T*qHq*qDh), func(g *graphT) []*G.Node {
				return []*G.Node{g.input("x", randVals(r, T*qHq*qDh, 1), T, qHq, qDh), g.input("p", pos, T)}
			})
		})
	}
}

// BenchmarkMLP is the gated MLP's three products and activation, per
// weight type.
func BenchmarkMLP(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	for _, dtype := range []graphs.DType{graphs.F32, graphs.BF16} {
		gate, _ := stored(randVals(r, qF*qD, 0.02), dtype)
		up, _ := stored(randVals(r, qF*qD, 0.02), dtype)
		down, _ := stored(randVals(r, qD*qF, 0.02), dtype)
		for _, T := range seqLens {
			b.Run(fmt.Sprintf("%s/T=%d", dtype, T), func(b *testing.B) {
				g := newGraphB()
				x := g.input("x", randVals(r, T*qD, 1), T, qD)
				h := ops.Apply(gatedAct{act: "silu"},
					ops.Apply(matmulT{dtype: dtype, name: "gate"}, x, g.input("g", gate, qF, qD)),
					ops.Apply(matmulT{dtype: dtype, name: "up"}, x, g.input("u", up, qF, qD)))
				y := ops.Apply(matmulT{dtype: dtype, name: "down"}, h, g.input("d", down, qD, qF))
				weights := float64(3*qF*qD) * float64(dtype.Size())
				g.bench(b, y, weights, float64(2*3*T*qF*qD))
			})
		}
	}
}

// BenchmarkMoE routes through 8 experts of Qwen3-MoE's shape (768 wide),
// 2 per token.
func BenchmarkMoE(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	const E, K, Fe = 8, 2, 768
	for _, T := range seqLens {
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) {
			g := newGraphB()
			in := []*G.Node{g.input("x", randVals(r, T*qD, 1), T, qD), g.input("router", randVals(r, E*qD, 0.02), E, qD),
				g.input("gate", randVals(r, E*Fe*qD, 0.02), E, Fe, qD), g.input("up", randVals(r, E*Fe*qD, 0.02), E, Fe, qD),
				g.input("down", randVals(r, E*qD*Fe, 0.02), E, qD, Fe)}
			y := ops.Apply(sparseMoE{name: "moe", experts: E, topK: K, normTopK: true, act: "silu"}, in...)
			active := float64(min(E, T*K)) * 3 * Fe * qD * 4
			g.bench(b, y, active, float64(2*3*T*K*Fe*qD))
		})
	}
}

// BenchmarkAttention: prefill is T rows from position pos (a long
// prompt's last chunk at pos 1536); decode is one row after 512 positions
// of context, over a float32 cache and an F16 one
// (graphs.Options.KVCacheF16). The untiled cases run the prefill as it ran
// before the tiles (attnUntiled), for comparison.
func BenchmarkAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 5))
	for _, c := range []struct {
		name    string
		T, pos  int
		kv16    bool
		untiled bool
	}{
		{"prefill/T=32", 32, 0, false, false}, {"prefill/T=128", 128, 0, false, false},
		{"prefill/T=512/pos=1536/tiled", 512, 1536, false, false}, {"prefill/T=512/pos=1536/untiled", 512, 1536, false, true},
		{"prefill/T=512/pos=1536/kv=f16/tiled", 512, 1536, true, false}, {"prefill/T=512/pos=1536/kv=f16/untiled", 512, 1536, true, true},
		{"decode/ctx=512", 1, 512, false, false}, {"decode/ctx=512/kv=f16", 1, 512, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer func(was bool) { attnUntiled = was }(attnUntiled)
			attnUntiled = c.untiled
			pos := make([]int, c.T)
			for i := range pos {
				pos[i] = c.pos + i
			}
			keys := float64(c.pos + c.T)
			// Row t attends pos+t+1 keys (causal).
			flops := 2 * 2 * (float64(c.T)*float64(c.pos) + float64(c.T*(c.T+1))/2) * qHq * qDh
			size := 4
			if c.kv16 {
				size = 2
			}
			bytes := 2 * keys * qHkv * qDh * float64(size)
			kv := attnFixture(b, qHkv, qDh, 0, 32, c.kv16)
			for j := 0; j < c.pos; j++ {
				for g := 0; g < qHkv; g++ {
					if err := kv.Store(0, j, g, randVals(r, qDh, 1), randVals(r, qDh, 1)); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := kv.Plan(graphs.FixtureRun{Seq: 0, Row: 0, Len: c.T, Pos: c.pos}); err != nil {
				b.Fatal(err)
			}
			benchKernel(b, cachedAttention{name: "a", scale: 0.088, kv: kv.KV}, bytes, flops, func(g *graphT) []*G.Node {
				return []*G.Node{g.input("q", randVals(r, c.T*qHq*qDh, 1), c.T, qHq, qDh),
					g.input("k", randVals(r, c.T*qHkv*qDh, 1), c.T, qHkv, qDh), g.input("v", randVals(r, c.T*qHkv*qDh, 1), c.T, qHkv, qDh),
					g.input("p", pos, c.T)}
			})
		})
	}
}

// graphB is a benchmark graph: several ops on one arena.
type graphB struct{ graphT }

func newGraphB() *graphB { return &graphB{graphT{g: G.NewGraph()}} }

func (g *graphB) bench(b *testing.B, out *G.Node, bytes, flops float64) {
	arena := ops.NewArena()
	ops.Plan(g.g, arena)
	m := G.NewTapeMachine(g.g)
	defer m.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		arena.Reset()
		if err := m.RunAll(); err != nil {
			b.Fatal(err)
		}
		m.Reset()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(bytes/sec/1e9, "GB/s")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
}
