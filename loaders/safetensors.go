package loaders

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/nlpodyssey/safetensors"
	"github.com/x448/float16"
)

// SafetensorsFile is one opened .safetensors file. The header is parsed and
// validated by github.com/nlpodyssey/safetensors; the data stays in a
// read-only memory mapping until a tensor is read.
type SafetensorsFile struct {
	Path    string
	st      safetensors.SafeTensors
	mapping []byte
	release func() error
}

// OpenSafetensors maps and validates a safetensors file. Truncated files,
// header lengths past the end of the file, offsets out of range or
// overlapping, and unknown dtypes are errors that name the file and, where
// there is one, the tensor.
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: truncated: %d bytes, a safetensors file starts with an 8-byte header length", path, size)
	}
	mapping, release, err := mapFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: mapping file: %w", path, err)
	}
	n := binary.LittleEndian.Uint64(mapping[:8])
	if n > uint64(size-8) {
		release()
		return nil, fmt.Errorf("%s: header length %d runs past the end of the file (%d bytes): truncated or not a safetensors file", path, n, size)
	}
	st, err := safetensors.Deserialize(mapping)
	if err != nil {
		// The library's message does not always name the tensor at fault;
		// look for it ourselves so the user knows where to look.
		if why := diagnoseHeader(mapping[8:8+n], uint64(size)-8-n); why != "" {
			err = errors.New(why)
		}
		release()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &SafetensorsFile{Path: path, st: st, mapping: mapping, release: release}, nil
}

// diagnoseHeader re-reads a header the library refused and returns a message
// naming the first tensor whose offsets are wrong, or "" if it finds none.
func diagnoseHeader(header []byte, dataLen uint64) string {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return "header is not valid JSON: " + err.Error()
	}
	type entry struct {
		name  string
		dtype string
		shape []uint64
		off   [2]uint64
	}
	var es []entry
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var info struct {
			DType   string    `json:"dtype"`
			Shape   []uint64  `json:"shape"`
			Offsets [2]uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &info); err != nil {
			return fmt.Sprintf("tensor %q: malformed header entry: %v", name, err)
		}
		if _, err := safetensors.ParseDType(info.DType); err != nil {
			return fmt.Sprintf("tensor %q: unknown dtype %q", name, info.DType)
		}
		es = append(es, entry{name, info.DType, info.Shape, info.Offsets})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].off[0] < es[j].off[0] })
	var end uint64
	for i, e := range es {
		if e.off[1] < e.off[0] {
			return fmt.Sprintf("tensor %q: data_offsets [%d, %d] end before they begin", e.name, e.off[0], e.off[1])
		}
		if e.off[1] > dataLen {
			return fmt.Sprintf("tensor %q: data_offsets [%d, %d] run past the end of the data section (%d bytes): file truncated?", e.name, e.off[0], e.off[1], dataLen)
		}
		if i > 0 && e.off[0] < end {
			return fmt.Sprintf("tensors %q and %q overlap (data_offsets %d < %d)", es[i-1].name, e.name, e.off[0], end)
		}
		if e.off[0] > end {
			return fmt.Sprintf("tensor %q: data_offsets start at %d, leaving a gap after byte %d", e.name, e.off[0], end)
		}
		dt, _ := safetensors.ParseDType(e.dtype)
		want := dt.Size()
		for _, d := range e.shape {
			if d != 0 && want > math.MaxUint64/d {
				return fmt.Sprintf("tensor %q: shape %v overflows", e.name, e.shape)
			}
			want *= d
		}
		if got := e.off[1] - e.off[0]; got != want {
			return fmt.Sprintf("tensor %q: shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d", e.name, e.shape, e.dtype, want, e.off[0], e.off[1], got)
		}
		end = e.off[1]
	}
	if end != dataLen {
		return fmt.Sprintf("data section is %d bytes but the tensors end at byte %d", dataLen, end)
	}
	return ""
}

// Close unmaps the file. Tensors already read stay valid.
func (f *SafetensorsFile) Close() error {
	if f.release == nil {
		return nil
	}
	err := f.release()
	f.release, f.mapping = nil, nil
	return err
}

// Names lists the tensors in the file.
func (f *SafetensorsFile) Names() []string { return f.st.Names() }

// Has reports whether the file holds a tensor called name.
func (f *SafetensorsFile) Has(name string) bool {
	_, ok := f.st.Tensor(name)
	return ok
}

// Info returns a tensor's dtype and shape.
func (f *SafetensorsFile) Info(name string) (dtype string, shape []int, err error) {
	tv, ok := f.st.Tensor(name)
	if !ok {
		return "", nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	return tv.DType().String(), toInts(tv.Shape()), nil
}

func toInts(s []uint64) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

// Raw returns a tensor's dtype, shape and bytes, which stay inside the
// file's memory mapping: valid until Close, and read-only.
func (f *SafetensorsFile) Raw(name string) (dtype string, shape []int, data []byte, err error) {
	if f.mapping == nil && f.release == nil {
		return "", nil, nil, fmt.Errorf("%s: file is closed", f.Path)
	}
	tv, ok := f.st.Tensor(name)
	if !ok {
		return "", nil, nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	return tv.DType().String(), toInts(tv.Shape()), tv.Data(), nil
}

// ReadFloat32 converts a tensor to float32 into dst, which must have exactly
// as many elements as the tensor.
func (f *SafetensorsFile) ReadFloat32(name string, dst []float32) error {
	dtype, shape, data, err := f.Raw(name)
	if err != nil {
		return err
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(dst) {
		return fmt.Errorf("%s: tensor %q has %d elements, destination %d", f.Path, name, n, len(dst))
	}
	switch dtype {
	case "F32":
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
	case "BF16":
		// BF16 is the upper half of an IEEE float32.
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16)
		}
	case "F16":
		for i := range dst {
			dst[i] = float16.Frombits(binary.LittleEndian.Uint16(data[2*i:])).Float32()
		}
	default:
		return fmt.Errorf("%s: tensor %q has dtype %s; only F32, BF16 and F16 weights are supported", f.Path, name, dtype)
	}
	return nil
}

// ReadInt64 reads an I64 (or I32) tensor, as golden files store token ids.
func (f *SafetensorsFile) ReadInt64(name string) ([]int64, []int, error) {
	tv, ok := f.st.Tensor(name)
	if !ok {
		return nil, nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	data := tv.Data()
	var out []int64
	switch tv.DType() {
	case safetensors.I64:
		out = make([]int64, len(data)/8)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case safetensors.I32:
		out = make([]int64, len(data)/4)
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
	default:
		return nil, nil, fmt.Errorf("%s: tensor %q has dtype %s, want I64 or I32", f.Path, name, tv.DType())
	}
	return out, toInts(tv.Shape()), nil
}

// Float32s reads a whole tensor as float32 with its shape.
func (f *SafetensorsFile) Float32s(name string) ([]float32, []int, error) {
	_, shape, err := f.Info(name)
	if err != nil {
		return nil, nil, err
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]float32, n)
	if err := f.ReadFloat32(name, out); err != nil {
		return nil, nil, err
	}
	return out, shape, nil
}
