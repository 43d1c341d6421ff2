package loaders

import "unsafe"

// littleEndian is true on the machines Go mostly runs on; the views below
// need it, since safetensors data is little-endian.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Float32View reinterprets little-endian F32 bytes as []float32 without a
// copy when they are 4-byte aligned (safetensors pads its header to 8
// bytes, so tensors usually are); ok is false otherwise. The view shares
// the bytes' memory: a read-only mapping stays read-only.
func Float32View(b []byte) (v []float32, ok bool) {
	if !littleEndian || len(b)%4 != 0 || uintptrOf(b)%4 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return []float32{}, true
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4), true
}

// Uint16View is Float32View for 16-bit storage (BF16, F16).
func Uint16View(b []byte) (v []uint16, ok bool) {
	if !littleEndian || len(b)%2 != 0 || uintptrOf(b)%2 != 0 {
		return nil, false
	}
	if len(b) == 0 {
		return []uint16{}, true
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2), true
}
