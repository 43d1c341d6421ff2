package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// A Call is one step of an op on the device: a kernel launch, or a
// cuBLAS product when Gemm is set. Ops return their calls instead of
// issuing them, so a host test can check every launch's parameters
// against the kernel's declaration without a GPU.
type Call struct {
	K      *Kernel
	Grid   Dim3
	Block  Dim3
	Shared int // dynamic shared memory, bytes
	Args   []any
	Gemm   *Gemm
	// After, if set, runs on the host once the step's launches have
	// finished (every step, also when the step is a replayed graph): a
	// capture that takes its value down to a sink.
	After func(Downloader) error
}

// Downloader copies device memory to the host.
type Downloader interface {
	Download(dst unsafe.Pointer, src Ptr, n int) error
}

// Gemm is y[T,N] = x[T,K]·w[N,K]ᵀ, float32 out. Half 0 multiplies float32
// x and w with cuBLAS's pedantic math (exact mode); BF16 or F16 takes x and
// w in that type with float32 accumulation.
type Gemm struct {
	Y, X, W Ptr
	T, N, K int
	Half    HalfType
}

// Check packs the call's parameters against its kernel's declaration and
// checks its sizes, as Run would before launching.
func (c Call) Check() error {
	if c.Gemm != nil {
		g := c.Gemm
		if g.T <= 0 || g.N <= 0 || g.K <= 0 || g.Y == 0 || g.X == 0 || g.W == 0 {
			return fmt.Errorf("gemm [%d,%d]·[%d,%d]ᵀ with y %#x x %#x w %#x", g.T, g.K, g.N, g.K, g.Y, g.X, g.W)
		}
		return nil
	}
	if c.K == nil {
		if c.After != nil {
			return nil
		}
		return fmt.Errorf("a call with no kernel, gemm or host step")
	}
	if c.Grid.X <= 0 || c.Grid.Y <= 0 || c.Grid.Z <= 0 || c.Block.X <= 0 || c.Block.Y <= 0 || c.Block.Z <= 0 {
		return fmt.Errorf("kernel %s: grid %v and block %v must be positive", c.K.Name, c.Grid, c.Block)
	}
	if n := c.Block.X * c.Block.Y * c.Block.Z; n > 1024 {
		return fmt.Errorf("kernel %s: block %v has %d threads, more than 1024", c.K.Name, c.Block, n)
	}
	if c.Shared < 0 || c.Shared > 227<<10 {
		return fmt.Errorf("kernel %s: %d bytes of shared memory", c.K.Name, c.Shared)
	}
	var a Args
	return c.K.Pack(&a, c.Args...)
}

// Workspace gives an op scratch device memory that stays at one address
// from step to step (so a captured step can be replayed), one buffer per
// index of the op.
type Workspace interface {
	Scratch(index, bytes int) (Ptr, error)
}

// Run issues calls on the stream, in order; their host steps are left to
// the caller (a step runs them once its launches have finished).
func (dev *Device) Run(calls ...Call) error {
	for _, c := range calls {
		if c.K == nil && c.Gemm == nil {
			continue
		}
		if g := c.Gemm; g != nil {
			var err error
			if g.Half == 0 {
				err = dev.MatMulT(g.Y, g.X, g.W, g.T, g.N, g.K)
			} else {
				err = dev.MatMulTHalf(g.Y, g.X, g.W, g.T, g.N, g.K, g.Half)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := dev.Launch(c.K, c.Grid, c.Block, c.Shared, c.Args...); err != nil {
			return err
		}
	}
	return nil
}

// Block is the block size of the elementwise kernels.
const Block = 256

// CheckInputs checks the number and types of an op's device inputs.
func CheckInputs(in []Tensor, types ...Type) error {
	if len(in) != len(types) {
		return fmt.Errorf("%d device inputs, want %d", len(in), len(types))
	}
	for i, t := range in {
		if t.Type != types[i] {
			return fmt.Errorf("device input %d is %v, want %v", i, t.Type, types[i])
		}
		if t.Ptr == 0 && t.Len() > 0 {
			return fmt.Errorf("device input %d has no memory", i)
		}
	}
	return nil
}

// CheckOutput checks an op's output buffer: float32 of the given shape.
func CheckOutput(out Tensor, shape []int) error {
	if out.Type != F32 || !slices.Equal(out.Shape, shape) {
		return fmt.Errorf("output is %v %v, want f32 %v", out.Type, out.Shape, shape)
	}
	if out.Ptr == 0 && out.Len() > 0 {
		return fmt.Errorf("output has no memory")
	}
	return nil
}

// Map is one launch of an elementwise kernel over n values, Block
// threads a block.
func Map(k *Kernel, n int, args ...any) ([]Call, error) {
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("%d values do not fit an int32 index", n)
	}
	if n == 0 {
		return nil, nil
	}
	return []Call{{K: k, Grid: D1(Blocks(n, Block)), Block: D1(Block), Args: args}}, nil
}
