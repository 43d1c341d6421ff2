// Package cuda will hold gozoo's CUDA VM: the same model graphs run on
// Gorgonia's CUDA machine (build tag cuda, gorgonia.org/cu v0.9.6).
//
// Nothing lives here yet. What is known (../shared/notes/gorgonia-probe.md):
// stock Gorgonia v0.9.18 does not build with -tags cuda without cuDNN, its
// PTX kernels must be generated with nvcc, a cu-linked binary exits at start
// when no GPU is present (so the CUDA build is a separate binary), and only
// elementwise ops and GEMM run on the GPU; softmax, reductions, slicing and
// the zoo's custom ops (RMSNorm, RoPE, KV write, attention) need CUDA
// kernels of their own.
package cuda
