package cuda

import (
	"fmt"
	"unsafe"
)

// driver holds the CUDA driver API functions gozoo calls. The _v2 names
// are the ones the driver's headers map the plain names to.
type driver struct {
	lib *library

	cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString uintptr
	cuDeviceGet, cuDeviceGetCount, cuDeviceGetName               uintptr
	cuDeviceGetAttribute, cuDeviceTotalMem                       uintptr
	cuDevicePrimaryCtxRetain, cuCtxSetCurrent, cuCtxSynchronize  uintptr
	cuMemAlloc, cuMemFree, cuMemGetInfo                          uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync      uintptr
	cuMemsetD8Async                                              uintptr
	cuModuleLoadDataEx, cuModuleGetFunction, cuFuncSetAttribute  uintptr
	cuLaunchKernel                                               uintptr
	cuStreamCreate, cuStreamSynchronize, cuStreamDestroy         uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize             uintptr
	cuEventElapsedTime, cuEventDestroy                           uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate uintptr
	cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy            uintptr
	cuMemHostRegister, cuMemHostUnregister                       uintptr
}

func loadDriver() (*driver, error) {
	lib, err := openLibrary("the CUDA driver", []string{"libcuda.so.1", "libcuda.so"})
	if err != nil {
		return nil, err
	}
	d := &driver{lib: lib}
	err = lib.bind(map[string]*uintptr{
		"cuInit": &d.cuInit, "cuDriverGetVersion": &d.cuDriverGetVersion,
		"cuGetErrorName": &d.cuGetErrorName, "cuGetErrorString": &d.cuGetErrorString,
		"cuDeviceGet": &d.cuDeviceGet, "cuDeviceGetCount": &d.cuDeviceGetCount,
		"cuDeviceGetName": &d.cuDeviceGetName, "cuDeviceGetAttribute": &d.cuDeviceGetAttribute,
		"cuDeviceTotalMem_v2":      &d.cuDeviceTotalMem,
		"cuDevicePrimaryCtxRetain": &d.cuDevicePrimaryCtxRetain,
		"cuCtxSetCurrent":          &d.cuCtxSetCurrent, "cuCtxSynchronize": &d.cuCtxSynchronize,
		"cuMemAlloc_v2": &d.cuMemAlloc, "cuMemFree_v2": &d.cuMemFree, "cuMemGetInfo_v2": &d.cuMemGetInfo,
		"cuMemcpyHtoDAsync_v2": &d.cuMemcpyHtoDAsync, "cuMemcpyDtoHAsync_v2": &d.cuMemcpyDtoHAsync,
		"cuMemcpyDtoDAsync_v2": &d.cuMemcpyDtoDAsync, "cuMemsetD8Async": &d.cuMemsetD8Async,
		"cuModuleLoadDataEx": &d.cuModuleLoadDataEx, "cuModuleGetFunction": &d.cuModuleGetFunction,
		"cuFuncSetAttribute": &d.cuFuncSetAttribute, "cuLaunchKernel": &d.cuLaunchKernel,
		"cuStreamCreate": &d.cuStreamCreate, "cuStreamSynchronize": &d.cuStreamSynchronize,
		"cuStreamDestroy_v2": &d.cuStreamDestroy,
		"cuEventCreate":      &d.cuEventCreate, "cuEventRecord": &d.cuEventRecord,
		"cuEventSynchronize": &d.cuEventSynchronize, "cuEventElapsedTime": &d.cuEventElapsedTime,
		"cuEventDestroy_v2":       &d.cuEventDestroy,
		"cuStreamBeginCapture_v2": &d.cuStreamBeginCapture, "cuStreamEndCapture": &d.cuStreamEndCapture,
		"cuGraphInstantiateWithFlags": &d.cuGraphInstantiate, "cuGraphLaunch": &d.cuGraphLaunch,
		"cuGraphExecDestroy": &d.cuGraphExecDestroy, "cuGraphDestroy": &d.cuGraphDestroy,
		"cuMemHostRegister_v2": &d.cuMemHostRegister, "cuMemHostUnregister": &d.cuMemHostUnregister,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, ErrNoDriver)
	}
	if err := d.check("cuInit", call(d.cuInit, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w (%w)", lib.name, err, ErrNoDriver)
	}
	return d, nil
}

// Error is a failed driver or cuBLAS call: the call's name, the status
// code and its name and description from the library.
type Error struct {
	Call   string
	Code   int
	Name   string
	String string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.String)
}

// check turns a CUresult into an error naming the call.
func (d *driver) check(callName string, r int) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: callName, Code: r, Name: "CUDA_ERROR", String: "unknown error"}
	var s *byte
	if call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&s))) == 0 && s != nil {
		e.Name = goString(s)
	}
	s = nil
	if call(d.cuGetErrorString, uintptr(r), uintptr(unsafe.Pointer(&s))) == 0 && s != nil {
		e.String = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	n := 0
	for n < 4096 && *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}
