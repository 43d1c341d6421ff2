package quant

import "github.com/x448/float16"

// QuantizeKV stores x (whole blocks of 32) into dst as f's blocks (Q8_0 or
// Q4_0) as ggml_set_rows does for a quantized KV cache: Q8_0 with x86's
// quantize_row_q8_0 (the scale amax/127 as F16, values rounded half to
// even: QuantizeActs' arithmetic, not QuantizeRow's roundf), Q4_0 with
// quantize_row_q4_0_ref (QuantizeRow: scale max/−8, values truncated).
func QuantizeKV(f Format, x []float32, dst []byte) {
	if f != Q8_0 {
		QuantizeRow(f, x, dst)
		return
	}
	var q [32]int8
	var d [1]float32
	for b := 0; b < len(x)/32; b++ {
		QuantizeActs(Q8_0, x[b*32:b*32+32], q[:], d[:], nil)
		blk := dst[b*34 : b*34+34]
		h := float16.Fromfloat32(d[0]).Bits() // d is already an F16 value
		blk[0], blk[1] = byte(h), byte(h>>8)
		for j, v := range q {
			blk[2+j] = byte(v)
		}
	}
}
