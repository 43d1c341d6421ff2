package train_test

import (
	"context"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/gozoo/gozoo/train"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// The loss of a token sequence and its gradients: with respect to every
// weight (named like the checkpoint's tensors) and to the input
// embeddings, whose norm per position is a token saliency.
func Example() {
	model, err := zoo.Load("../testdata/golden/qwen3_gqa_tied")
	if err != nil {
		log.Fatal(err)
	}
	ids := []int{9, 41, 7, 300, 12, 5}
	g, err := train.LossAndGradients(model, ids)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %.4f over %d predicted tokens\n", g.Loss, len(ids)-1)
	fmt.Println("q_proj gradient", g.Weights["model.layers.0.self_attn.q_proj.weight"].Shape())

	D := model.HiddenSize()
	e := g.InputsEmbeds.Data().([]float32)
	for t, id := range ids {
		var ss float64
		for _, v := range e[t*D : (t+1)*D] {
			ss += float64(v) * float64(v)
		}
		fmt.Printf("token %3d saliency %.3f\n", id, math.Sqrt(ss))
	}
	// Output:
	// loss 15.0554 over 5 predicted tokens
	// q_proj gradient (128, 64)
	// token   9 saliency 8.427
	// token  41 saliency 8.337
	// token   7 saliency 3.263
	// token 300 saliency 5.380
	// token  12 saliency 4.644
	// token   5 saliency 0.000
}

// A few training steps of a fresh random model on a repeated token
// sequence, with AdamW's warmup and cosine schedule, then a checkpoint
// that zoo.Load reads back.
func ExampleTrainer() {
	config, err := os.ReadFile("../testdata/golden/qwen3_gqa_tied/config.json")
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := zoo.ParseConfig(config)
	if err != nil {
		log.Fatal(err)
	}
	model, err := zoo.NewRandom(cfg, 1)
	if err != nil {
		log.Fatal(err)
	}
	var tokens []int // a tokenized text; here a phrase said over and over
	for range 30 {
		tokens = append(tokens, 17, 240, 3, 99, 311, 42, 7, 128, 64, 5)
	}
	tr, err := train.NewTrainer(model, tokens, train.Options{
		SeqLen: 16, Batch: 2, Accum: 2, Steps: 12, LR: 1e-2, Warmup: 2, ClipNorm: 1, Seed: 7,
		AdamW: train.AdamWConfig{WeightDecay: 0.1},
		Progress: func(p train.Progress) {
			if p.Step%4 == 0 {
				fmt.Printf("step %2d loss %.1f lr %.4f\n", p.Step, p.Loss, p.LR)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	if err := tr.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "trained")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := tr.Save(dir, config); err != nil {
		log.Fatal(err)
	}
	back, err := zoo.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reloaded", back.ModelType(), "with", len(back.Params().All()), "tensors")
	// Output:
	// step  4 loss 4.3 lr 0.0090
	// step  8 loss 2.5 lr 0.0035
	// step 12 loss 2.3 lr 0.0000
	// reloaded qwen3 with 35 tensors
}
