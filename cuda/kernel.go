package cuda

import (
	"embed"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/zstd"
)

// ptxFiles holds the kernels, compiled ahead from kernels/*.cu to PTX for
// compute_80 by go generate (gen.sh) and zstd-compressed (a tenth of the
// size: the tree travels to GPU machines). The driver compiles them for
// the card when a module first loads.
//
//go:embed ptx/*.ptx.zst
var ptxFiles embed.FS

// Modules lists the embedded PTX modules by name (a kernels/*.cu file).
func Modules() []string {
	ents, _ := ptxFiles.ReadDir("ptx")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".ptx.zst"))
	}
	return out
}

// ModulePTX returns a module's PTX text.
func ModulePTX(module string) ([]byte, error) {
	z, err := ptxFiles.ReadFile("ptx/" + module + ".ptx.zst")
	if err != nil {
		return nil, err
	}
	src, err := zstdDecoder.DecodeAll(z, nil)
	if err != nil {
		return nil, fmt.Errorf("decompressing module %s: %w", module, err)
	}
	return src, nil
}

var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))

//go:generate sh gen.sh

// Kernel is a __global__ function of a module: its name in the PTX and
// its parameters, one letter each: p a device pointer, i an int32, u a
// uint32, f a float32, l an int64. Every kernel gozoo launches is
// declared with NewKernel, and a test holds the declarations to the PTX.
type Kernel struct {
	Module string // the PTX file, without .ptx
	Name   string
	Params string
}

var (
	registryMu sync.Mutex
	registry   = map[string]*Kernel{}
)

// NewKernel declares a kernel of module. Declaring one name twice with
// other parameters panics: the two call sites disagree about the PTX.
func NewKernel(module, name, params string) *Kernel {
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, c := range params {
		if !strings.ContainsRune("piufl", c) {
			panic(fmt.Sprintf("cuda: kernel %s: parameter kind %q", name, c))
		}
	}
	if k, ok := registry[name]; ok {
		if k.Module != module || k.Params != params {
			panic(fmt.Sprintf("cuda: kernel %s declared as %s(%s) and %s(%s)", name, k.Module, k.Params, module, params))
		}
		return k
	}
	k := &Kernel{Module: module, Name: name, Params: params}
	registry[name] = k
	return k
}

// Kernels lists the declared kernels by name.
func Kernels() []*Kernel {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]*Kernel, 0, len(registry))
	for _, k := range registry {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z int }

// D1 is a one-dimensional size.
func D1(x int) Dim3 { return Dim3{x, 1, 1} }

// Blocks is the number of blocks of size per that cover n.
func Blocks(n, per int) int { return (n + per - 1) / per }

// Args are a launch's parameters, packed as cuLaunchKernel takes them:
// one 8-byte slot a parameter and an array of pointers to the slots.
type Args struct {
	slots []uint64
	ptrs  []unsafe.Pointer
}

// Pack checks args against k's parameters and packs them. A pointer
// takes a Ptr, an int32 or uint32 takes any Go integer that fits, a
// float32 a float32 or float64.
func (k *Kernel) Pack(a *Args, args ...any) error {
	if len(args) != len(k.Params) {
		return fmt.Errorf("kernel %s takes %d parameters (%s), got %d", k.Name, len(k.Params), k.Params, len(args))
	}
	a.slots = a.slots[:0]
	for i, v := range args {
		slot, err := packOne(k.Params[i], v)
		if err != nil {
			return fmt.Errorf("kernel %s parameter %d: %w", k.Name, i, err)
		}
		a.slots = append(a.slots, slot)
	}
	a.ptrs = a.ptrs[:0]
	for i := range a.slots {
		a.ptrs = append(a.ptrs, unsafe.Pointer(&a.slots[i]))
	}
	return nil
}

// Slot returns parameter i's packed bits.
func (a *Args) Slot(i int) uint64 { return a.slots[i] }

func packOne(kind byte, v any) (uint64, error) {
	var n int64
	switch x := v.(type) {
	case Ptr:
		if kind != 'p' {
			return 0, fmt.Errorf("a device pointer where %c is declared", kind)
		}
		return uint64(x), nil
	case float32:
		if kind != 'f' {
			return 0, fmt.Errorf("a float32 where %c is declared", kind)
		}
		return uint64(math.Float32bits(x)), nil
	case float64:
		if kind != 'f' {
			return 0, fmt.Errorf("a float64 where %c is declared", kind)
		}
		return uint64(math.Float32bits(float32(x))), nil
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint32:
		n = int64(x)
	default:
		return 0, fmt.Errorf("%T is not a kernel parameter", v)
	}
	switch kind {
	case 'i':
		if n < math.MinInt32 || n > math.MaxInt32 {
			return 0, fmt.Errorf("%d does not fit an int32", n)
		}
		return uint64(uint32(int32(n))), nil
	case 'u':
		if n < 0 || n > math.MaxUint32 {
			return 0, fmt.Errorf("%d does not fit a uint32", n)
		}
		return uint64(uint32(n)), nil
	case 'l':
		return uint64(n), nil
	}
	return 0, fmt.Errorf("an integer where %c is declared", kind)
}

// function loads k's module if it has not been, and returns k's handle.
func (dev *Device) function(k *Kernel) (uintptr, error) {
	if f, ok := dev.funcs[k]; ok {
		return f, nil
	}
	mod, ok := dev.modules[k.Module]
	if !ok {
		src, err := ModulePTX(k.Module)
		if err != nil {
			return 0, fmt.Errorf("kernel %s: no module %s: %w", k.Name, k.Module, err)
		}
		src = append(src, 0)
		// JIT options: an error log buffer, so a failed compile says why.
		const errBuf, errBufSize = 5, 6
		log := make([]byte, 8192)
		opts := []uintptr{errBuf, errBufSize}
		vals := []uintptr{uintptr(unsafe.Pointer(&log[0])), uintptr(len(log))}
		r := call(dev.d.cuModuleLoadDataEx, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&src[0])),
			uintptr(len(opts)), uintptr(unsafe.Pointer(&opts[0])), uintptr(unsafe.Pointer(&vals[0])))
		if err := dev.d.check("cuModuleLoadDataEx", r); err != nil {
			return 0, fmt.Errorf("loading module %s: %w: %s", k.Module, err, goString(&log[0]))
		}
		dev.modules[k.Module] = mod
	}
	name := append([]byte(k.Name), 0)
	var f uintptr
	if err := dev.d.check("cuModuleGetFunction", call(dev.d.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&name[0])))); err != nil {
		return 0, fmt.Errorf("kernel %s in module %s: %w", k.Name, k.Module, err)
	}
	dev.funcs[k] = f
	return f, nil
}

// maxDynamicShared is the attribute that lets a kernel take more than
// 48 KiB of dynamic shared memory.
const maxDynamicShared = 8

// Launch launches k on the device's stream with the given grid, block,
// dynamic shared memory and parameters.
func (dev *Device) Launch(k *Kernel, grid, block Dim3, shared int, args ...any) error {
	var a Args
	if err := k.Pack(&a, args...); err != nil {
		return err
	}
	f, err := dev.function(k)
	if err != nil {
		return err
	}
	if shared > 48<<10 {
		if err := dev.d.check("cuFuncSetAttribute", call(dev.d.cuFuncSetAttribute, f, maxDynamicShared, uintptr(shared))); err != nil {
			return fmt.Errorf("kernel %s: %w", k.Name, err)
		}
	}
	if grid.X <= 0 || grid.Y <= 0 || grid.Z <= 0 || block.X <= 0 || block.Y <= 0 || block.Z <= 0 {
		return fmt.Errorf("kernel %s: grid %v and block %v must be positive", k.Name, grid, block)
	}
	dev.pin.Pin(&a.slots[0])
	dev.pin.Pin(&a.ptrs[0])
	defer dev.pin.Unpin()
	r := call(dev.d.cuLaunchKernel, f, uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z), uintptr(shared), dev.stream,
		uintptr(unsafe.Pointer(&a.ptrs[0])), 0)
	if err := dev.d.check("cuLaunchKernel", r); err != nil {
		return fmt.Errorf("kernel %s grid %v block %v: %w", k.Name, grid, block, err)
	}
	return nil
}
