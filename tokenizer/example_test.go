package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/gozoo/gozoo/tokenizer"
)

func Example() {
	tok, err := tokenizer.Load("../testdata/tokenizers/qwen3")
	if err != nil {
		log.Fatal(err)
	}
	ids, err := tok.Encode("<|im_start|>user\nHello, world!<|im_end|>", false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)
	text, err := tok.Decode(ids, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// [151644 872 198 9707 11 1879 0 151645]
	// "user\nHello, world!"
}

// The rare character 𠀀 is three byte-level tokens: its text comes out
// whole with the last of them.
func ExampleTokenizer_NewStreamDecoder() {
	tok, err := tokenizer.Load("../testdata/tokenizers/qwen3")
	if err != nil {
		log.Fatal(err)
	}
	ids, _ := tok.Encode("naïve 𠀀", false)
	d := tok.NewStreamDecoder(false)
	for _, id := range ids {
		s, err := d.Push(id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d -> %q\n", id, s)
	}
	rest, _ := d.Flush()
	fmt.Printf("flush -> %q\n", rest)
	// Output:
	// 3376 -> "na"
	// 37572 -> "ï"
	// 586 -> "ve"
	// 220 -> " "
	// 172 -> ""
	// 63219 -> ""
	// 222 -> "𠀀"
	// flush -> ""
}
