// Package cudaemu runs gozoo's CUDA calls on the host, for tests on a
// machine without a GPU: the kernels' CUDA C (every cuda/kernels/*.cu) is
// compiled with the host's C++ compiler against src/emu.h, which emulates
// the CUDA built-ins (every thread a fiber; barriers, shuffles and ballots
// among them), and cuBLAS products are plain float32 loops. It checks
// kernels' indexing, decoding and synchronisation, and the runtime's use
// of device memory, not speed nor the GPU's floating point (the host's
// expf, for one, is not the device's).
//
// A Device is emulated device memory and a cuda.Backend: an arena that
// the emulator process maps at fixed addresses (Base on), so that device
// pointers stored in device memory (the KV pool's slab tables) hold. Its
// allocations are poisoned (0xff: NaN floats, -1 ints) so that reads of
// what nothing wrote show, and followed by red zones that every Run
// checks; copies, launches' pointer arguments and products must fall in
// live allocations.
//
// Threads run in order, each until it waits; CUDAEMU_REVERSE=1 runs them,
// and a grid's blocks, in reverse, which shows a missing barrier or a
// kernel that depends on the order. CUDAEMU_PROFILE=FILE makes each
// emulator process append its kernels' calls, blocks and seconds to FILE.
//
// Tests call Build (or New), which skips them where there is no C++
// compiler or the host is not Linux; the emulator is built once per set
// of sources and kept in the user's cache.
package cudaemu

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/cpu"

	"github.com/gozoo/gozoo/cuda"
)

// Emulator is the built emulator of every kernel module.
type Emulator struct {
	bin string
}

var (
	buildMu sync.Mutex
	built   = map[string]*Emulator{}
	// current is the emulator built in this process, by compiler: the
	// sources are read and hashed once.
	current = map[string]*Emulator{}
)

// srcDirs are the emulator's sources (src: emu.h, emu.cc) and cuda/kernels.
func srcDirs() (emuDir, kernelDir string) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	return filepath.Join(dir, "src"), filepath.Join(dir, "..", "..", "cuda", "kernels")
}

// dynShared is an `extern __shared__ T name[];` declaration, which the
// emulator points at its dynamic shared memory.
var dynShared = regexp.MustCompile(`extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][A-Za-z0-9_ ]*?)\s*(\w+)\s*\[\s*\]\s*;`)

// staticShared is a `__shared__ T a[N], b[M];` declaration on a line of
// its own (what is left once dynShared's are replaced): the emulator
// poisons each variable for every block.
var staticShared = regexp.MustCompile(`(?m)^[ \t]*__shared__\s+([^;\n]*);`)

// sharedNames are the variables a __shared__ declaration declares: the
// last identifier before the first bracket of each declarator.
func sharedNames(decl string) []string {
	var names []string
	depth, from := 0, 0
	for i := 0; i <= len(decl); i++ {
		if i < len(decl) {
			switch decl[i] {
			case '[', '(':
				depth++
				continue
			case ']', ')':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		d := decl[from:i]
		from = i + 1
		if j := strings.IndexByte(d, '['); j >= 0 {
			d = d[:j]
		}
		if f := strings.Fields(strings.NewReplacer("(", " ", ")", " ").Replace(d)); len(f) > 0 {
			names = append(names, f[len(f)-1])
		}
	}
	return names
}

// emuSource is a module's CUDA C as the emulator compiles it.
func emuSource(src []byte) []byte {
	src = dynShared.ReplaceAll(src, []byte("$1 *$2 = ($1 *)emu::dynamic_shared;"))
	return staticShared.ReplaceAllFunc(src, func(m []byte) []byte {
		decl := string(staticShared.FindSubmatch(m)[1])
		out := string(m)
		for _, name := range sharedNames(decl) {
			out += fmt.Sprintf(" static unsigned long long emu_stamp_%s; emu::shared(&%s, sizeof %s, &emu_stamp_%s);", name, name, name, name)
		}
		return []byte(out)
	})
}

// Build compiles the emulator, or skips t where it cannot run: no C++
// compiler (g++), or not Linux (the arena's fixed mapping).
func Build(t testing.TB) *Emulator {
	t.Helper()
	if !supported {
		t.Skipf("the CUDA emulator runs on Linux, not %s", runtime.GOOS)
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		if cxx, err = exec.LookPath("c++"); err != nil {
			t.Skip("no C++ compiler (g++) for the CUDA emulator")
		}
	}
	buildMu.Lock()
	e := current[cxx]
	buildMu.Unlock()
	if e != nil {
		return e
	}
	if e, err = build(cxx); err != nil {
		t.Fatal(err)
	}
	buildMu.Lock()
	current[cxx] = e
	buildMu.Unlock()
	return e
}

// modules are the kernel modules, cuda/kernels/*.cu, by name.
func modules(kernelDir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(kernelDir, "*.cu"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".cu"))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no kernel modules in %s", kernelDir)
	}
	return out, nil
}

func build(cxx string) (*Emulator, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	emuDir, kernelDir := srcDirs()
	mods, err := modules(kernelDir)
	if err != nil {
		return nil, err
	}
	// The sources: the runtime, and per module a unit that includes its
	// .cu in a namespace and registers its kernels. Each unit is compiled
	// on its own (at once, on the host's cores) and kept by its hash with
	// the runtime's and the headers'.
	flags := []string{"-std=c++20", "-O2", "-g", "-ffp-contract=off", "-fno-fast-math"}
	if cpu.X86.HasFMA {
		// fmaf inline rather than libm's (the same results: a fused
		// multiply-add rounds once either way; nothing is contracted).
		flags = append(flags, "-mfma")
	}
	common := sha256.New()
	common.Write([]byte(cxx))
	common.Write([]byte(strings.Join(flags, " ")))
	for _, f := range []string{"emu.h", "cuda_fp16.h"} {
		b, err := os.ReadFile(filepath.Join(emuDir, f))
		if err != nil {
			return nil, err
		}
		common.Write(b)
	}
	headers, _ := filepath.Glob(filepath.Join(kernelDir, "*.cuh"))
	for _, f := range headers {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		common.Write(b)
	}
	base := common.Sum(nil)
	units := map[string][]byte{}
	rt, err := os.ReadFile(filepath.Join(emuDir, "emu.cc"))
	if err != nil {
		return nil, err
	}
	units["emu"] = append([]byte(fmt.Sprintf("#line 1 %q\n", filepath.Join(emuDir, "emu.cc"))), rt...)
	declared := map[string]bool{}
	for _, k := range cuda.Kernels() {
		declared[k.Module] = true
	}
	for _, m := range mods {
		src, err := os.ReadFile(filepath.Join(kernelDir, m+".cu"))
		if err != nil {
			return nil, err
		}
		src = emuSource(src)
		var u bytes.Buffer
		fmt.Fprintf(&u, "#include \"emu.h\"\n#include <cuda_fp16.h>\nnamespace mod_%s {\n#line 1 %q\n%s\n}\n", m, m+".cu", src)
		for _, k := range cuda.Kernels() {
			if k.Module == m {
				fmt.Fprintf(&u, "static emu::Reg reg_%s(%q, &mod_%s::%s);\n", k.Name, k.Name, m, k.Name)
			}
		}
		units["mod_"+m] = u.Bytes()
	}
	for m := range declared {
		if _, ok := units["mod_"+m]; !ok {
			return nil, fmt.Errorf("kernels are declared in module %s, which has no %s.cu in %s", m, m, kernelDir)
		}
	}
	names := make([]string, 0, len(units))
	for name := range units {
		names = append(names, name)
	}
	sort.Strings(names)
	all := sha256.New()
	all.Write(base)
	sums := map[string]string{}
	for _, name := range names {
		h := sha256.New()
		h.Write(base)
		h.Write(units[name])
		sums[name] = hex.EncodeToString(h.Sum(nil))[:16]
		all.Write([]byte(sums[name]))
	}
	sum := hex.EncodeToString(all.Sum(nil))[:16]
	if e := built[sum]; e != nil {
		return e, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "gozoo-cudaemu")
	bin := filepath.Join(dir, "emu-"+sum)
	if _, err := os.Stat(bin); err == nil {
		built[sum] = &Emulator{bin: bin}
		return built[sum], nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Compile the units that are not cached, then link. Files are
	// written under temporary names and renamed, so test processes that
	// build at once share the results.
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	objs := make([]string, len(names))
	for i, name := range names {
		objs[i] = filepath.Join(dir, name+"-"+sums[name]+".o")
		if _, err := os.Stat(objs[i]); err == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tmp, err := os.CreateTemp(dir, name+"-*.cc")
			if err != nil {
				errs[i] = err
				return
			}
			defer os.Remove(tmp.Name())
			if _, err := tmp.Write(units[name]); err != nil {
				tmp.Close()
				errs[i] = err
				return
			}
			tmp.Close()
			obj := strings.TrimSuffix(tmp.Name(), ".cc") + ".o"
			defer os.Remove(obj)
			cmd := exec.Command(cxx, append(flags, "-I", emuDir, "-I", kernelDir, "-c", "-o", obj, tmp.Name())...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("compiling %s for the CUDA emulator: %v\n%s", name, err, out)
				return
			}
			errs[i] = os.Rename(obj, objs[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command(cxx, append([]string{"-o", tmp}, objs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("linking the CUDA emulator: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return nil, err
	}
	built[sum] = &Emulator{bin: bin}
	return built[sum], nil
}
