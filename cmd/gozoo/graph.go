package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
)

func init() {
	register(command{
		name:    "graph",
		summary: "print a model's computation graph in Graphviz DOT",
		run:     runGraph,
	})
}

func runGraph(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("graph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("model", "", "model folder (required)")
	rows := fs.Int("rows", 1, "rows (tokens) per run: 1 is the decode graph, more a prefill bucket")
	all := fs.Bool("all-logits", false, "project every row onto the vocabulary, not only the last")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" || *rows < 1 {
		fmt.Fprintln(stderr, "usage: gozoo graph --model DIR [--rows T] [--all-logits] > graph.dot")
		return 2
	}
	m, err := zoo.Load(*model)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo graph:", err)
		return 1
	}
	s, err := graphs.NewSession(m, graphs.Options{Capacity: min(m.MaxPositions(), max(*rows, 16))})
	if err != nil {
		fmt.Fprintln(stderr, "gozoo graph:", err)
		return 1
	}
	defer s.Close()
	g, err := s.Graph(*rows, *all)
	if err != nil {
		fmt.Fprintln(stderr, "gozoo graph:", err)
		return 1
	}
	fmt.Fprintln(stdout, g.ToDot())
	return 0
}
