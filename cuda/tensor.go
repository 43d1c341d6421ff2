package cuda

import "fmt"

// Type is the element type of a tensor in device memory.
type Type uint8

const (
	F32   Type = iota
	I32        // token ids, positions, row indices: Go ints go up as int32
	U16        // BF16 or F16 storage; the op knows which
	Bytes      // quantized blocks
)

// Size is the bytes of one element.
func (t Type) Size() int {
	switch t {
	case F32, I32:
		return 4
	case U16:
		return 2
	}
	return 1
}

func (t Type) String() string {
	switch t {
	case F32:
		return "f32"
	case I32:
		return "i32"
	case U16:
		return "u16"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Tensor is a dense row-major tensor in device memory. A weight's shape
// is its stored shape: a quantized row's width is its bytes.
type Tensor struct {
	Ptr   Ptr
	Shape []int
	Type  Type
}

// Len is the number of elements.
func (t Tensor) Len() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the tensor's size in bytes.
func (t Tensor) Bytes() int { return t.Len() * t.Type.Size() }
