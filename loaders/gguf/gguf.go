package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/gozoo/gozoo/internal/mmap"
)

// Limits of the format as this reader accepts it.
const (
	// MaxDims is the largest n_dims of a tensor (ggml's GGML_MAX_DIMS).
	MaxDims = 4
	// MaxArrayDepth is how deeply metadata arrays may nest: 1 allows an
	// array of scalars, 2 an array of arrays of scalars, and so on.
	MaxArrayDepth = 4
	// DefaultAlignment is the data alignment when general.alignment is absent.
	DefaultAlignment = 32

	headerBytes = 4 + 4 + 8 + 8 // magic, version, n_tensors, n_kv
	// The smallest a metadata entry can be: key length, value type, a 1-byte value.
	minKVBytes = 8 + 4 + 1
	// The smallest a tensor info can be: name length, n_dims, one dim, type, offset.
	minTensorInfoBytes = 8 + 4 + 8 + 4 + 8
	// Preallocation never exceeds this many entries whatever the header says;
	// slices and maps grow past it as entries are actually read.
	maxPrealloc = 1 << 10
)

// GGUF metadata value types.
const (
	vtU8     = 0
	vtI8     = 1
	vtU16    = 2
	vtI16    = 3
	vtU32    = 4
	vtI32    = 5
	vtF32    = 6
	vtBool   = 7
	vtString = 8
	vtArray  = 9
	vtU64    = 10
	vtI64    = 11
	vtF64    = 12
)

var vtNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

// minValueBytes is the smallest encoding of one value of each type: a
// string is at least its length, an array at least its element type and count.
var minValueBytes = [...]int{1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8}

// ErrNotFound is wrapped by the metadata getters' error for a missing key.
var ErrNotFound = errors.New("metadata key not found")

// FormatError reports a malformed GGUF file: which file, which metadata key
// or tensor, and the byte offset in the file at which the faulty field was
// read.
type FormatError struct {
	File   string
	Key    string // metadata key, when the fault is in a metadata entry
	Tensor string // tensor name, when the fault is in a tensor info
	// Where says what was being read when neither Key nor Tensor is known:
	// "header", "metadata entry 3" (its key unreadable), "tensor info 7".
	Where  string
	Offset int64 // byte offset of the faulty field from the start of the file
	Msg    string
}

// Error formats the error as `file: tensor "name" at byte N: message` (or
// key "name", or Where).
func (e *FormatError) Error() string {
	subject := e.Where
	switch {
	case e.Tensor != "":
		subject = "tensor " + strconv.Quote(e.Tensor)
	case e.Key != "":
		subject = "key " + strconv.Quote(e.Key)
	}
	return fmt.Sprintf("%s: %s at byte %d: %s", e.File, subject, e.Offset, e.Msg)
}

// TensorInfo describes one tensor of a GGUF file.
type TensorInfo struct {
	Name string
	// Dims are in GGUF order: Dims[0] (ggml's ne[0]) is the contiguous axis.
	Dims []uint64
	Type Type
	// Offset is the start of the tensor's data relative to the data section.
	Offset uint64
}

// Shape returns the PyTorch (row-major) shape, Dims reversed: [rows, ne0]
// for a 2-D tensor, [ne2, ne1, ne0] for a 3-D one.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// Elements returns the number of values in the tensor (Open guarantees it
// fits in an int64).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// RowBytes returns the number of bytes one row of ne[0] values takes (0 for
// an unknown type).
func (t TensorInfo) RowBytes() int {
	bs := t.Type.BlockSize()
	if bs == 0 || len(t.Dims) == 0 {
		return 0
	}
	return int(t.Dims[0]/uint64(bs)) * t.Type.BlockBytes()
}

// Bytes returns the size of the tensor's data (0 for an unknown type).
func (t TensorInfo) Bytes() int64 {
	bs := t.Type.BlockSize()
	if bs == 0 {
		return 0
	}
	return t.Elements() / int64(bs) * int64(t.Type.BlockBytes())
}

// File is a parsed GGUF file. Its tensor data stays where Open mapped it (or
// in the slice given to Parse) until Close.
type File struct {
	// Path is the file's path (Open) or the name given to Parse.
	Path string
	// Version is the GGUF version, 3 (or 2, whose layout is the same).
	Version uint32
	// Alignment is general.alignment, or DefaultAlignment when absent.
	Alignment int
	// Metadata maps each key to its value with the GGUF type kept: u8 ->
	// uint8, i8 -> int8, u16 -> uint16, i16 -> int16, u32 -> uint32, i32 ->
	// int32, u64 -> uint64, i64 -> int64, f32 -> float32, f64 -> float64,
	// bool -> bool, string -> string; an array is a typed slice ([]uint8,
	// []int32, []float32, []string, []bool, ...), an array of arrays is an
	// []any whose elements are such slices (or []any again).
	Metadata map[string]any
	// Keys lists the metadata keys in file order.
	Keys []string
	// Tensors lists the tensor infos in file order.
	Tensors []TensorInfo

	data     []byte // the data section
	dataOff  int64  // its offset in the file
	mapping  *Mapping
	index    map[string]int   // tensor name -> index in Tensors
	valueOff map[string]int64 // metadata key -> offset of its value
}

// Open memory-maps path read-only and parses its header, metadata and
// tensor infos. The tensor data is not read: File.Data returns views of the
// mapping, valid until Close.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	size := st.Size()
	if size < 0 || uint64(size) > uint64(math.MaxInt) {
		return nil, fmt.Errorf("%s: file size %d does not fit in memory", path, size)
	}
	data, release, err := mmap.File(fh, size)
	if err != nil {
		return nil, fmt.Errorf("%s: mapping file: %w", path, err)
	}
	f, err := Parse(path, data)
	if err != nil {
		release()
		return nil, err
	}
	f.mapping = &Mapping{data: data, release: release}
	// The header's values are copies: its pages (a tokenizer's vocabulary
	// and merges, megabytes) leave the resident set.
	mmap.Release(data[:f.dataOff])
	return f, nil
}

// Parse parses a GGUF file held in data; name is used as File.Path and in
// errors. Tensor data is used in place: File.Data returns subslices of data.
func Parse(name string, data []byte) (*File, error) {
	p := &parser{file: name, data: data}
	f, err := p.parse()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Holds says whether b lies in the file's mapping (Open; a File made by
// Parse holds no mapping): read-only bytes of the file.
func (f *File) Holds(b []byte) bool { return f.mapping.Holds(b) }

// Close releases the mapping made by Open; the slices returned by Data must
// not be used afterwards. Closing a File made by Parse, or closing twice, is
// a no-op.
func (f *File) Close() error {
	f.data = nil
	return f.mapping.Close()
}

// Mapping is what a model that uses a File's tensors in place keeps of
// it: the file's mapping (Open; nil for a File made by Parse), without the
// metadata, so that a tokenizer's vocabulary and merges (megabytes of
// strings) go with the File once it is dropped. Closing the Mapping or its
// File unmaps it, once.
func (f *File) Mapping() *Mapping { return f.mapping }

// Mapping is a File's read-only file mapping (see File.Mapping).
type Mapping struct {
	data    []byte
	release func() error
	closed  atomic.Bool
}

// Holds says whether b lies in the mapping, still mapped.
func (m *Mapping) Holds(b []byte) bool {
	return m != nil && !m.closed.Load() && mmap.Within(b, m.data)
}

// Close unmaps the file; the tensors' slices must not be used afterwards.
// Closing twice, or a nil Mapping, is a no-op.
func (m *Mapping) Close() error {
	if m == nil || m.closed.Swap(true) {
		return nil
	}
	return m.release()
}

// Tensor returns the info of the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Data returns the bytes of tensor t in place (a read-only view of the
// mapping: writing to it faults), t.Bytes() long. t must come from f; Data
// returns nil for a t that does not fit in f's data section, and after Close.
func (f *File) Data(t TensorInfo) []byte {
	n := t.Bytes()
	if n <= 0 || t.Offset > uint64(len(f.data)) || uint64(n) > uint64(len(f.data))-t.Offset {
		return nil
	}
	end := t.Offset + uint64(n)
	return f.data[t.Offset:end:end]
}

// Has reports whether the metadata has key.
func (f *File) Has(key string) bool {
	_, ok := f.Metadata[key]
	return ok
}

// String returns the string value of key. The error names the key and the
// file; it wraps ErrNotFound when the key is missing.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", f.typeErr(key, v, "a string")
	}
	return s, nil
}

// Uint returns the value of key, which may be of any integer type as long as
// it is not negative. The error names the key and the file; it wraps
// ErrNotFound when the key is missing.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	var s int64
	switch x := v.(type) {
	case uint8:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint32:
		return uint64(x), nil
	case uint64:
		return x, nil
	case int8:
		s = int64(x)
	case int16:
		s = int64(x)
	case int32:
		s = int64(x)
	case int64:
		s = x
	default:
		return 0, f.typeErr(key, v, "an unsigned integer")
	}
	if s < 0 {
		return 0, fmt.Errorf("%s: metadata key %q (value at byte %d) is %d, not an unsigned integer", f.Path, key, f.valueOff[key], s)
	}
	return uint64(s), nil
}

// Float returns the value of key, an f32 (widened exactly), an f64 or an
// integer. The error names the key and the file; it wraps ErrNotFound when
// the key is missing.
func (f *File) Float(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case uint8:
		return float64(x), nil
	case uint16:
		return float64(x), nil
	case uint32:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case int8:
		return float64(x), nil
	case int16:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	}
	return 0, f.typeErr(key, v, "a number")
}

// Bool returns the bool value of key. The error names the key and the file;
// it wraps ErrNotFound when the key is missing.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, f.typeErr(key, v, "a bool")
	}
	return b, nil
}

func (f *File) lookup(key string) (any, error) {
	v, ok := f.Metadata[key]
	if !ok {
		return nil, fmt.Errorf("%s: metadata key %q: %w", f.Path, key, ErrNotFound)
	}
	return v, nil
}

func (f *File) typeErr(key string, v any, want string) error {
	return fmt.Errorf("%s: metadata key %q (value at byte %d) is %s, not %s", f.Path, key, f.valueOff[key], typeName(v), want)
}

// typeName names the GGUF type a Metadata value came from.
func typeName(v any) string {
	switch v.(type) {
	case uint8:
		return "u8"
	case int8:
		return "i8"
	case uint16:
		return "u16"
	case int16:
		return "i16"
	case uint32:
		return "u32"
	case int32:
		return "i32"
	case uint64:
		return "u64"
	case int64:
		return "i64"
	case float32:
		return "f32"
	case float64:
		return "f64"
	case bool:
		return "bool"
	case string:
		return "string"
	case []uint8:
		return "array of u8"
	case []int8:
		return "array of i8"
	case []uint16:
		return "array of u16"
	case []int16:
		return "array of i16"
	case []uint32:
		return "array of u32"
	case []int32:
		return "array of i32"
	case []uint64:
		return "array of u64"
	case []int64:
		return "array of i64"
	case []float32:
		return "array of f32"
	case []float64:
		return "array of f64"
	case []bool:
		return "array of bool"
	case []string:
		return "array of string"
	case []any:
		return "array of arrays"
	}
	return fmt.Sprintf("%T", v)
}

// parser reads one file. pos only moves forward; every read checks the
// bytes left first.
type parser struct {
	file string
	data []byte
	pos  int
	// What is being read, for errors: a metadata key or a tensor name, or,
	// before the name is known, a description such as "tensor info 3".
	key, tensor, where string
}

func (p *parser) errAt(off int, format string, args ...any) error {
	e := &FormatError{File: p.file, Key: p.key, Tensor: p.tensor, Offset: int64(off), Msg: fmt.Sprintf(format, args...)}
	if e.Key == "" && e.Tensor == "" {
		e.Where = p.where
	}
	return e
}

func (p *parser) left() int { return len(p.data) - p.pos }

// need fails unless n more bytes are left.
func (p *parser) need(n int, what string) error {
	if n > p.left() {
		return p.errAt(p.pos, "%s needs %d bytes, the file has %d left (truncated?)", what, n, p.left())
	}
	return nil
}

func (p *parser) u32(what string) (uint32, error) {
	if err := p.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(p.data[p.pos:])
	p.pos += 4
	return v, nil
}

func (p *parser) u64(what string) (uint64, error) {
	if err := p.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(p.data[p.pos:])
	p.pos += 8
	return v, nil
}

// str reads a GGUF string (u64 length, bytes), copying it.
func (p *parser) str(what string) (string, error) {
	off := p.pos
	n, err := p.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(p.left()) {
		return "", p.errAt(off, "%s length %d runs past the end of the file (%d bytes left)", what, n, p.left())
	}
	s := string(p.data[p.pos : p.pos+int(n)])
	p.pos += int(n)
	return s, nil
}

func (p *parser) parse() (*File, error) {
	p.where = "header"
	if len(p.data) < headerBytes {
		return nil, p.errAt(0, "file is %d bytes, shorter than the %d-byte GGUF header", len(p.data), headerBytes)
	}
	if string(p.data[:4]) != "GGUF" {
		return nil, p.errAt(0, "magic is %q, not \"GGUF\": not a GGUF file", p.data[:4])
	}
	p.pos = 4
	version, _ := p.u32("version")
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, p.errAt(4, "GGUF version 1 is not supported (only 2 and 3)")
	case bits.ReverseBytes32(version) == 2 || bits.ReverseBytes32(version) == 3:
		return nil, p.errAt(4, "version field reads %#x: a big-endian GGUF file, not supported", version)
	default:
		return nil, p.errAt(4, "GGUF version %d is not supported (only 2 and 3)", version)
	}
	nTensors, _ := p.u64("tensor count")
	nKV, _ := p.u64("metadata count")
	// Both counts must fit in what is left before anything is sized by them.
	left := uint64(p.left())
	if nTensors > left/minTensorInfoBytes {
		return nil, p.errAt(8, "tensor count %d cannot fit in the %d bytes after the header (each tensor info takes at least %d)", nTensors, left, minTensorInfoBytes)
	}
	if nKV > left/minKVBytes {
		return nil, p.errAt(16, "metadata count %d cannot fit in the %d bytes after the header (each entry takes at least %d)", nKV, left, minKVBytes)
	}
	if nTensors*minTensorInfoBytes+nKV*minKVBytes > left { // no overflow: each term <= left
		return nil, p.errAt(8, "%d tensor infos and %d metadata entries cannot fit in the %d bytes after the header", nTensors, nKV, left)
	}

	f := &File{
		Path:     p.file,
		Version:  version,
		Metadata: make(map[string]any, min(nKV, maxPrealloc)),
		Keys:     make([]string, 0, min(nKV, maxPrealloc)),
		valueOff: make(map[string]int64, min(nKV, maxPrealloc)),
	}
	for i := uint64(0); i < nKV; i++ {
		if err := p.readKV(f, i); err != nil {
			return nil, err
		}
	}
	p.key, p.where = "", "header"

	f.Alignment = DefaultAlignment
	if v, ok := f.Metadata["general.alignment"]; ok {
		p.key = "general.alignment"
		off := int(f.valueOff[p.key])
		a, ok := v.(uint32)
		if !ok {
			return nil, p.errAt(off, "alignment is %s, must be u32", typeName(v))
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, p.errAt(off, "alignment %d is not a power of two", a)
		}
		f.Alignment = int(a)
		p.key = ""
	}

	f.Tensors = make([]TensorInfo, 0, min(nTensors, maxPrealloc))
	f.index = make(map[string]int, min(nTensors, maxPrealloc))
	var infoOff []int // offset of each tensor's offset field
	for i := uint64(0); i < nTensors; i++ {
		t, off, err := p.readTensorInfo(f, i)
		if err != nil {
			return nil, err
		}
		f.index[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		infoOff = append(infoOff, off)
	}
	p.tensor, p.where = "", "header"

	// The data section starts at the next multiple of the alignment.
	start := (uint64(p.pos) + uint64(f.Alignment) - 1) &^ (uint64(f.Alignment) - 1)
	if start > uint64(len(p.data)) {
		if len(f.Tensors) > 0 {
			return nil, p.errAt(p.pos, "the data section would start at byte %d, past the end of the %d-byte file (truncated?)", start, len(p.data))
		}
		start = uint64(len(p.data))
	}
	f.data = p.data[start:]
	f.dataOff = int64(start)
	if err := p.checkLayout(f, infoOff); err != nil {
		return nil, err
	}
	return f, nil
}

// readKV reads metadata entry i.
func (p *parser) readKV(f *File, i uint64) error {
	p.key, p.where = "", "metadata entry "+strconv.FormatUint(i, 10)
	keyOff := p.pos
	key, err := p.str("key")
	if err != nil {
		return err
	}
	p.key = key
	if _, dup := f.Metadata[key]; dup {
		return p.errAt(keyOff, "duplicate metadata key (first value at byte %d)", f.valueOff[key])
	}
	typeOff := p.pos
	vt, err := p.u32("value type")
	if err != nil {
		return err
	}
	if vt >= uint32(len(vtNames)) {
		return p.errAt(typeOff, "unknown value type %d", vt)
	}
	valOff := p.pos
	v, err := p.value(vt, 0)
	if err != nil {
		return err
	}
	f.Metadata[key] = v
	f.Keys = append(f.Keys, key)
	f.valueOff[key] = int64(valOff)
	return nil
}

// value reads one value of type vt; depth counts the arrays it is inside.
func (p *parser) value(vt uint32, depth int) (any, error) {
	if vt == vtString {
		return p.str("string")
	}
	if vt == vtArray {
		return p.array(depth + 1)
	}
	if err := p.need(minValueBytes[vt], vtNames[vt]+" value"); err != nil {
		return nil, err
	}
	b := p.data[p.pos:]
	var v any
	switch vt {
	case vtU8:
		v = b[0]
	case vtI8:
		v = int8(b[0])
	case vtU16:
		v = binary.LittleEndian.Uint16(b)
	case vtI16:
		v = int16(binary.LittleEndian.Uint16(b))
	case vtU32:
		v = binary.LittleEndian.Uint32(b)
	case vtI32:
		v = int32(binary.LittleEndian.Uint32(b))
	case vtF32:
		v = math.Float32frombits(binary.LittleEndian.Uint32(b))
	case vtBool:
		if b[0] > 1 {
			return nil, p.errAt(p.pos, "bool value is %d, not 0 or 1", b[0])
		}
		v = b[0] == 1
	case vtU64:
		v = binary.LittleEndian.Uint64(b)
	case vtI64:
		v = int64(binary.LittleEndian.Uint64(b))
	case vtF64:
		v = math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	p.pos += minValueBytes[vt]
	return v, nil
}

// array reads an array (element type, count, elements) at nesting depth
// depth (1 for an array that is the value itself).
func (p *parser) array(depth int) (any, error) {
	off := p.pos
	if depth > MaxArrayDepth {
		return nil, p.errAt(off, "arrays nested deeper than %d levels", MaxArrayDepth)
	}
	et, err := p.u32("array element type")
	if err != nil {
		return nil, err
	}
	if et >= uint32(len(vtNames)) {
		return nil, p.errAt(off, "unknown array element type %d", et)
	}
	countOff := p.pos
	count, err := p.u64("array length")
	if err != nil {
		return nil, err
	}
	size := minValueBytes[et]
	if count > uint64(p.left()/size) {
		return nil, p.errAt(countOff, "array of %d %s values cannot fit in the %d bytes left (each takes at least %d)", count, vtNames[et], p.left(), size)
	}
	n := int(count)
	le := binary.LittleEndian
	switch et {
	case vtU8:
		return elems(p, n, size, func(b []byte) uint8 { return b[0] }), nil
	case vtI8:
		return elems(p, n, size, func(b []byte) int8 { return int8(b[0]) }), nil
	case vtBool:
		b := p.data[p.pos:]
		for i := range n {
			if b[i] > 1 {
				return nil, p.errAt(p.pos+i, "element %d of a bool array is %d, not 0 or 1", i, b[i])
			}
		}
		return elems(p, n, size, func(b []byte) bool { return b[0] == 1 }), nil
	case vtU16:
		return elems(p, n, size, le.Uint16), nil
	case vtI16:
		return elems(p, n, size, func(b []byte) int16 { return int16(le.Uint16(b)) }), nil
	case vtU32:
		return elems(p, n, size, le.Uint32), nil
	case vtI32:
		return elems(p, n, size, func(b []byte) int32 { return int32(le.Uint32(b)) }), nil
	case vtF32:
		return elems(p, n, size, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) }), nil
	case vtU64:
		return elems(p, n, size, le.Uint64), nil
	case vtI64:
		return elems(p, n, size, func(b []byte) int64 { return int64(le.Uint64(b)) }), nil
	case vtF64:
		return elems(p, n, size, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }), nil
	case vtString:
		s := make([]string, n)
		for i := range s {
			off := p.pos
			l, err := p.u64("string length")
			if err != nil {
				return nil, err
			}
			if l > uint64(p.left()) {
				return nil, p.errAt(off, "element %d of a string array: length %d runs past the end of the file (%d bytes left)", i, l, p.left())
			}
			s[i] = string(p.data[p.pos : p.pos+int(l)])
			p.pos += int(l)
		}
		return s, nil
	default: // vtArray
		s := make([]any, n)
		for i := range s {
			v, err := p.array(depth + 1)
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	}
}

// elems reads n fixed-size array elements of size bytes each, decoding
// each with dec; array has checked that they fit in the bytes left.
func elems[T any](p *parser, n, size int, dec func([]byte) T) []T {
	s := make([]T, n)
	b := p.data[p.pos:]
	for i := range s {
		s[i] = dec(b[size*i:])
	}
	p.pos += size * n
	return s
}

// readTensorInfo reads tensor info i and checks everything about it that
// does not depend on the data section. It returns the offset of its offset
// field, for later errors.
func (p *parser) readTensorInfo(f *File, i uint64) (TensorInfo, int, error) {
	var t TensorInfo
	p.tensor, p.where = "", "tensor info "+strconv.FormatUint(i, 10)
	nameOff := p.pos
	name, err := p.str("name")
	if err != nil {
		return t, 0, err
	}
	p.tensor = name
	if name == "" {
		p.where += " (empty name)"
	}
	if j, dup := f.index[name]; dup {
		return t, 0, p.errAt(nameOff, "duplicate tensor name (tensor info %d has it too)", j)
	}
	t.Name = name
	ndOff := p.pos
	nd, err := p.u32("n_dims")
	if err != nil {
		return t, 0, err
	}
	if nd == 0 || nd > MaxDims {
		return t, 0, p.errAt(ndOff, "n_dims is %d, must be 1 to %d", nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	elems := uint64(1)
	dim0Off := p.pos
	for j := range t.Dims {
		off := p.pos
		d, err := p.u64("ne[" + strconv.Itoa(j) + "]")
		if err != nil {
			return t, 0, err
		}
		if d == 0 {
			return t, 0, p.errAt(off, "ne[%d] is 0", j)
		}
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 || lo > math.MaxInt64 {
			return t, 0, p.errAt(off, "ne[%d] = %d makes the element count overflow int64 (dims so far %v)", j, d, t.Dims[:j])
		}
		elems = lo
		t.Dims[j] = d
	}
	typeOff := p.pos
	ty, err := p.u32("ggml type")
	if err != nil {
		return t, 0, err
	}
	t.Type = Type(ty)
	bs, bb := t.Type.BlockSize(), t.Type.BlockBytes()
	if bs == 0 {
		return t, 0, p.errAt(typeOff, "unknown ggml type %d (supported: %s)", ty, SupportedTypes())
	}
	if t.Dims[0]%uint64(bs) != 0 {
		return t, 0, p.errAt(dim0Off, "ne[0] = %d is not a multiple of %s's block size %d", t.Dims[0], t.Type, bs)
	}
	hi, size := bits.Mul64(elems/uint64(bs), uint64(bb))
	if hi != 0 || size > math.MaxInt64 {
		return t, 0, p.errAt(typeOff, "%d values of %s take more than 2^63 bytes", elems, t.Type)
	}
	offOff := p.pos
	t.Offset, err = p.u64("data offset")
	if err != nil {
		return t, 0, err
	}
	if t.Offset%uint64(f.Alignment) != 0 {
		return t, 0, p.errAt(offOff, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
	}
	return t, offOff, nil
}

// checkLayout checks that every tensor's data lies inside the data section
// and that no two tensors overlap.
func (p *parser) checkLayout(f *File, infoOff []int) error {
	dataLen := uint64(len(f.data))
	for i, t := range f.Tensors {
		n := uint64(t.Bytes())
		if t.Offset > dataLen || n > dataLen-t.Offset {
			p.tensor = t.Name
			return p.errAt(infoOff[i], "%d bytes of data at offset %d (relative to the data section at byte %d) run past the end of the file (the data section has %d bytes)",
				n, t.Offset, f.dataOff, dataLen)
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		oa, ob := f.Tensors[a].Offset, f.Tensors[b].Offset
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(order); k++ {
		prev, cur := f.Tensors[order[k-1]], f.Tensors[order[k]]
		prevEnd := prev.Offset + uint64(prev.Bytes())
		if cur.Offset < prevEnd {
			p.tensor = cur.Name
			return p.errAt(infoOff[order[k]], "data [%d, %d) overlaps tensor %q at [%d, %d)",
				cur.Offset, cur.Offset+uint64(cur.Bytes()), prev.Name, prev.Offset, prevEnd)
		}
	}
	return nil
}
