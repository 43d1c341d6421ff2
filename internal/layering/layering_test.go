package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gozoo/gozoo"

// layers are gozoo's packages, lowest first, by import path within the
// module. A package may import packages of its own layer and of the
// layers below it, never of a layer above. An entry ending in "/..." is
// every package below that folder (not the folder itself); an exact entry
// wins over a folder, a longer folder over a shorter. Tests are not held
// to the order: a test may import what it checks against (a family's
// golden case, a tiny model), since nothing imports a test.
var layers = []struct {
	name string
	pkgs []string
}{
	// Kernels, op skeleton, process facts and the test helpers that know
	// no model.
	{"base", []string{"internal/...", "ops", "cuda"}},
	// What comes in from files: checkpoints, GGUF, tokenizers, images,
	// Jinja and chat templates; and the grammars of constrained decoding,
	// over a tokenizer's vocabulary.
	{"inputs", []string{"loaders", "loaders/gguf", "tokenizer", "images", "jinja", "chat", "grammar"}},
	{"graphs", []string{"graphs"}},
	{"layers", []string{"layers"}},
	// The registry and what runs any registered model: generation sits
	// below the families, since a family may build on it (idefics3's
	// Pipeline is a Generator with an image processor).
	{"zoo", []string{"zoo"}},
	{"generate", []string{"zoo/generate"}},
	// The families, zoo/all, and the test models built from a family.
	{"families", []string{"zoo/...", "internal/testmodels", "internal/testmodels/..."}},
	{"train", []string{"train"}},
	// The conformance runner and the checks every family's tests run,
	// which call it.
	{"conformance", []string{"golden", "internal/familytest"}},
	// The OpenAI-compatible server over the batched runtime.
	{"serving", []string{"serve"}},
	{"commands", []string{"cmd/..."}},
}

// layerOf is the index in layers of the package at path (relative to the
// module), and the entry that placed it; ok is false for a package no
// entry covers.
func layerOf(path string) (layer int, entry string, ok bool) {
	best := -1
	for i, l := range layers {
		for _, e := range l.pkgs {
			var score int
			switch dir, isDir := strings.CutSuffix(e, "/..."); {
			case !isDir && e == path:
				score = 1 << 20 // exact
			case isDir && strings.HasPrefix(path, dir+"/"):
				score = len(dir)
			default:
				continue
			}
			if score > best {
				best, layer, entry, ok = score, i, e, true
			}
		}
	}
	return layer, entry, ok
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// goTool is the go command: go test puts its own GOROOT/bin first in
// the PATH of the tests it runs.
func goTool(t *testing.T) string {
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list the packages with: %v", err)
	}
	return p
}

// list runs go list over the module with the given environment and build
// tags.
func list(t *testing.T, goos, tags string) []pkg {
	args := []string{"list", "-e", "-json=ImportPath,Imports"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goTool(t), append(args, module+"/...")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if goos != "" {
		cmd.Env = append(cmd.Env, "GOOS="+goos)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.String())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayers fails on a package that imports a package of a higher
// layer, or that no layer holds. It lists the packages as the default
// build, the purego and hftokenizers builds, and Windows (the !unix files)
// see them.
func TestLayers(t *testing.T) {
	used := map[string]bool{}
	var order []string              // the findings, in the order first seen
	builds := map[string][]string{} // finding -> the builds that show it
	find := func(msg, build string) {
		if _, seen := builds[msg]; !seen {
			order = append(order, msg)
		}
		builds[msg] = append(builds[msg], build)
	}
	for _, c := range []struct{ goos, tags string }{
		{"", ""},
		{"", "purego,hftokenizers"},
		{"windows", ""},
	} {
		build := buildName(c.goos, c.tags)
		for _, p := range list(t, c.goos, c.tags) {
			rel, ok := inModule(p.ImportPath)
			if !ok {
				continue
			}
			from, fromEntry, ok := layerOf(rel)
			if !ok {
				find(rel+" is in no layer: add it to layers in internal/layering/layering_test.go", build)
				continue
			}
			used[fromEntry] = true
			for _, imp := range p.Imports {
				irel, ok := inModule(imp)
				if !ok {
					continue
				}
				if to, _, ok := layerOf(irel); ok && to > from {
					find(fmt.Sprintf("%s (layer %s) imports %s (layer %s, above it)",
						rel, layers[from].name, irel, layers[to].name), build)
				}
			}
		}
	}
	for _, msg := range order {
		t.Errorf("%s [%s]", msg, strings.Join(builds[msg], "; "))
	}
	for _, l := range layers {
		for _, e := range l.pkgs {
			if !strings.HasSuffix(e, "/...") && !used[e] {
				t.Errorf("layer %s names %s, which is no package of the module", l.name, e)
			}
		}
	}
}

func inModule(path string) (string, bool) {
	return strings.CutPrefix(path, module+"/")
}

func buildName(goos, tags string) string {
	s := "GOOS=" + goos
	if goos == "" {
		s = "host"
	}
	if tags != "" {
		s += " -tags " + tags
	}
	return s
}

// TestLayerOf checks the placement rules on examples.
func TestLayerOf(t *testing.T) {
	for _, c := range []struct{ path, layer string }{
		{"internal/simd", "base"},
		{"internal/testmodels", "families"},
		{"internal/testmodels/prepare", "families"},
		{"internal/familytest", "conformance"},
		{"zoo", "zoo"},
		{"zoo/generate", "generate"},
		{"zoo/qwen3", "families"},
		{"cmd/gozoo", "commands"},
	} {
		i, _, ok := layerOf(c.path)
		if !ok || layers[i].name != c.layer {
			t.Errorf("%s: layer %v (placed: %v), want %s", c.path, layers[i].name, ok, c.layer)
		}
	}
	if _, _, ok := layerOf("nowhere"); ok {
		t.Error("an unlisted package was placed")
	}
}
