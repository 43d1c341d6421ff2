package cuda

import "strings"

// Kernels of kernels/basic.cu: elementwise maps, norms, RoPE and row
// moves. Elementwise kernels take one thread a value (grid Blocks(n,
// 256)); the norms one block a row.
var (
	// Copy32 copies n float32 values: copy32(dst, src, n).
	Copy32 = NewKernel("basic", "copy32", "ppi")

	// Act maps n values by an activation: act(out, x, n, kind), kind one
	// of the Act* codes.
	Act = NewKernel("basic", "act", "ppii")
	// GatedAct is act(g)·u: gated_act(out, g, u, n, kind).
	GatedAct = NewKernel("basic", "gated_act", "pppii")
	// ScaleF32 is x·p: scale_f32(out, x, n, p).
	ScaleF32 = NewKernel("basic", "scale_f32", "ppif")
	// Softcap is c·tanh(x/c) in float64: softcap(out, x, n, c).
	Softcap = NewKernel("basic", "softcap", "ppif")
	// AddF32 is a+b: add_f32(out, a, b, n).
	AddF32 = NewKernel("basic", "add_f32", "pppi")

	// RMSNorm normalises rows by their root mean square, one block a row:
	// rms_norm(out, x, w, rows, d, eps, offset).
	RMSNorm = NewKernel("basic", "rms_norm", "pppiiff")
	// LayerNorm normalises rows by mean and variance, one block a row;
	// eps is a float64's bits: layer_norm(out, x, w, b, rows, d, eps).
	LayerNorm = NewKernel("basic", "layer_norm", "ppppiil")

	// RoPE rotates x [T, H, 2·half] in the NeoX form, grid (T,
	// Blocks(H·half, block)): rope(out, x, pos, H, half, scale, f0,
	// ..., f127), scale the factor on cos and sin (0: none), the inverse
	// frequencies as RoPEMaxHalf float parameters (unused ones 0).
	RoPE = NewKernel("basic", "rope", "pppiif"+strings.Repeat("f", RoPEMaxHalf))

	// HeadRange copies heads [from, from+count) of x [T, H, Dh]:
	// head_range(out, x, n, H, Dh, from, count), n = T·count·Dh.
	HeadRange = NewKernel("basic", "head_range", "ppiiiii")
	// HeadRows reorders groups of hd values between llama.cpp's and HF's
	// order of Q and K rows: head_rows(out, x, n, hd, inverse).
	HeadRows = NewKernel("basic", "head_rows", "ppiii")
	// PickRows gathers rows of h [T, D], zeros for an index outside
	// [0, T): pick_rows(out, h, rows, R, T, D).
	PickRows = NewKernel("basic", "pick_rows", "pppiii")
	// ReplaceRows takes row t from e where mask[t] != 0, else from h:
	// replace_rows(out, h, e, mask, n, D).
	ReplaceRows = NewKernel("basic", "replace_rows", "ppppii")
)

// RoPEMaxHalf is the most inverse frequencies the rope kernel takes: a
// head dimension of up to 256.
const RoPEMaxHalf = 128

// The activation codes of Act and GatedAct.
const (
	ActSiLU          = 0 // silu
	ActGELUTanh      = 1 // gelu_pytorch_tanh, gelu_new
	ActGELUTanhTable = 2 // the tanh GELU from llama.cpp's F16 table
	ActGELUErf       = 3 // gelu
	ActReLU          = 4 // relu
)
