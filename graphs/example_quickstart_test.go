package graphs_test

import (
	"fmt"
	"log"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/tokenizer"
	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all"
	"github.com/gozoo/gozoo/zoo/generate"
)

// The README's quick start: load the bundled King James model, prefill a
// prompt, and decode greedily, one token a step over the KV cache.
// zoo/generate does the same with sampling, stop conditions and
// streaming.
func Example_greedyDecode() {
	const dir = "../testdata/models/kjv-tiny"
	model, err := zoo.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	sess, err := graphs.NewSession(model, graphs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()

	prompt := "And God said"
	ids, err := tok.Encode(prompt, true)
	if err != nil {
		log.Fatal(err)
	}
	logits, err := sess.Append(ids) // prefill: the last token's logits
	if err != nil {
		log.Fatal(err)
	}
	var out []int
	for range 9 {
		next := generate.Argmax(logits)
		out = append(out, next)
		if logits, err = sess.Append([]int{next}); err != nil { // one decode step
			log.Fatal(err)
		}
	}
	text, err := tok.Decode(out, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(prompt + text)
	// Output:
	// And God said unto him, Behold, I pray thee,
}
