package cuda

// Kernels of kernels/vision.cu (the SigLIP tower's patch embedding and
// pixel shuffle).
var (
	// Im2Col lays pixels [N, C, H, W] out as rows of patches:
	// im2col(cols, px, n, C, H, W, patch), n the values of cols.
	Im2Col = NewKernel("vision", "im2col", "ppliiii")
	// PixelShuffle is Idefics3's pixel shuffle: pixel_shuffle(out, x, n,
	// side, scale, D), n the values of x.
	PixelShuffle = NewKernel("vision", "pixel_shuffle", "ppliii")
)
