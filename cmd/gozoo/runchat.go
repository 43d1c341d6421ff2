package main

import (
	"github.com/gozoo/gozoo/chat"
	"github.com/gozoo/gozoo/zoo/generate"
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
