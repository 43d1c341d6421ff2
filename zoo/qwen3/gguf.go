package qwen3

import (
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders/gguf"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/llama"
)

func init() { zoo.RegisterGGUF("qwen3", "qwen3", ggufQwen3{}) }

// ggufQwen3 is llama.cpp's qwen3: the Llama decoder's keys and names, with
// the head size written out (it is not hidden_size / heads).
type ggufQwen3 struct{}

var ggufName = llama.GGUFNames(nil)

func (ggufQwen3) Config(m zoo.GGUFMeta, c zoo.ConfigMap) error { return llama.GGUFConfig(m, c) }

func (ggufQwen3) Tensor(_ zoo.ConfigMap, p *graphs.Param) (zoo.GGUFTensor, bool) {
	name, ok := ggufName(p.Name)
	return zoo.GGUFTensor{Name: name}, ok
}

func (ggufQwen3) Metadata(cfg zoo.ConfigMap, m zoo.Model) ([]gguf.KV, error) {
	kv, hd, err := llama.GGUFMetadata(cfg, m)
	if err != nil {
		return nil, err
	}
	return append(kv, llama.GGUFHeadLengths(hd)...), nil
}
