package simd

import (
	"math"
	"unsafe"

	"github.com/x448/float16"
)

func bf16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

func f16ToF32(b uint16) float32 { return float16.Frombits(b).Float32() }

// panels is a float matrix [out, in] (F32, BF16 or F16 values, kept as
// stored) laid out as out/16 panels of 16 rows: value (r, d) at
// (r/16)·16·in + d·16 + r%16. The products run on it by broadcasting x's
// values into 16 columns at a time (panelMul*AVX2), each output a lane
// that sums its in products in order, one FMA each, whatever the number
// of rows T: a row's result does not depend on the rows beside it, and
// no horizontal sums are paid (the dot tiles pay one per output).
type panels struct {
	kind    Kind // F32, BF16 or F16
	out, in int
	data    []byte // packMemory
}

func (p *panels) size() int {
	if p.kind == F32 {
		return 4
	}
	return 2
}

// ps is the values of one panel.
func (p *panels) ps() int { return 16 * p.in }

// PackF16 packs the F16 matrix w [out, in] as panels, or returns nil where
// it does not (see PackBF16).
func PackF16(w []uint16, out, in int) *Packing { return packPanels(F16, w, out, in) }

// packPanels lays w [out, in] of kind k out as panels, or returns nil: no
// panel kernels here (unless GOZOO_PACK=all, which checks the Go path),
// GOZOO_PACK=off, under packMin bytes in 16 bits (so that a matrix in F32
// and in BF16 is laid out alike, and sums alike), or out not a multiple
// of 16. w lies in a read-only file mapping, whose pages are given back
// once packed.
func packPanels[T uint16 | float32](k Kind, w []T, out, in int) *Packing {
	if packOff || !(canPanels() || packAll) || out%16 != 0 || 2*out*in < max(packMin, 1) || len(w) < out*in {
		return nil
	}
	p := layPanels(k, w[:out*in], out, in, release)
	if p == nil {
		return nil
	}
	return newPacking(nil, nil, p)
}

// layPanels writes w [out, in] (out a multiple of 16) as panels in new
// packing memory, handing each slab of w to release once laid out.
func layPanels[T uint16 | float32](k Kind, w []T, out, in int, release func([]byte)) *panels {
	size := int(unsafe.Sizeof(T(0)))
	p := &panels{kind: k, out: out, in: in}
	if p.data = packMemory(out * in * size); p.data == nil {
		return nil
	}
	dst := unsafe.Slice((*T)(unsafe.Pointer(&p.data[0])), out*in)
	bySlabs(out, in*size, func(g int) {
		pg := dst[g*16*in : (g+1)*16*in]
		for r := 0; r < 16; r++ {
			for d, v := range w[(16*g+r)*in : (16*g+r+1)*in] {
				pg[d*16+r] = v
			}
		}
	}, func(r0, r1 int) {
		if release != nil {
			src := w[r0*in : r1*in]
			release(unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), len(src)*size))
		}
	})
	return p
}

// mulRowsPanels computes the columns [r0, r1) of y (whole panels) for the
// T rows of x: decode four panels at a time, more rows in blocks of x
// (about 512 KB, which stay in L2 while each panel streams past them) by
// up to 6 rows a kernel.
func mulRowsPanels(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	p := w.panels
	if r0 == r1 {
		return
	}
	_, _ = x[T*in-1], y[(T-1)*out+r1-1]
	if active == nil {
		p.mulGo(y, x, T, out, r0, r1)
		return
	}
	ps := p.ps()
	if T == 1 {
		g := r0 / 16
		for ; g+4 <= r1/16; g += 4 {
			asmPanelMul(p.kind, 1, 4, &x[0], in, p.at(g*ps), ps, in, &y[16*g], out)
		}
		for ; g < r1/16; g++ {
			asmPanelMul(p.kind, 1, 1, &x[0], in, p.at(g*ps), ps, in, &y[16*g], out)
		}
		return
	}
	tb := max(1, min(T, 131072/in))
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(T, t0+tb)
		for g := r0 / 16; g < r1/16; g++ {
			for t := t0; t < t1; t += 6 {
				asmPanelMul(p.kind, min(6, t1-t), 1, &x[t*in], in, p.at(g*ps), ps, in, &y[t*out+16*g], out)
			}
		}
	}
}

// at is a pointer to value i of the panels.
func (p *panels) at(i int) unsafe.Pointer { return unsafe.Pointer(&p.data[i*p.size()]) }

// value is the stored value i of the panels, widened.
func (p *panels) value(i int) float32 {
	switch p.kind {
	case F32:
		return *(*float32)(p.at(i))
	case BF16:
		return bf16ToF32(*(*uint16)(p.at(i)))
	}
	return f16ToF32(*(*uint16)(p.at(i)))
}

// mulGo is mulRowsPanels in Go: each output sums in order, as the
// kernels do (without their fused multiply-adds).
func (p *panels) mulGo(y, x []float32, T, out, r0, r1 int) {
	for t := 0; t < T; t++ {
		for r := r0; r < r1; r++ {
			base := r/16*p.ps() + r%16
			var s float32
			for d, v := range x[t*p.in : (t+1)*p.in] {
				s += v * p.value(base+16*d)
			}
			y[t*out+r] = s
		}
	}
}

// widenRows writes rows [j0, j0+g) as float32 into dst.
func (p *panels) widenRows(j0, g int, dst []float32) {
	for r := j0; r < j0+g; r++ {
		base := r/16*p.ps() + r%16
		row := dst[(r-j0)*p.in : (r-j0+1)*p.in]
		for d := range row {
			row[d] = p.value(base + 16*d)
		}
	}
}
