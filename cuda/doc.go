// Package cuda runs gozoo's graphs on an NVIDIA GPU: the driver API and
// cuBLAS, loaded at run time, device memory from a caching allocator, one
// stream per device, kernel modules from PTX embedded in the binary, and
// CUDA graphs for replaying a decode step as one launch.
//
// It is not built on gorgonia.org/cu. That package's init calls cuInit
// and panics when it fails, so any binary importing it dies on a machine
// without a GPU; and a cgo-linked cuBLAS pins its soname at build time
// (Debian ships CUDA 11.8's libcublas.so.11, the lent GPU machines CUDA
// 13's). Instead github.com/ebitengine/purego opens libcuda.so.1 and
// whichever cuBLAS the machine has (.so.13, .12, .11, searched in
// $GOZOO_CUDA_LIBS and the usual places), as candle's cudarc does with
// dynamic loading. The build stays pure Go (CGO_ENABLED=0), the same
// binary runs on the CPU anywhere, and asking for the GPU on a machine
// without a driver is an error naming libcuda.so.1.
//
// Kernels are CUDA C in kernels/*.cu, compiled ahead to PTX for
// compute_80 by go generate (gen.sh, nvcc) and checked in; the driver
// compiles the PTX for the card when a module is first used. Every kernel
// is declared in kernels_*.go with its parameters, and ptx_test.go holds
// the declarations to the PTX and assembles it for sm_80 and sm_90 with
// ptxas where the toolkit is installed.
package cuda
