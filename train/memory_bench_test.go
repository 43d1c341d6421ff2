package train_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gozoo/gozoo/internal/testfiles"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
)

// BenchmarkTrainMemory trains the bundled kjv-tiny with its recipe's
// batch shape (16 × 128 tokens, AdamW) on public-domain prose, all its
// weights (full) or a LoRA adapter of rank 8 on q_proj and v_proj with
// the BF16 base frozen (lora-r8-qv, at 5× the learning rate, as LoRA is
// usually trained). It reports the optimizer's state,
// the heap the trainer holds once built (weights' float32 copies,
// gradient buffers, optimizer state), and the loss of the first and last
// step; one op is one step.
//
//	go test -run '^$' -bench TrainMemory -benchtime 20x ./train/
func BenchmarkTrainMemory(b *testing.B) {
	root := testfiles.Root(b)
	dir := filepath.Join(root, "testdata", "models", "kjv-tiny")
	text, err := os.ReadFile(filepath.Join(root, "tokenizer", "testdata", "prose.txt"))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	stream, err := tok.Encode(string(text), false)
	if err != nil {
		b.Fatal(err)
	}
	for _, lora := range []bool{false, true} {
		name := "full"
		if lora {
			name = "lora-r8-qv"
		}
		lr := 2e-3
		if lora {
			lr = 1e-2
		}
		b.Run(name, func(b *testing.B) {
			m, err := zoo.Load(dir)
			if err != nil {
				b.Fatal(err)
			}
			if lora {
				cfg, err := loaders.ParseLoRAConfig([]byte(`{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj","v_proj"]}`))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := m.Params().NewLoRA("kjv", cfg, rand.New(rand.NewPCG(1, 2)), 0); err != nil {
					b.Fatal(err)
				}
			}
			before := heapInUse()
			tr, err := train.NewTrainer(m, stream, train.Options{SeqLen: 128, Batch: 16, Steps: b.N, LR: lr, Warmup: 1, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			held := heapInUse() - before
			b.ResetTimer()
			if err := tr.Run(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			l := tr.Losses()
			b.ReportMetric(float64(tr.OptimizerBytes()), "optimizer-B")
			b.ReportMetric(float64(held), "trainer-heap-B")
			b.ReportMetric(l[0], "loss-first")
			b.ReportMetric(l[len(l)-1], "loss-last")
		})
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
