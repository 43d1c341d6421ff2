package gguf

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestWriteRoundTrip writes every value type and a few tensors and reads
// them back.
func TestWriteRoundTrip(t *testing.T) {
	meta := []KV{
		{"general.architecture", "llama"}, {"u8", uint8(7)}, {"i8", int8(-3)}, {"u16", uint16(500)}, {"i16", int16(-500)},
		{"u32", uint32(70000)}, {"i32", int32(-70000)}, {"f32", float32(1.5)}, {"bool", true}, {"u64", uint64(1 << 40)},
		{"i64", int64(-1 << 40)}, {"f64", 2.25}, {"tokens", []string{"a", "b c"}}, {"types", []int32{1, 3}}, {"flags", []bool{true, false}},
	}
	q8 := make([]byte, 2*34) // two Q8_0 blocks: a [2, 32] tensor
	q8[2] = 5
	tensors := []WriteTensor{
		{Name: "a", Dims: []uint64{3}, Type: TypeF32, Data: make([]byte, 12)},
		{Name: "b", Dims: []uint64{32, 2}, Type: TypeQ8_0, Data: q8},
	}
	var buf bytes.Buffer
	if err := Write(&buf, meta, tensors); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("written.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for i, kv := range meta {
		if f.Keys[i] != kv.Key || !reflect.DeepEqual(f.Metadata[kv.Key], kv.Value) {
			t.Errorf("%s: read back %#v (key %s), wrote %#v", kv.Key, f.Metadata[kv.Key], f.Keys[i], kv.Value)
		}
	}
	b, ok := f.Tensor("b")
	if !ok || b.Type != TypeQ8_0 || !reflect.DeepEqual(b.Shape(), []int{2, 32}) || !bytes.Equal(f.Data(b), q8) {
		t.Errorf("tensor b: %+v", b)
	}
	bad := []WriteTensor{{Name: "c", Dims: []uint64{33}, Type: TypeQ8_0, Data: make([]byte, 34)}}
	if err := Write(&buf, nil, bad); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("a row that is not whole blocks: %v", err)
	}
}
