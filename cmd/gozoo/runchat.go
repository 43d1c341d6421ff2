package main

import (
	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo/generate"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// chatPrompt renders a system (optional) and user turn with the
// checkpoint's chat template, opening the assistant's turn.
func chatPrompt(g *generate.Generator, system, user string) ([]int, error) {
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	msgs = append(msgs, chat.Message{Role: "user", Content: user})
	return g.ChatIDs(msgs, chat.RenderOptions{AddGenerationPrompt: true})
}

// imagePrompt prepares a vision-language prompt: the images opened,
// preprocessed and encoded, the prompt (or, with chat, a user turn of the
// images then the text) expanded and tokenized.
func imagePrompt(g *generate.Generator, dir string, paths []string, useChat bool, system, prompt string) (graphs.Input, error) {
	p, err := idefics3.NewPipeline(g, dir)
	if err != nil {
		return graphs.Input{}, err
	}
	srcs := make([]any, len(paths))
	for i, path := range paths {
		srcs[i] = path
	}
	imgs, err := p.Images(srcs...)
	if err != nil {
		return graphs.Input{}, err
	}
	var pr *idefics3.Prepared
	if useChat {
		var msgs []chat.Message
		if system != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: []any{map[string]any{"type": "text", "text": system}}})
		}
		pr, err = p.PrepareChat(append(msgs, idefics3.UserMessage(len(imgs), prompt)), imgs)
	} else {
		pr, err = p.Prepare(prompt, imgs)
	}
	if err != nil {
		return graphs.Input{}, err
	}
	return pr.Input, nil
}
