// Command gozoo runs, checks and measures the models of the gozoo zoo,
// and trains, quantizes and tokenizes for them: run, golden, bench,
// perplexity, embed, train, train-tokenizer, quantize, random, graph,
// preprocess, encode, decode and template (gozoo with no arguments lists
// them; README.md has their flags).
//
// Each subcommand lives in its own file and registers itself in init(), so
// adding one never touches this file.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"

	"github.com/gozoo/gozoo/internal/procstat"
)

// command is one gozoo subcommand. run gets the arguments after the
// subcommand name and returns the process exit status.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("gozoo: subcommand registered twice: " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: gozoo <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'gozoo <command> -h' for a command's flags.")
}

func main() {
	// The weights live outside the Go heap (memory-mapped checkpoints), so
	// the heap holds only activations and graph bookkeeping, and Go's
	// default of letting it grow to twice its live size mostly adds
	// resident memory. A lower target costs little CPU for so small a
	// heap. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
	// Most of the binary is code a given command never runs; on kernels
	// that would keep all of it resident, let only what runs come back.
	procstat.ReleaseImage()
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "gozoo: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}
