package cuda

// Kernels of kernels/basic.cu.
var (
	// Copy32 copies n float32 values: copy32(dst, src, n).
	Copy32 = NewKernel("basic", "copy32", "ppi")
)
