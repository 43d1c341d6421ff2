package generate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/gozoo/gozoo/chat"
	_ "github.com/gozoo/gozoo/zoo/all"
	"github.com/gozoo/gozoo/zoo/generate"
)

// dir is the bundled tiny Qwen3: random weights, the real tokenizer and
// chat template. Any checkpoint folder works the same.
const dir = "../../testdata/models/qwen3-tiny"

// Load opens a checkpoint folder for text: the model, its tokenizer, chat
// template and generation_config.json.
func ExampleLoad() {
	g, err := generate.Load(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	ids, err := g.Encode("The quick brown fox")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids, "EOS:", g.EOS)
	s := g.Defaults.Sampling
	fmt.Println("temperature", s.Temperature, "top-k", s.TopK, "top-p", s.TopP)
	// Output:
	// [785 3974 13876 38835] EOS: [151645 151643]
	// temperature 0.6 top-k 20 top-p 0.95
}

// Generate runs a generation to its end; Sampling left at zero is greedy.
func ExampleGenerator_Generate() {
	g, err := generate.Load(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	ids, err := g.Encode("The quick brown fox")
	if err != nil {
		log.Fatal(err)
	}
	res, err := g.Generate(context.Background(), ids, generate.Options{MaxTokens: 6})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Tokens, res.StopReason) // random weights: the tiny model echoes its last token
	// Output:
	// [38835 38835 38835 38835 38835 38835] max_tokens
}

// Stream yields the tokens as they are produced, in the caller's
// goroutine; leaving the loop stops the generation.
func ExampleGenerator_Stream() {
	g, err := generate.Load(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	ids, err := g.Encode("The quick brown fox")
	if err != nil {
		log.Fatal(err)
	}
	st := g.Stream(context.Background(), ids, generate.Options{MaxTokens: 6})
	for tok := range st.Tokens() {
		fmt.Printf("%d %q\n", tok.ID, tok.Text)
	}
	res, err := st.Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res.Tokens), "tokens:", res.StopReason)
	// Output:
	// 38835 " fox"
	// 38835 " fox"
	// 38835 " fox"
	// 38835 " fox"
	// 38835 " fox"
	// 38835 " fox"
	// 6 tokens: max_tokens
}

// ChatIDs renders a conversation with the checkpoint's own chat template
// and tokenizes it, as transformers' apply_chat_template does.
func ExampleGenerator_ChatIDs() {
	g, err := generate.Load(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	msgs := []chat.Message{{Role: "user", Content: "Why is the sky blue?"}}
	opts := chat.RenderOptions{AddGenerationPrompt: true, Kwargs: map[string]any{"enable_thinking": false}}
	text, err := g.Template.Render(msgs, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text)
	ids, err := g.ChatIDs(msgs, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids), "tokens")
	// Output:
	// <|im_start|>user
	// Why is the sky blue?<|im_end|>
	// <|im_start|>assistant
	// <think>
	//
	// </think>
	//
	// 18 tokens
}
