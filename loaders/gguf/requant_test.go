package gguf

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/gozoo/gozoo/internal/quant"
	"github.com/gozoo/gozoo/internal/testfiles"
)

// TestRequantizeLlamaCPPBlocks: the reference quantizers, given the values
// of a block llama.cpp wrote (dequantized), write that block again. The
// F32 weights the cases were quantized from are not shipped, so this is
// the check of quantize.go against llama.cpp's bytes: a quantizer that
// packs, orders or scales differently does not reproduce them.
func TestRequantizeLlamaCPPBlocks(t *testing.T) {
	for _, c := range []struct {
		dir     string
		typ     Type
		minFrac float64
	}{
		// Measured: Q4_1 12800/12800, Q4_K 2367/2368, IQ4_NL 46812/47104,
		// Q5_K 117/128 and 6270/6784, Q6_K 401/512, Q3_K 2202/4032. The
		// searching quantizers need not come back to the same block from
		// its grid values (another scale can fit them as well), the
		// closed-form Q4_1 must.
		{"qwen3_q4_1", TypeQ4_1, 1},
		{"gemma3_q3_k_m", TypeQ3_K, 0.5},
		{"gemma3_q3_k_m", TypeQ5_K, 0.85},
		{"gemma3_q3_k_m", TypeQ4_K, 0.99},
		{"gemma3_q3_k_m", TypeQ6_K, 0.75},
		{"qwen3_iq4_nl", TypeIQ4_NL, 0.99},
		{"llama_q5_k_m", TypeQ5_K, 0.9},
	} {
		dir := testfiles.Fixture(t, "gguf", c.dir)
		f, err := Open(filepath.Join(dir, "model.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		qf, _ := c.typ.Format()
		bs, bb := qf.BlockSize(), qf.BlockBytes()
		same, total := 0, 0
		vals := make([]float32, bs)
		out := make([]byte, bb)
		for _, ti := range f.Tensors {
			if ti.Type != c.typ {
				continue
			}
			data := f.Data(ti)
			for b := 0; b+bb <= len(data); b += bb {
				quant.DequantizeRow(qf, data[b:b+bb], vals)
				quant.QuantizeRow(qf, vals, out)
				total++
				if bytes.Equal(out, data[b:b+bb]) {
					same++
				}
			}
		}
		f.Close()
		frac := float64(same) / float64(total)
		t.Logf("%s %s: %d of %d blocks written again byte for byte (%.3f)", c.dir, c.typ, same, total, frac)
		if total == 0 || frac < c.minFrac {
			t.Errorf("%s %s: %d of %d blocks reproduced, want a fraction >= %g", c.dir, c.typ, same, total, c.minFrac)
		}
	}
}
