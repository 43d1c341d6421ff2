package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// ptxEntries parses the .entry declarations of a PTX file: kernel name to
// its parameters' PTX types.
func ptxEntries(t *testing.T, src string) map[string][]string {
	t.Helper()
	entry := regexp.MustCompile(`(?s)\.entry\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*?)\)`)
	param := regexp.MustCompile(`\.param\s+\.(\w+)`)
	out := map[string][]string{}
	for _, m := range entry.FindAllStringSubmatch(src, -1) {
		var types []string
		for _, p := range param.FindAllStringSubmatch(m[2], -1) {
			types = append(types, p[1])
		}
		out[m[1]] = types
	}
	return out
}

// ptxType is the PTX parameter type of a declared parameter kind.
var ptxType = map[byte]string{'p': "u64", 'l': "u64", 'i': "u32", 'u': "u32", 'f': "f32"}

// TestKernelsMatchPTX holds the declarations to the PTX. The declarations
// live in this package (kernels_*.go), so its test binary sees all of
// them; the ops launch them by those names.
func TestKernelsMatchPTX(t *testing.T) {
	mods := Modules()
	if len(mods) == 0 {
		t.Fatal("no embedded PTX")
	}
	entries := map[string][]string{}
	module := map[string]string{}
	for _, m := range mods {
		src, err := ModulePTX(m)
		if err != nil {
			t.Fatal(err)
		}
		for name, params := range ptxEntries(t, string(src)) {
			entries[name] = params
			module[name] = m
		}
	}
	seen := map[string]bool{}
	for _, k := range Kernels() {
		seen[k.Name] = true
		params, ok := entries[k.Name]
		switch {
		case !ok:
			t.Errorf("kernel %s is declared but no PTX has it", k.Name)
			continue
		case module[k.Name] != k.Module:
			t.Errorf("kernel %s is declared in module %s but lives in %s.ptx", k.Name, k.Module, module[k.Name])
		case len(params) != len(k.Params):
			t.Errorf("kernel %s: declared %d parameters (%s), PTX has %d %v", k.Name, len(k.Params), k.Params, len(params), params)
			continue
		}
		for i := range params {
			if want := ptxType[k.Params[i]]; params[i] != want && !(want == "u32" && params[i] == "s32") {
				t.Errorf("kernel %s parameter %d: declared %c (.%s), PTX has .%s", k.Name, i, k.Params[i], want, params[i])
			}
		}
	}
	for name := range entries {
		if !seen[name] {
			t.Errorf("PTX entry %s (%s.ptx) is not declared in cuda/kernels_*.go", name, module[name])
		}
	}
}

// TestPTXAssembles runs ptxas on every embedded module for the A100's and
// the H100's architectures, so a kernel that the driver's JIT would
// refuse fails here, without a GPU.
func TestPTXAssembles(t *testing.T) {
	ptxas, err := exec.LookPath("ptxas")
	if err != nil {
		t.Skip("ptxas not found (Debian: nvidia-cuda-toolkit); skipping the PTX assembly check")
	}
	dir := t.TempDir()
	for _, m := range Modules() {
		src, err := ModulePTX(m)
		if err != nil {
			t.Fatal(err)
		}
		f := m + ".ptx"
		in := filepath.Join(dir, f)
		if err := os.WriteFile(in, src, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, arch := range []string{"sm_80", "sm_90"} {
			out, err := exec.Command(ptxas, "-arch="+arch, "-o", filepath.Join(dir, "out.cubin"), in).CombinedOutput()
			if err != nil {
				t.Errorf("ptxas -arch=%s %s: %v\n%s", arch, f, err, out)
			}
		}
	}
}

// TestGenerateReproduces: go generate ./cuda (gen.sh) reproduces the
// checked-in PTX byte for byte, where nvcc is installed.
func TestGenerateReproduces(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err != nil {
		t.Skip("nvcc not found (Debian: nvidia-cuda-toolkit); skipping the PTX reproducibility check")
	}
	if testing.Short() {
		t.Skip("compiling every kernel takes a while")
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "gen.sh")
	cmd.Env = append(os.Environ(), "PTX_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	mods := Modules()
	made, _ := filepath.Glob(filepath.Join(dir, "*.ptx.zst"))
	if len(made) != len(mods) {
		t.Errorf("gen.sh made %d PTX files, %d are checked in", len(made), len(mods))
	}
	for _, m := range mods {
		want, err := ModulePTX(m)
		if err != nil {
			t.Fatal(err)
		}
		z, err := os.ReadFile(filepath.Join(dir, m+".ptx.zst"))
		var got []byte
		if err == nil {
			got, err = zstdDecoder.DecodeAll(z, nil)
		}
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: gen.sh's output differs from the checked-in file (%v); run go generate ./cuda", m, err)
		}
	}
}
