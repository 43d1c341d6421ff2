package train_test

import (
	"fmt"
	"log"
	"math"

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
