package graphs_test

import (
	"fmt"
	"log"
	"math"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
)

// prompt is "The quick brown fox" in the Qwen3 tokenizer's ids.
var prompt = []int{785, 3974, 13876, 38835}

// A session runs a model as Gorgonia graphs over a KV cache: Append
// prefills a prompt and returns the logits of its last token, then each
// Append of one token is a decode step.
func ExampleSession() {
	m, err := zoo.Load("../testdata/models/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	sess, err := graphs.NewSession(m, graphs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	logits, err := sess.Append(prompt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(logits), "logits; positions:", sess.Pos())
	if _, err := sess.Append([]int{11}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("positions after a decode step:", sess.Pos())
	// Output:
	// 151936 logits; positions: 4
	// positions after a decode step: 5
}

// Capture the residual stream after every layer and the attention
// probabilities of a layer (computed only when captured).
func ExampleSession_Captured() {
	m, err := zoo.Load("../testdata/models/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	sess, err := graphs.NewSession(m, graphs.Options{
		Capture: []string{graphs.HiddenStates + ".*", graphs.Attentions + ".1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Append(prompt); err != nil {
		log.Fatal(err)
	}
	fmt.Println(sess.CapturedNames())
	h, _ := sess.Captured("hidden_states.2") // [tokens, hidden]: the last layer's output, normed
	a, _ := sess.Captured("attentions.1")    // [tokens, heads, keys]
	fmt.Println("hidden_states.2", h.Shape(), "attentions.1", a.Shape())
	// The last token's attention over the 4 keys, head 0, sums to 1.
	probs := a.Data().([]float32)[3*4*4 : 3*4*4+4]
	sum := 0.0
	for _, p := range probs {
		sum += float64(p)
	}
	fmt.Printf("sum %.4f\n", math.Round(sum*1e4)/1e4)
	// Output:
	// [attentions.1 hidden_states.0 hidden_states.1 hidden_states.2]
	// hidden_states.2 (4, 32) attentions.1 (4, 4, 4)
	// sum 1.0000
}
