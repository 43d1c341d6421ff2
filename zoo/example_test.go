package zoo_test

import (
	"fmt"
	"log"

	"github.com/gozoo/gozoo/zoo"
	_ "github.com/gozoo/gozoo/zoo/all" // registers every model_type
)

// Load a checkpoint folder (config.json and *.safetensors, or a GGUF
// file): the family comes from config.json's model_type, and every weight
// stays in its stored dtype, memory-mapped.
func ExampleLoad() {
	m, err := zoo.Load("../testdata/models/qwen3-tiny")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.ModelType(), "layers:", m.NumLayers(), "hidden:", m.HiddenSize(), "vocabulary:", m.VocabSize())
	var n int64
	for _, p := range m.Params().All() {
		n += p.Numel()
	}
	p, _ := m.Params().Get("model.layers.0.self_attn.q_proj.weight")
	fmt.Println(len(m.Params().All()), "tensors,", n, "parameters; q_proj:", p.DType, p.Shape)
	// Output:
	// qwen3 layers: 2 hidden: 32 vocabulary: 151936
	// 24 tensors, 4886752 parameters; q_proj: BF16 [64 32]
}
