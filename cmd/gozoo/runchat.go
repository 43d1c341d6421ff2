package main

import "github.com/gozoo/gozoo/zoo/generate"

func chatPrompt(g *generate.Generator, dir, system, user string) ([]int, error) {
	return nil, errNoChat
}
