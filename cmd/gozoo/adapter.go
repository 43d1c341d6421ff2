package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gozoo/gozoo/zoo"
)

// adapterFlag registers --adapter, a PEFT LoRA folder to apply (repeatable
// where several adapters make sense: gozoo serve), as DIR or NAME=DIR.
func adapterFlag(fs *flag.FlagSet, many bool) *stringList {
	var l stringList
	usage := "apply the PEFT LoRA adapter in `DIR` (adapter_config.json + adapter_model.safetensors), unmerged"
	if many {
		usage += "; repeatable, as NAME=DIR or DIR (named after its folder), each served as the model id BASE:NAME"
	}
	fs.Var(&l, "adapter", usage)
	return &l
}

// applyAdapters attaches each adapter of list (DIR or NAME=DIR) to m, and
// with merge adds them into the base weights (which must be F32).
func applyAdapters(m zoo.Model, list []string, merge bool) error {
	for _, spec := range list {
		name, dir, ok := strings.Cut(spec, "=")
		if !ok {
			name, dir = filepath.Base(filepath.Clean(spec)), spec
		}
		if name == "" || name == "-" || strings.Contains(name, ":") {
			return fmt.Errorf("--adapter %q: the name must be non-empty, not -, without ':'", spec)
		}
		for _, a := range m.Params().Adapters() {
			if a.Name == name {
				return fmt.Errorf("--adapter %q: a second adapter named %q (use NAME=DIR)", spec, name)
			}
		}
		a, err := m.Params().LoadLoRA(name, dir)
		if err != nil {
			return err
		}
		if merge {
			if err := a.Merge(m.Params()); err != nil {
				return err
			}
		}
	}
	return nil
}
