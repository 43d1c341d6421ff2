// Package all registers every model family of the zoo. Import it for its
// side effect:
//
//	import _ "github.com/gozoo/gozoo/zoo/all"
package all

import (
	_ "github.com/gozoo/gozoo/zoo/gemma3"
	_ "github.com/gozoo/gozoo/zoo/gpt2"
	_ "github.com/gozoo/gozoo/zoo/idefics3"
	_ "github.com/gozoo/gozoo/zoo/llama"
	_ "github.com/gozoo/gozoo/zoo/qwen3"
	_ "github.com/gozoo/gozoo/zoo/qwen3moe"
	_ "github.com/gozoo/gozoo/zoo/smollm3"
)
