package gguf

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const craftedName = "crafted.gguf"

// hostileCase is one malformed file and the error it must produce: where
// (Offset, Key, Tensor) and a fragment of the message.
type hostileCase struct {
	name string
	// build writes the file and returns the byte offset the error must name.
	build  func(w *builder) int
	key    string
	tensor string
	where  string // FormatError.Where when key and tensor are empty; "" means "header"
	want   string
}

// tensorsOnly writes a header for n tensors and no metadata.
func tensorsOnly(w *builder, n uint64) *builder { return w.header(3, n, 0) }

var hostileCases = []hostileCase{
	// Header.
	{name: "empty file", build: func(w *builder) int { return 0 }, want: "shorter than the 24-byte GGUF header"},
	{name: "short header", build: func(w *builder) int { w.text("GGUF").u32(3).u64(0); return 0 }, want: "shorter than"},
	{name: "wrong magic", build: func(w *builder) int { w.text("GGML").u32(3).u64(0).u64(0); return 0 }, want: `magic is "GGML"`},
	{name: "zero magic", build: func(w *builder) int { w.zeros(24); return 0 }, want: "not a GGUF file"},
	{name: "version 1", build: func(w *builder) int { w.header(1, 0, 0); return 4 }, want: "version 1 is not supported"},
	{name: "version 0", build: func(w *builder) int { w.header(0, 0, 0); return 4 }, want: "version 0 is not supported"},
	{name: "version 4", build: func(w *builder) int { w.header(4, 0, 0); return 4 }, want: "version 4 is not supported"},
	{name: "big-endian version", build: func(w *builder) int { w.header(0x03000000, 0, 0); return 4 }, want: "big-endian"},
	{name: "tensor count huge", build: func(w *builder) int { w.header(3, 1<<62, 0); return 8 }, want: "tensor count 4611686018427387904 cannot fit"},
	{name: "tensor count max", build: func(w *builder) int { w.header(3, math.MaxUint64, 0).zeros(100); return 8 }, want: "tensor count"},
	{name: "tensor count one too many", build: func(w *builder) int { w.header(3, 2, 0).zeros(63); return 8 }, want: "tensor count 2 cannot fit in the 63 bytes"},
	{name: "kv count huge", build: func(w *builder) int { w.header(3, 0, 1<<63).zeros(13); return 16 }, want: "metadata count 9223372036854775808 cannot fit"},
	{name: "kv count one too many", build: func(w *builder) int { w.header(3, 0, 2).zeros(25); return 16 }, want: "metadata count 2 cannot fit in the 25 bytes"},
	{name: "counts together too many", build: func(w *builder) int { w.header(3, 1, 2).zeros(57); return 8 }, want: "1 tensor infos and 2 metadata entries cannot fit in the 57 bytes"},

	// Metadata.
	{name: "key length past the end", build: func(w *builder) int { w.header(3, 0, 1).u64(1 << 40).zeros(5); return 24 }, where: "metadata entry 0", want: "key length 1099511627776 runs past the end"},
	{name: "key length max", build: func(w *builder) int { w.header(3, 0, 1).u64(math.MaxUint64).zeros(5); return 24 }, where: "metadata entry 0", want: "key length 18446744073709551615 runs past the end"},
	{name: "second key length past the end", build: func(w *builder) int {
		w.header(3, 0, 2).kvU32("a", 1)
		off := w.pos()
		w.u64(1 << 20).zeros(5)
		return off
	}, where: "metadata entry 1", want: "key length"},
	{name: "string value length past the end", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtString)
		off := w.pos()
		w.u64(1000).text("abc")
		return off
	}, key: "k", want: "string length 1000 runs past the end of the file (3 bytes left)"},
	{name: "unknown value type", build: func(w *builder) int {
		w.header(3, 0, 1).str("k")
		off := w.pos()
		w.u32(13).u32(0)
		return off
	}, key: "k", want: "unknown value type 13"},
	{name: "value type max", build: func(w *builder) int {
		w.header(3, 0, 1).str("k")
		off := w.pos()
		w.u32(math.MaxUint32).u32(0)
		return off
	}, key: "k", want: "unknown value type 4294967295"},
	{name: "truncated u64 value", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtU64)
		off := w.pos()
		w.u8(7)
		return off
	}, key: "k", want: "u64 value needs 8 bytes, the file has 1 left"},
	{name: "bool value 2", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtBool)
		off := w.pos()
		w.u8(2)
		return off
	}, key: "k", want: "bool value is 2"},
	{name: "array length past the end", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtArray).u32(vtU32)
		off := w.pos()
		w.u64(1 << 40).u32(1).u32(2)
		return off
	}, key: "k", want: "array of 1099511627776 u32 values cannot fit in the 8 bytes left"},
	{name: "array length times size overflows", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtArray).u32(vtF64)
		off := w.pos()
		w.u64(1 << 61).f64(1)
		return off
	}, key: "k", want: "array of 2305843009213693952 f64 values"},
	{name: "string array longer than the file", build: func(w *builder) int {
		w.header(3, 0, 1).str("tokens").u32(vtArray).u32(vtString)
		off := w.pos()
		w.u64(3).str("a").str("b")
		return off
	}, key: "tokens", want: "array of 3 string values cannot fit"},
	{name: "string array element past the end", build: func(w *builder) int {
		w.header(3, 0, 1).str("tokens").u32(vtArray).u32(vtString).u64(2).str("ok")
		off := w.pos()
		w.u64(1 << 30).zeros(8)
		return off
	}, key: "tokens", want: "element 1 of a string array: length 1073741824 runs past the end"},
	{name: "unknown array element type", build: func(w *builder) int {
		w.header(3, 0, 1).str("k").u32(vtArray)
		off := w.pos()
		w.u32(13).u64(0)
		return off
	}, key: "k", want: "unknown array element type 13"},
	{name: "bool array element 7", build: func(w *builder) int {
		w.header(3, 0, 1).str("flags").u32(vtArray).u32(vtBool).u64(3).u8(1).u8(0)
		off := w.pos()
		w.u8(7)
		return off
	}, key: "flags", want: "element 2 of a bool array is 7"},
	{name: "arrays nested too deep", build: func(w *builder) int {
		w.header(3, 0, 1).str("deep").u32(vtArray)
		for range MaxArrayDepth {
			w.u32(vtArray).u64(1)
		}
		off := w.pos()
		w.u32(vtU8).u64(1).u8(1)
		return off
	}, key: "deep", want: "arrays nested deeper than 4 levels"},
	{name: "nested array length past the end", build: func(w *builder) int {
		w.header(3, 0, 1).str("nest").u32(vtArray).u32(vtArray).u64(2).u32(vtU8).u64(1).u8(9).u32(vtU16)
		off := w.pos()
		w.u64(100).u16(1)
		return off
	}, key: "nest", want: "array of 100 u16 values cannot fit"},
	{name: "duplicate key", build: func(w *builder) int {
		w.header(3, 0, 2).kvU32("general.x", 1)
		off := w.pos()
		w.kvU32("general.x", 2)
		return off
	}, key: "general.x", want: "duplicate metadata key (first value at byte 45)"},
	{name: "alignment 0", build: func(w *builder) int {
		w.header(3, 0, 1).str("general.alignment").u32(vtU32)
		off := w.pos()
		w.u32(0)
		return off
	}, key: "general.alignment", want: "alignment 0 is not a power of two"},
	{name: "alignment 48", build: func(w *builder) int {
		w.header(3, 0, 2).kvStr("general.name", "x").str("general.alignment").u32(vtU32)
		off := w.pos()
		w.u32(48)
		return off
	}, key: "general.alignment", want: "alignment 48 is not a power of two"},
	{name: "alignment i32", build: func(w *builder) int {
		w.header(3, 0, 1).str("general.alignment").u32(vtI32)
		off := w.pos()
		w.u32(32)
		return off
	}, key: "general.alignment", want: "alignment is i32, must be u32"},

	// Tensor infos.
	{name: "tensor name length past the end", build: func(w *builder) int {
		tensorsOnly(w, 1).u64(1 << 50).zeros(24)
		return 24
	}, where: "tensor info 0", want: "name length 1125899906842624 runs past the end"},
	{name: "n_dims 0", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t")
		off := w.pos()
		w.u32(0).u64(1).u32(0).u64(0)
		return off
	}, tensor: "t", want: "n_dims is 0, must be 1 to 4"},
	{name: "n_dims 5", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t")
		off := w.pos()
		w.u32(5).zeros(60)
		return off
	}, tensor: "t", want: "n_dims is 5"},
	{name: "n_dims huge", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t")
		off := w.pos()
		w.u32(math.MaxUint32).zeros(60)
		return off
	}, tensor: "t", want: "n_dims is 4294967295"},
	{name: "dim 0", build: func(w *builder) int {
		tensorsOnly(w, 1).str("blk.0.w").u32(2).u64(4)
		off := w.pos()
		w.u64(0).u32(0).u64(0)
		return off
	}, tensor: "blk.0.w", want: "ne[1] is 0"},
	{name: "dims past the end", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(4).u64(1).u64(1)
		off := w.pos()
		w.zeros(7)
		return off
	}, tensor: "t", want: "ne[2] needs 8 bytes, the file has 7 left"},
	{name: "dims overflow uint64", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(2).u64(1 << 32)
		off := w.pos()
		w.u64(1 << 32).u32(0).u64(0)
		return off
	}, tensor: "t", want: "ne[1] = 4294967296 makes the element count overflow int64"},
	{name: "dims overflow int64", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(2).u64(1 << 31)
		off := w.pos()
		w.u64(1 << 32).u32(0).u64(0)
		return off
	}, tensor: "t", want: "overflow int64"},
	{name: "four dims overflow", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(4).u64(1 << 16).u64(1 << 16).u64(1 << 16)
		off := w.pos()
		w.u64(1 << 16).u32(0).u64(0)
		return off
	}, tensor: "t", want: "ne[3] = 65536 makes the element count overflow"},
	{name: "removed ggml type 4", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(1).u64(32)
		off := w.pos()
		w.u32(4).u64(0)
		return off
	}, tensor: "w", want: "unknown ggml type 4"},
	{name: "unknown ggml type 99", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(1).u64(32)
		off := w.pos()
		w.u32(99).u64(0)
		return off
	}, tensor: "w", want: "unknown ggml type 99"},
	{name: "unknown ggml type max", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(1).u64(32)
		off := w.pos()
		w.u32(math.MaxUint32).u64(0)
		return off
	}, tensor: "w", want: "unknown ggml type 4294967295"},
	{name: "ne0 not a multiple of the Q4_0 block", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(2)
		off := w.pos()
		w.u64(48).u64(2).u32(uint32(TypeQ4_0)).u64(0)
		return off
	}, tensor: "w", want: "ne[0] = 48 is not a multiple of Q4_0's block size 32"},
	{name: "ne0 not a multiple of the Q4_K block", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(2)
		off := w.pos()
		w.u64(96).u64(2).u32(uint32(TypeQ4_K)).u64(0)
		return off
	}, tensor: "w", want: "ne[0] = 96 is not a multiple of Q4_K's block size 256"},
	{name: "ne0 not a multiple of the IQ4_XS block", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(2)
		off := w.pos()
		w.u64(320).u64(2).u32(uint32(TypeIQ4_XS)).u64(0)
		return off
	}, tensor: "w", want: "ne[0] = 320 is not a multiple of IQ4_XS's block size 256"},
	{name: "unknown type lists the supported ones", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(1).u64(256)
		off := w.pos()
		w.u32(16).u64(0) // IQ2_XXS
		return off
	}, tensor: "w", want: "unknown ggml type 16 (supported: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16)"},
	{name: "Q3_K blocks of the shape past the data", build: func(w *builder) int {
		// [3, 256] is 3 blocks of 110 bytes; the file holds 2.
		tensorsOnly(w, 1).str("q").u32(2).u64(256).u64(3).u32(uint32(TypeQ3_K))
		off := w.pos()
		w.u64(0).pad(32).zeros(220)
		return off
	}, tensor: "q", want: "330 bytes of data at offset 0 (relative to the data section at byte 96) run past the end of the file (the data section has 220 bytes)"},
	{name: "Q4_1 row count past the data", build: func(w *builder) int {
		// [5, 64]: 10 blocks of 20 bytes; the file holds 199 bytes.
		tensorsOnly(w, 1).str("q").u32(2).u64(64).u64(5).u32(uint32(TypeQ4_1))
		off := w.pos()
		w.u64(0).pad(32).zeros(199)
		return off
	}, tensor: "q", want: "200 bytes of data at offset 0"},
	{name: "byte count overflows", build: func(w *builder) int {
		tensorsOnly(w, 1).str("w").u32(1).u64(1 << 62)
		off := w.pos()
		w.u32(uint32(TypeF32)).u64(0)
		return off
	}, tensor: "w", want: "4611686018427387904 values of F32 take more than 2^63 bytes"},
	{name: "truncated tensor info", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(1).u64(8).u32(0)
		off := w.pos()
		w.zeros(7)
		return off
	}, tensor: "t", want: "data offset needs 8 bytes"},
	{name: "offset not aligned", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(4).pad(32).zeros(64)
		return off
	}, tensor: "t", want: "data offset 4 is not a multiple of the alignment 32"},
	{name: "offset not aligned to a custom alignment", build: func(w *builder) int {
		w.header(3, 1, 1).kvU32("general.alignment", 64).str("t").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(32).pad(64).zeros(128)
		return off
	}, tensor: "t", want: "data offset 32 is not a multiple of the alignment 64"},
	{name: "offset outside the file", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(1 << 40).pad(32).zeros(32)
		return off
	}, tensor: "t", want: "32 bytes of data at offset 1099511627776 (relative to the data section at byte 64) run past the end of the file (the data section has 32 bytes)"},
	{name: "offset near the uint64 limit", build: func(w *builder) int {
		tensorsOnly(w, 1).str("t").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(math.MaxUint64 &^ 31).pad(32).zeros(32)
		return off
	}, tensor: "t", want: "run past the end of the file"},
	{name: "data past the end", build: func(w *builder) int {
		tensorsOnly(w, 2).tensor("a", []uint64{8}, TypeF32, 0).str("b").u32(1).u64(16).u32(0)
		off := w.pos()
		w.u64(32).pad(32).zeros(32 + 63)
		return off
	}, tensor: "b", want: "64 bytes of data at offset 32 (relative to the data section at byte 96) run past the end of the file (the data section has 95 bytes)"},
	{name: "data section starts past the end", build: func(w *builder) int {
		tensorsOnly(w, 1).tensor("t", []uint64{1}, TypeF32, 0)
		return w.pos()
	}, want: "the data section would start at byte 64, past the end of the 57-byte file"},
	{name: "overlapping tensors", build: func(w *builder) int {
		tensorsOnly(w, 2).tensor("a", []uint64{16}, TypeF32, 0).str("b").u32(1).u64(16).u32(0)
		off := w.pos()
		w.u64(32).pad(32).zeros(96)
		return off
	}, tensor: "b", want: `data [32, 96) overlaps tensor "a" at [0, 64)`},
	{name: "overlapping tensors listed backwards", build: func(w *builder) int {
		tensorsOnly(w, 2).str("late").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(32).tensor("early", []uint64{16}, TypeF32, 0).pad(32).zeros(96)
		return off
	}, tensor: "late", want: `data [32, 64) overlaps tensor "early" at [0, 64)`},
	{name: "tensors at the same offset", build: func(w *builder) int {
		tensorsOnly(w, 2).tensor("a", []uint64{8}, TypeF32, 0).str("b").u32(1).u64(8).u32(0)
		off := w.pos()
		w.u64(0).pad(32).zeros(64)
		return off
	}, tensor: "b", want: `overlaps tensor "a"`},
	{name: "duplicate tensor name", build: func(w *builder) int {
		tensorsOnly(w, 2).tensor("w", []uint64{8}, TypeF32, 0)
		off := w.pos()
		w.tensor("w", []uint64{8}, TypeF32, 32).pad(32).zeros(64)
		return off
	}, tensor: "w", want: "duplicate tensor name (tensor info 0 has it too)"},
}

func TestHostileInputs(t *testing.T) {
	for _, tc := range hostileCases {
		t.Run(tc.name, func(t *testing.T) {
			var w builder
			wantOff := tc.build(&w)
			f, err := Parse(craftedName, w.bytes())
			if err == nil {
				t.Fatalf("Parse accepted the file (%d tensors, keys %v)", len(f.Tensors), f.Keys)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			msg := err.Error()
			t.Log(msg)
			if fe.File != craftedName || !strings.HasPrefix(msg, craftedName+": ") {
				t.Errorf("error does not name the file: %q", msg)
			}
			if fe.Offset != int64(wantOff) || !strings.Contains(msg, "at byte "+strconv.Itoa(wantOff)+":") {
				t.Errorf("offset %d, want %d: %q", fe.Offset, wantOff, msg)
			}
			if fe.Key != tc.key || fe.Tensor != tc.tensor {
				t.Errorf("key %q tensor %q, want key %q tensor %q: %q", fe.Key, fe.Tensor, tc.key, tc.tensor, msg)
			}
			where := tc.where
			if where == "" && tc.key == "" && tc.tensor == "" {
				where = "header"
			}
			if fe.Where != where || !strings.Contains(msg, where) {
				t.Errorf("where %q, want %q: %q", fe.Where, where, msg)
			}
			if tc.key != "" && !strings.Contains(msg, strconv.Quote(tc.key)) {
				t.Errorf("message does not name the key: %q", msg)
			}
			if tc.tensor != "" && !strings.Contains(msg, strconv.Quote(tc.tensor)) {
				t.Errorf("message does not name the tensor: %q", msg)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("message %q does not contain %q", msg, tc.want)
			}
		})
	}
}

// TestTruncations cuts a valid file at every length: each prefix is either
// refused with a *FormatError naming the file or (only the full file) accepted.
func TestTruncations(t *testing.T) {
	full := fullFile()
	for n := 0; n < len(full); n++ {
		_, err := Parse(craftedName, full[:n])
		var fe *FormatError
		if !errors.As(err, &fe) || fe.File != craftedName || fe.Offset < 0 || fe.Offset > int64(n) {
			t.Fatalf("prefix of %d bytes: error %v", n, err)
		}
	}
	if _, err := Parse(craftedName, full); err != nil {
		t.Fatal(err)
	}
}

// fullFile is a valid GGUF v3 file with every metadata type, nested arrays,
// a custom alignment and one tensor of each supported type plus Q5_0.
func fullFile() []byte {
	var w builder
	tensors := fullTensors()
	w.header(3, uint64(len(tensors)), 20)
	w.str("general.architecture").u32(vtString).str("test")
	w.str("u8").u32(vtU8).u8(200)
	w.str("i8").u32(vtI8).u8(0x80)
	w.str("u16").u32(vtU16).u16(65535)
	w.str("i16").u32(vtI16).u16(0xfffe)
	w.str("u32").u32(vtU32).u32(4000000000)
	w.str("i32").u32(vtI32).u32(math.MaxUint32)
	w.str("f32").u32(vtF32).f32(1e-6)
	w.str("bool").u32(vtBool).u8(1)
	w.str("u64").u32(vtU64).u64(1 << 63)
	w.str("i64").u32(vtI64).u64(math.MaxUint64)
	w.str("f64").u32(vtF64).f64(-2.5)
	w.str("general.alignment").u32(vtU32).u32(64)
	w.str("tokens").u32(vtArray).u32(vtString).u64(3).str("a").str("").str("<|ü|>")
	w.str("types").u32(vtArray).u32(vtI32).u64(2).u32(1).u32(math.MaxUint32)
	w.str("flags").u32(vtArray).u32(vtBool).u64(2).u8(1).u8(0)
	w.str("floats").u32(vtArray).u32(vtF32).u64(1).f32(0.5)
	w.str("empty").u32(vtArray).u32(vtU64).u64(0)
	// [[1, 2], [[]], []] as u8, nested u16, f64.
	w.str("nested").u32(vtArray).u32(vtArray).u64(3)
	w.u32(vtU8).u64(2).u8(1).u8(2)
	w.u32(vtArray).u64(1).u32(vtU16).u64(0)
	w.u32(vtF64).u64(0)
	w.str("u8s").u32(vtArray).u32(vtU8).u64(3).raw(1, 2, 3)
	for _, t := range tensors {
		w.tensor(t.Name, t.Dims, t.Type, t.Offset)
	}
	w.pad(64)
	end := uint64(0)
	for _, t := range tensors {
		end = max(end, t.Offset+uint64(t.Bytes()))
	}
	for i := range end {
		w.u8(uint8(i * 7))
	}
	return w.bytes()
}

func fullTensors() []TensorInfo {
	specs := []TensorInfo{
		{Name: "f32", Dims: []uint64{3, 2}, Type: TypeF32},
		{Name: "f16", Dims: []uint64{4}, Type: TypeF16},
		{Name: "bf16", Dims: []uint64{2, 1, 2}, Type: TypeBF16},
		{Name: "q8_0", Dims: []uint64{32, 2}, Type: TypeQ8_0},
		{Name: "q4_0", Dims: []uint64{64}, Type: TypeQ4_0},
		{Name: "q4_k", Dims: []uint64{256, 1, 1, 2}, Type: TypeQ4_K},
		{Name: "q6_k", Dims: []uint64{256}, Type: TypeQ6_K},
		{Name: "q5_0", Dims: []uint64{32}, Type: TypeQ5_0},
	}
	off := uint64(0)
	for i := range specs {
		specs[i].Offset = off
		off += uint64(specs[i].Bytes()+63) &^ 63
	}
	return specs
}

func TestParseFull(t *testing.T) {
	data := fullFile()
	f, err := Parse(craftedName, data)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != craftedName || f.Version != 3 || f.Alignment != 64 {
		t.Errorf("path %q version %d alignment %d", f.Path, f.Version, f.Alignment)
	}
	want := map[string]any{
		"general.architecture": "test",
		"u8":                   uint8(200),
		"i8":                   int8(-128),
		"u16":                  uint16(65535),
		"i16":                  int16(-2),
		"u32":                  uint32(4000000000),
		"i32":                  int32(-1),
		"f32":                  float32(1e-6),
		"bool":                 true,
		"u64":                  uint64(1 << 63),
		"i64":                  int64(-1),
		"f64":                  float64(-2.5),
		"general.alignment":    uint32(64),
		"tokens":               []string{"a", "", "<|ü|>"},
		"types":                []int32{1, -1},
		"flags":                []bool{true, false},
		"floats":               []float32{0.5},
		"empty":                []uint64{},
		"nested":               []any{[]uint8{1, 2}, []any{[]uint16{}}, []float64{}},
		"u8s":                  []uint8{1, 2, 3},
	}
	if !reflect.DeepEqual(f.Metadata, want) {
		for k, v := range want {
			if got := f.Metadata[k]; !reflect.DeepEqual(got, v) {
				t.Errorf("%s = %#v, want %#v", k, got, v)
			}
		}
		t.Fatalf("metadata differs: %#v", f.Metadata)
	}
	wantKeys := []string{"general.architecture", "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "u64", "i64", "f64",
		"general.alignment", "tokens", "types", "flags", "floats", "empty", "nested", "u8s"}
	if !slices.Equal(f.Keys, wantKeys) {
		t.Errorf("keys %v", f.Keys)
	}
	if !reflect.DeepEqual(f.Tensors, fullTensors()) {
		t.Errorf("tensors %+v", f.Tensors)
	}
	// The data section starts at the first multiple of 64 after the infos;
	// every tensor's data is a view of the input.
	dataStart := len(data) - len(f.data)
	if dataStart%64 != 0 {
		t.Errorf("data section at byte %d, not 64-aligned", dataStart)
	}
	for _, ti := range f.Tensors {
		d := f.Data(ti)
		if int64(len(d)) != ti.Bytes() || cap(d) != len(d) {
			t.Errorf("%s: len %d cap %d, want %d", ti.Name, len(d), cap(d), ti.Bytes())
		}
		if &d[0] != &data[dataStart+int(ti.Offset)] {
			t.Errorf("%s: data is not in place", ti.Name)
		}
		got, ok := f.Tensor(ti.Name)
		if !ok || !reflect.DeepEqual(got, ti) {
			t.Errorf("Tensor(%q) = %+v, %v", ti.Name, got, ok)
		}
	}
	if _, ok := f.Tensor("missing"); ok {
		t.Error("Tensor found a missing name")
	}
	if d := f.Data(TensorInfo{Name: "bogus", Dims: []uint64{1 << 20}, Type: TypeF32}); d != nil {
		t.Errorf("Data of a tensor outside the file: %d bytes", len(d))
	}
	if err := f.Close(); err != nil || f.Close() != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestTensorInfoShapes(t *testing.T) {
	for _, tc := range []struct {
		ti       TensorInfo
		shape    []int
		elements int64
		rowBytes int
		bytes    int64
	}{
		{TensorInfo{Dims: []uint64{576, 49152}, Type: TypeQ8_0}, []int{49152, 576}, 576 * 49152, 18 * 34, 49152 * 18 * 34},
		{TensorInfo{Dims: []uint64{96}, Type: TypeF32}, []int{96}, 96, 384, 384},
		{TensorInfo{Dims: []uint64{256, 512, 8}, Type: TypeQ4_K}, []int{8, 512, 256}, 256 * 512 * 8, 144, 144 * 512 * 8},
		{TensorInfo{Dims: []uint64{512, 3, 2, 1}, Type: TypeQ6_K}, []int{1, 2, 3, 512}, 3072, 420, 2520},
		{TensorInfo{Dims: []uint64{64, 2}, Type: TypeQ4_0}, []int{2, 64}, 128, 36, 72},
		{TensorInfo{Dims: []uint64{5, 2}, Type: TypeF16}, []int{2, 5}, 10, 10, 20},
		{TensorInfo{Dims: []uint64{5, 2}, Type: TypeBF16}, []int{2, 5}, 10, 10, 20},
		{TensorInfo{Dims: []uint64{32}, Type: Type(99)}, []int{32}, 32, 0, 0},
	} {
		ti := tc.ti
		if !slices.Equal(ti.Shape(), tc.shape) || ti.Elements() != tc.elements || ti.RowBytes() != tc.rowBytes || ti.Bytes() != tc.bytes {
			t.Errorf("%v %s: shape %v elements %d row %d bytes %d", ti.Dims, ti.Type, ti.Shape(), ti.Elements(), ti.RowBytes(), ti.Bytes())
		}
	}
}

func TestTypes(t *testing.T) {
	for _, tc := range []struct {
		t           Type
		id          uint32
		name        string
		bs, bb      int
		isSupported bool
	}{
		{TypeF32, 0, "F32", 1, 4, true},
		{TypeF16, 1, "F16", 1, 2, true},
		{TypeQ4_0, 2, "Q4_0", 32, 18, true},
		{TypeQ4_1, 3, "Q4_1", 32, 20, true},
		{TypeQ5_0, 6, "Q5_0", 32, 22, true},
		{TypeQ5_1, 7, "Q5_1", 32, 24, true},
		{TypeQ8_0, 8, "Q8_0", 32, 34, true},
		{TypeQ8_1, 9, "Q8_1", 32, 36, false},
		{TypeQ2_K, 10, "Q2_K", 256, 84, true},
		{TypeQ3_K, 11, "Q3_K", 256, 110, true},
		{TypeQ4_K, 12, "Q4_K", 256, 144, true},
		{TypeQ5_K, 13, "Q5_K", 256, 176, true},
		{TypeQ6_K, 14, "Q6_K", 256, 210, true},
		{TypeQ8_K, 15, "Q8_K", 256, 292, false},
		{TypeIQ4_NL, 20, "IQ4_NL", 32, 18, true},
		{TypeIQ4_XS, 23, "IQ4_XS", 256, 136, true},
		{Type(16), 16, "Type(16)", 0, 0, false}, // IQ2_XXS: not handled
		{TypeBF16, 30, "BF16", 1, 2, true},
		{Type(4), 4, "Type(4)", 0, 0, false},
		{Type(31), 31, "Type(31)", 0, 0, false},
		{Type(math.MaxUint32), math.MaxUint32, "Type(4294967295)", 0, 0, false},
	} {
		if uint32(tc.t) != tc.id || tc.t.String() != tc.name || tc.t.BlockSize() != tc.bs || tc.t.BlockBytes() != tc.bb || tc.t.Supported() != tc.isSupported {
			t.Errorf("type %d: %s %d %d %v", tc.id, tc.t, tc.t.BlockSize(), tc.t.BlockBytes(), tc.t.Supported())
		}
	}
}

func TestVersion2(t *testing.T) {
	var w builder
	w.header(2, 1, 1).kvStr("general.name", "v2").tensor("t", []uint64{4}, TypeF32, 0).pad(32).zeros(16)
	f, err := Parse(craftedName, w.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Alignment != 32 || len(f.Tensors) != 1 || len(f.Data(f.Tensors[0])) != 16 {
		t.Errorf("%+v", f)
	}
}

func TestEmptyFile(t *testing.T) {
	// Header only: no metadata, no tensors, no data section.
	var w builder
	f, err := Parse(craftedName, w.header(3, 0, 0).bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Metadata) != 0 || len(f.Keys) != 0 || len(f.Tensors) != 0 || f.Alignment != 32 {
		t.Errorf("%+v", f)
	}
}

func TestNestingAtTheLimit(t *testing.T) {
	var w builder
	w.header(3, 0, 1).str("deep").u32(vtArray)
	for range MaxArrayDepth - 1 {
		w.u32(vtArray).u64(1)
	}
	w.u32(vtI16).u64(2).u16(1).u16(0xffff)
	f, err := Parse(craftedName, w.bytes())
	if err != nil {
		t.Fatal(err)
	}
	want := any([]int16{1, -1})
	for range MaxArrayDepth - 1 {
		want = []any{want}
	}
	if !reflect.DeepEqual(f.Metadata["deep"], want) {
		t.Errorf("deep = %#v", f.Metadata["deep"])
	}
}

func TestGetters(t *testing.T) {
	f, err := Parse(craftedName, fullFile())
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.String("general.architecture"); s != "test" || err != nil {
		t.Errorf("String = %q, %v", s, err)
	}
	for key, want := range map[string]uint64{"u8": 200, "u16": 65535, "u32": 4000000000, "u64": 1 << 63, "general.alignment": 64} {
		if v, err := f.Uint(key); v != want || err != nil {
			t.Errorf("Uint(%s) = %d, %v", key, v, err)
		}
	}
	for key, want := range map[string]float64{"f32": float64(float32(1e-6)), "f64": -2.5, "u8": 200, "i8": -128, "i64": -1, "u64": 1 << 63} {
		if v, err := f.Float(key); v != want || err != nil {
			t.Errorf("Float(%s) = %g, %v", key, v, err)
		}
	}
	if b, err := f.Bool("bool"); !b || err != nil {
		t.Errorf("Bool = %v, %v", b, err)
	}
	if !f.Has("tokens") || f.Has("missing") {
		t.Error("Has")
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{second(f.String("u8")), `crafted.gguf: metadata key "u8" (value at byte`},
		{second(f.String("u8")), "is u8, not a string"},
		{second(f.Uint("i8")), `metadata key "i8" (value at byte`},
		{second(f.Uint("i8")), "is -128, not an unsigned integer"},
		{second(f.Uint("i32")), "is -1"},
		{second(f.Uint("f32")), "is f32, not an unsigned integer"},
		{second(f.Uint("tokens")), "is array of string"},
		{second(f.Float("general.architecture")), "is string, not a number"},
		{second(f.Float("nested")), "is array of arrays"},
		{second(f.Bool("u8")), "is u8, not a bool"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
	for _, err := range []error{second(f.String("nope")), second(f.Uint("nope")), second(f.Float("nope")), second(f.Bool("nope"))} {
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `crafted.gguf: metadata key "nope"`) {
			t.Errorf("missing key: %v", err)
		}
	}
	if v, err := f.Uint("i8"); v != 0 || err == nil {
		t.Errorf("Uint(i8) = %d, %v", v, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.gguf")
	data := fullFile()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path {
		t.Errorf("Path %q", f.Path)
	}
	ti, _ := f.Tensor("q4_0")
	got := f.Data(ti)
	want := data[len(data)-len(f.data)+int(ti.Offset):][:ti.Bytes()]
	if !slices.Equal(got, want) {
		t.Error("mapped data differs from the file")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Data(ti) != nil {
		t.Error("Data after Close")
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}

	bad := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(bad, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(bad)
	var fe *FormatError
	if !errors.As(err, &fe) || fe.File != bad {
		t.Errorf("truncated file: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); !errors.As(err, &fe) || fe.File != empty {
		t.Errorf("empty file: %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
