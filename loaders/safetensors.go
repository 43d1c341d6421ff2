package loaders

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"sort"

	"github.com/gozoo/gozoo/internal/mmap"
	"github.com/nlpodyssey/safetensors"
	"github.com/x448/float16"
)

// MaxSafetensorsHeader is the largest header a safetensors file may have,
// in bytes: the format's own cap (100 MB), which the reference
// implementation also enforces.
const MaxSafetensorsHeader = 100_000_000

// MaxSafetensorsRank is the most dimensions a tensor's shape may have
// (numpy's limit); a longer shape is refused as a malformed header.
const MaxSafetensorsRank = 64

// SafetensorsFile is one opened .safetensors file. The header is parsed
// and validated as a whole when the file is opened (see OpenSafetensors);
// the data stays in a read-only memory mapping until a tensor is read.
type SafetensorsFile struct {
	Path    string
	tensors []stTensor     // in data order
	index   map[string]int // name -> position in tensors
	data    []byte         // the data section, after the header
	mapping []byte
	release func() error
	closed  bool
}

// stTensor is one header entry, checked: data[begin:end] holds exactly
// dtype.Size() times the product of shape bytes.
type stTensor struct {
	name       string
	dtype      safetensors.DType
	shape      []int
	begin, end uint64 // offsets in the data section
}

// OpenSafetensors maps and validates a safetensors file. The header must
// be at most MaxSafetensorsHeader bytes of one JSON object; every tensor
// must have a known dtype, a shape of at most MaxSafetensorsRank
// dimensions and data_offsets that lie inside the data section, match
// its dtype times its shape, and, taken in order, cover the data section
// exactly, without overlap or gap. Every size is computed with overflow
// checks. Errors name the file and, where there is one, the tensor and
// its offsets (in the data section and in the file).
func OpenSafetensors(path string) (*SafetensorsFile, error) {
	// Stat before opening: opening a named pipe blocks until a writer
	// comes.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkRegular(path, fi); err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < 8 {
		return nil, fmt.Errorf("%s: truncated: %d bytes, a safetensors file starts with an 8-byte header length", path, size)
	}
	mapping, release, err := mmap.File(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: mapping file: %w", path, err)
	}
	sf, err := parseSafetensors(path, mapping)
	if err != nil {
		release()
		return nil, err
	}
	sf.mapping, sf.release = mapping, release
	return sf, nil
}

// parseSafetensors validates the whole file b and indexes its tensors,
// whose data stay in b.
func parseSafetensors(path string, b []byte) (*SafetensorsFile, error) {
	size := uint64(len(b))
	if size < 8 {
		return nil, fmt.Errorf("%s: truncated: %d bytes, a safetensors file starts with an 8-byte header length", path, size)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > size-8 {
		return nil, fmt.Errorf("%s: header length %d runs past the end of the file (%d bytes): truncated or not a safetensors file", path, n, size)
	}
	if n > MaxSafetensorsHeader {
		return nil, fmt.Errorf("%s: header length %d is over the safetensors format's cap of %d bytes", path, n, MaxSafetensorsHeader)
	}
	tensors, err := parseHeader(b[8 : 8+n])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data := b[8+n:]
	if err := checkLayout(tensors, uint64(len(data)), 8+n); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	index := make(map[string]int, len(tensors))
	for i, t := range tensors {
		index[t.name] = i
	}
	return &SafetensorsFile{Path: path, tensors: tensors, index: index, data: data}, nil
}

// parseHeader decodes the header's JSON object one entry at a time, so
// that what it allocates stays proportional to the header. The tensors
// come back sorted by their data offsets.
func parseHeader(header []byte) ([]stTensor, error) {
	if len(bytes.TrimLeft(header, " \t\r\n")) == 0 || bytes.TrimLeft(header, " \t\r\n")[0] != '{' {
		return nil, errors.New("header is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("header is not valid JSON at header byte %d (file offset %d): %v", se.Offset, 8+se.Offset, err)
		}
		return fmt.Errorf("header is not valid JSON at header byte %d (file offset %d): %v", dec.InputOffset(), 8+dec.InputOffset(), err)
	}
	if _, err := dec.Token(); err != nil { // the '{' checked above
		return nil, syntax(err)
	}
	var tensors []stTensor
	seen := map[string]bool{}
	metadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, syntax(fmt.Errorf("object key %v is not a string", tok))
		}
		if name == "__metadata__" {
			if metadata {
				return nil, errors.New(`header has two "__metadata__" entries`)
			}
			metadata = true
			var md map[string]string
			if err := dec.Decode(&md); err != nil {
				if _, ok := err.(*json.UnmarshalTypeError); ok {
					return nil, fmt.Errorf(`"__metadata__" must map strings to strings: %v`, err)
				}
				return nil, syntax(err)
			}
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("tensor %q appears twice in the header", name)
		}
		seen[name] = true
		var entry map[string]json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			if _, ok := err.(*json.UnmarshalTypeError); ok {
				return nil, fmt.Errorf("tensor %q: header entry is not an object of dtype, shape and data_offsets", name)
			}
			return nil, fmt.Errorf("tensor %q: %w", name, syntax(err))
		}
		t, err := parseEntry(name, entry)
		if err != nil {
			return nil, err
		}
		tensors = append(tensors, t)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, syntax(err)
	}
	if rest := bytes.TrimLeft(header[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		at := int64(len(header) - len(rest))
		return nil, fmt.Errorf("header has bytes after its JSON object, at header byte %d (file offset %d); only space padding may follow it", at, 8+at)
	}
	sort.SliceStable(tensors, func(i, j int) bool {
		a, b := tensors[i], tensors[j]
		return a.begin < b.begin || a.begin == b.begin && a.end < b.end
	})
	return tensors, nil
}

// parseEntry decodes one tensor's {"dtype", "shape", "data_offsets"}.
func parseEntry(name string, entry map[string]json.RawMessage) (stTensor, error) {
	t := stTensor{name: name}
	for k := range entry {
		switch k {
		case "dtype", "shape", "data_offsets":
		default:
			return t, fmt.Errorf("tensor %q: unexpected key %q in its header entry (want dtype, shape and data_offsets)", name, k)
		}
	}
	for _, k := range []string{"dtype", "shape", "data_offsets"} {
		if _, ok := entry[k]; !ok {
			return t, fmt.Errorf("tensor %q: header entry has no %q", name, k)
		}
	}
	var dtype string
	if err := json.Unmarshal(entry["dtype"], &dtype); err != nil {
		return t, fmt.Errorf("tensor %q: dtype %s is not a string", name, entry["dtype"])
	}
	dt, err := safetensors.ParseDType(dtype)
	if err != nil {
		return t, fmt.Errorf("tensor %q: unknown dtype %q", name, dtype)
	}
	t.dtype = dt
	shape, err := uintList(entry["shape"], MaxSafetensorsRank)
	if err != nil {
		return t, fmt.Errorf("tensor %q: shape: %v", name, err)
	}
	t.shape = make([]int, len(shape))
	for i, d := range shape {
		if d > math.MaxInt {
			return t, fmt.Errorf("tensor %q: dimension %d of shape %v is out of range", name, i, shape)
		}
		t.shape[i] = int(d)
	}
	off, err := uintList(entry["data_offsets"], 2)
	if err != nil || len(off) != 2 {
		return t, fmt.Errorf("tensor %q: data_offsets %s is not a list of two offsets", name, entry["data_offsets"])
	}
	t.begin, t.end = off[0], off[1]
	return t, nil
}

// uintList decodes a JSON list of at most max non-negative integers,
// counting its elements before allocating them.
func uintList(raw json.RawMessage, max int) ([]uint64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return nil, fmt.Errorf("%.40s is not a list", raw)
	}
	if n := bytes.Count(raw, []byte(",")) + 1; n > max {
		return nil, fmt.Errorf("list of %d entries, more than %d", n, max)
	}
	var out []uint64
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("%.40s is not a list of non-negative integers", raw)
	}
	return out, nil
}

// checkLayout checks the tensors (sorted by offset) against a data
// section of dataLen bytes, which starts at file offset start.
func checkLayout(tensors []stTensor, dataLen, start uint64) error {
	var end uint64
	var prev *stTensor
	for i := range tensors {
		t := &tensors[i]
		if t.end < t.begin {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] end before they begin", t.name, t.begin, t.end)
		}
		if t.end > dataLen {
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the end of the data section (%d bytes, file offsets %d to %d): file truncated?", t.name, t.begin, t.end, dataLen, start, start+dataLen)
		}
		want, ok := tensorBytes(t.dtype, t.shape)
		if !ok {
			return fmt.Errorf("tensor %q: shape %v of %s overflows 64 bits", t.name, t.shape, t.dtype)
		}
		if got := t.end - t.begin; got != want {
			return fmt.Errorf("tensor %q: shape %v of %s needs %d bytes but data_offsets [%d, %d] span %d", t.name, t.shape, t.dtype, want, t.begin, t.end, got)
		}
		if t.begin < end {
			return fmt.Errorf("tensors %q (data_offsets [%d, %d]) and %q (data_offsets [%d, %d]) overlap at data offset %d (file offset %d)",
				prev.name, prev.begin, prev.end, t.name, t.begin, t.end, t.begin, start+t.begin)
		}
		if t.begin > end {
			return fmt.Errorf("tensor %q: data_offsets start at %d, leaving data bytes [%d, %d) (file offset %d) to no tensor", t.name, t.begin, end, t.begin, start+end)
		}
		end, prev = t.end, t
	}
	if end != dataLen {
		return fmt.Errorf("data section is %d bytes but the tensors end at data offset %d: %d trailing bytes from file offset %d", dataLen, end, dataLen-end, start+end)
	}
	return nil
}

// tensorBytes is the size of a tensor's data, false on overflow.
func tensorBytes(dt safetensors.DType, shape []int) (uint64, bool) {
	n := dt.Size()
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// Holds says whether b lies in the file's mapping: read-only bytes of
// the file.
func (f *SafetensorsFile) Holds(b []byte) bool { return mmap.Within(b, f.mapping) }

// Close unmaps the file. Tensors already read stay valid.
func (f *SafetensorsFile) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var err error
	if f.release != nil {
		err = f.release()
	}
	f.release, f.mapping, f.data = nil, nil, nil
	return err
}

// Names lists the tensors in the file, in the order of their data.
func (f *SafetensorsFile) Names() []string {
	out := make([]string, len(f.tensors))
	for i, t := range f.tensors {
		out[i] = t.name
	}
	return out
}

// Has reports whether the file holds a tensor called name.
func (f *SafetensorsFile) Has(name string) bool {
	_, ok := f.index[name]
	return ok
}

// DataBytes is the size of the file's data section: all its tensors.
func (f *SafetensorsFile) DataBytes() int64 {
	if len(f.tensors) == 0 {
		return 0
	}
	return int64(f.tensors[len(f.tensors)-1].end)
}

func (f *SafetensorsFile) tensor(name string) (*stTensor, error) {
	i, ok := f.index[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	return &f.tensors[i], nil
}

// Info returns a tensor's dtype and shape.
func (f *SafetensorsFile) Info(name string) (dtype string, shape []int, err error) {
	t, err := f.tensor(name)
	if err != nil {
		return "", nil, err
	}
	return t.dtype.String(), append([]int(nil), t.shape...), nil
}

// Raw returns a tensor's dtype, shape and bytes, which stay inside the
// file's memory mapping: valid until Close, and read-only.
func (f *SafetensorsFile) Raw(name string) (dtype string, shape []int, data []byte, err error) {
	if f.closed {
		return "", nil, nil, fmt.Errorf("%s: file is closed", f.Path)
	}
	t, err := f.tensor(name)
	if err != nil {
		return "", nil, nil, err
	}
	return t.dtype.String(), append([]int(nil), t.shape...), f.data[t.begin:t.end:t.end], nil
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
	dtype, shape, data, err := f.Raw(name)
	if err != nil {
		return nil, nil, err
	}
	var out []int64
	switch dtype {
	case "I64":
		out = make([]int64, len(data)/8)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(data[8*i:]))
		}
	case "I32":
		out = make([]int64, len(data)/4)
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		}
	default:
		return nil, nil, fmt.Errorf("%s: tensor %q has dtype %s, want I64 or I32", f.Path, name, dtype)
	}
	return out, shape, nil
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
