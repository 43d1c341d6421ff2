package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// ErrNoDriver is wrapped by every error that comes from a machine without
// a usable CUDA driver: no libcuda, or a libcuda that finds no device.
var ErrNoDriver = errors.New("no CUDA driver")

// LibsEnv names a list of folders, separated by ':', searched before the
// usual places for libcuda and cuBLAS.
const LibsEnv = "GOZOO_CUDA_LIBS"

// libDirs are the places a CUDA install puts its libraries, after the
// folders of LibsEnv; a bare name (dlopen's own search: LD_LIBRARY_PATH,
// the ld.so cache) comes first of all.
var libDirs = []string{
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib64",
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/local/nvidia/lib64",
	"/usr/lib/wsl/lib",
}

// candidates lists the paths tried for a library, in order.
func candidates(names []string) []string {
	var dirs []string
	if env := os.Getenv(LibsEnv); env != "" {
		for _, d := range strings.Split(env, ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	var out []string
	for _, n := range names {
		for _, d := range dirs {
			out = append(out, filepath.Join(d, n))
		}
		out = append(out, n)
		for _, d := range libDirs {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

// library is a shared library opened with dlopen.
type library struct {
	name   string // the path it was opened by
	handle uintptr
}

// openLibrary opens the first of names (in the search order of
// candidates) that loads; its error names the libraries and the last
// loader error.
func openLibrary(what string, names []string) (*library, error) {
	var last error
	for _, p := range candidates(names) {
		if strings.ContainsRune(p, '/') {
			if _, err := os.Stat(p); err != nil {
				continue
			}
		}
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return &library{name: p, handle: h}, nil
		}
		last = err
	}
	msg := fmt.Sprintf("cannot load %s (%s; also searched %s and $%s)", what, strings.Join(names, ", "), strings.Join(libDirs, ", "), LibsEnv)
	if last != nil {
		return nil, fmt.Errorf("%s: %w: %v", msg, ErrNoDriver, last)
	}
	return nil, fmt.Errorf("%s: %w", msg, ErrNoDriver)
}

// sym returns the address of a function of the library.
func (l *library) sym(name string) (uintptr, error) {
	p, err := purego.Dlsym(l.handle, name)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%s has no %s: %v", l.name, name, err)
	}
	return p, nil
}

// bind fills fns (symbol name -> where its address goes) from l.
func (l *library) bind(fns map[string]*uintptr) error {
	for name, at := range fns {
		p, err := l.sym(name)
		if err != nil {
			return err
		}
		*at = p
	}
	return nil
}

// call calls a C function that returns an int status (CUresult,
// cublasStatus_t).
func call(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(r))
}

var (
	loadOnce sync.Once
	loaded   *driver
	loadErr  error
)

// Load loads libcuda and initialises the driver, once per process. On a
// machine without one it returns an error wrapping ErrNoDriver that
// names libcuda.so.1.
func Load() error {
	loadOnce.Do(func() { loaded, loadErr = loadDriver() })
	return loadErr
}
