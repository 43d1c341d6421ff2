package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
)

// blas is a cuBLAS handle on the device's stream. cuBLAS is loaded at run
// time like the driver, whichever major version the machine has.
type blas struct {
	lib    *library
	handle uintptr

	create, setStream, setMathMode, sgemm, gemmEx uintptr
	statusString                                  func(int32) string
}

// cuBLAS constants (cublas_api.h, library_types.h).
const (
	opN               = 0
	opT               = 1
	pedanticMath      = 2 // CUBLAS_PEDANTIC_MATH: no TF32, no reduced precision
	computeF32        = 68
	dataF32           = 0
	dataF16           = 2
	dataBF16          = 14
	gemmDefaultTensor = 99 // CUBLAS_GEMM_DEFAULT_TENSOR_OP
)

// blasNames are the cuBLAS sonames searched, newest first.
var blasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"}

func (dev *Device) cublas() (*blas, error) {
	if dev.blas != nil {
		return dev.blas, nil
	}
	lib, err := openLibrary("cuBLAS", blasNames)
	if err != nil {
		return nil, err
	}
	b := &blas{lib: lib}
	if err := lib.bind(map[string]*uintptr{
		"cublasCreate_v2": &b.create, "cublasSetStream_v2": &b.setStream,
		"cublasSetMathMode": &b.setMathMode, "cublasSgemm_v2": &b.sgemm, "cublasGemmEx": &b.gemmEx,
	}); err != nil {
		return nil, err
	}
	if p, err := lib.sym("cublasGetStatusString"); err == nil {
		purego.RegisterFunc(&b.statusString, p)
	}
	if err := b.check("cublasCreate", call(b.create, uintptr(unsafe.Pointer(&b.handle)))); err != nil {
		return nil, err
	}
	if err := b.check("cublasSetStream", call(b.setStream, b.handle, dev.stream)); err != nil {
		return nil, err
	}
	if err := b.check("cublasSetMathMode", call(b.setMathMode, b.handle, pedanticMath)); err != nil {
		return nil, err
	}
	dev.blas = b
	return b, nil
}

func (b *blas) check(name string, r int) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: name, Code: r, Name: "CUBLAS_STATUS", String: "cuBLAS error"}
	if b.statusString != nil {
		e.String = b.statusString(int32(r))
	}
	return e
}

// MatMulT computes y[T,N] = x[T,K]·w[N,K]ᵀ in float32 with cuBLAS's
// pedantic math (no TF32), so the products hold exact mode's tolerances.
func (dev *Device) MatMulT(y, x, w Ptr, T, N, K int) error {
	b, err := dev.cublas()
	if err != nil {
		return err
	}
	one, zero := float32(1), float32(0)
	// Row-major y = x·wᵀ is column-major yᵀ = w(ᵀ as stored)·xᵀ.
	r := call(b.sgemm, b.handle, opT, opN, uintptr(N), uintptr(T), uintptr(K),
		uintptr(unsafe.Pointer(&one)), uintptr(w), uintptr(K), uintptr(x), uintptr(K),
		uintptr(unsafe.Pointer(&zero)), uintptr(y), uintptr(N))
	if err := b.check("cublasSgemm", r); err != nil {
		return fmt.Errorf("[%d,%d]·[%d,%d]ᵀ: %w", T, K, N, K, err)
	}
	return nil
}

// HalfType is a 16-bit float storage type of a weight or activation.
type HalfType int

const (
	BF16 HalfType = dataBF16
	F16  HalfType = dataF16
)

// MatMulTHalf computes y[T,N] (float32) = x[T,K]·w[N,K]ᵀ with x and w in
// one 16-bit type and float32 accumulation (cublasGemmEx, tensor cores):
// the fast mode's arithmetic, as PyTorch's BF16 matmul.
func (dev *Device) MatMulTHalf(y, x, w Ptr, T, N, K int, t HalfType) error {
	b, err := dev.cublas()
	if err != nil {
		return err
	}
	one, zero := float32(1), float32(0)
	r := call(b.gemmEx, b.handle, opT, opN, uintptr(N), uintptr(T), uintptr(K),
		uintptr(unsafe.Pointer(&one)), uintptr(w), uintptr(t), uintptr(K), uintptr(x), uintptr(t), uintptr(K),
		uintptr(unsafe.Pointer(&zero)), uintptr(y), dataF32, uintptr(N), computeF32, gemmDefaultTensor)
	if err := b.check("cublasGemmEx", r); err != nil {
		return fmt.Errorf("[%d,%d]·[%d,%d]ᵀ: %w", T, K, N, K, err)
	}
	return nil
}
