package simd

import (
	"encoding/binary"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gozoo/gozoo/internal/quant"
)

// X16 keeps a Q4_0 or Q8_0 matrix regrouped by 16 rows for exact decode,
// the blocks' bytes unchanged and as many of them. Exact decode is bound
// by the vector pipes, not by memory: a row's kernel spends, per 32
// weights, a widening and a shift of the nibbles, two table lookups, two
// multiply-adds and one instruction for the block's scale d. With the
// same column of 16 rows in one vector, x's value is a broadcast operand
// of the multiply-add, the scale is applied once to 16 rows' block sums,
// and 4-byte words of 16 rows lie side by side, so that a load at byte
// offset i puts the rows' byte i of a word in the low bits of 16 lanes,
// where a lookup reads it (Q4_0) or a mask keeps it (Q8_0) with no
// widening. On Zen 4, one thread, 3072 rows of 1024 (BenchmarkX16):
// Q4_0 from 45 to 60 GFLOP/s streamed from memory.
//
// A group of 16 rows is its blocks one after another; a block is the 16
// rows' d (16 halves), then the words of their quantized values (Q4_0:
// 4 words, Q8_0: 8), each as 16 rows' 4 bytes: row r's word i at byte
// 32 + 64i + 4r. The kernels' loads run up to 3 bytes past a block,
// which the padding after the last group covers.
//
// As BF12: matrices of a read-only file mapping, packed when a model
// binds them to a Linear in exact mode (PackQuant), and their pages given
// back to the kernel.

// x16 is a regrouped matrix [out, in] (out a multiple of 16, in of 32).
type x16 struct {
	f       quant.Format
	out, in int
	data    []byte
}

// x16Formats are the formats that regroup: the words of a block's values.
var x16Words = map[quant.Format]int{quant.Q4_0: 4, quant.Q8_0: 8}

// blockBytes is the bytes of one block of a group: 16 blocks' worth.
func (p *x16) blockBytes() int { return 16 * p.f.BlockBytes() }

// packX16 regroups w, the blocks of f of a matrix [out, in], in slabs of
// about 4 MB split over the CPUs, and releases each slab's source pages
// once it is copied (with release set).
func packX16(w []byte, f quant.Format, out, in int, release func([]byte)) *x16 {
	p := &x16{f: f, out: out, in: in}
	rb := in / 32 * f.BlockBytes()
	p.data = make([]byte, out*rb+64)
	n := runtime.GOMAXPROCS(0)
	slab := max(16, (4<<20)/rb&^15)
	for r0 := 0; r0 < out; r0 += slab {
		r1 := min(out, r0+slab)
		groups := (r1 - r0) / 16
		var wg sync.WaitGroup
		for i := range n {
			a, b := r0/16+groups*i/n, r0/16+groups*(i+1)/n
			wg.Go(func() {
				for g := a; g < b; g++ {
					p.regroup(g, w[16*g*rb:16*(g+1)*rb])
				}
			})
		}
		wg.Wait()
		if release != nil {
			release(w[r0*rb : r1*rb])
		}
	}
	return p
}

// regroup writes group g from src, its 16 rows in the file's layout.
func (p *x16) regroup(g int, src []byte) {
	bb, words := p.f.BlockBytes(), x16Words[p.f]
	rb := p.in / 32 * bb
	for b := 0; b < p.in/32; b++ {
		dst := p.data[(g*p.in/32+b)*p.blockBytes():]
		for r := 0; r < 16; r++ {
			blk := src[r*rb+b*bb:]
			dst[2*r], dst[2*r+1] = blk[0], blk[1]
			for i := 0; i < words; i++ {
				copy(dst[32+64*i+4*r:32+64*i+4*r+4], blk[2+4*i:])
			}
		}
	}
}

// rowBytes writes row r in the file's layout into dst.
func (p *x16) rowBytes(r int, dst []byte) {
	bb, words := p.f.BlockBytes(), x16Words[p.f]
	g, rr := r/16, r%16
	for b := 0; b < p.in/32; b++ {
		src := p.data[(g*p.in/32+b)*p.blockBytes():]
		blk := dst[b*bb:]
		blk[0], blk[1] = src[2*rr], src[2*rr+1]
		for i := 0; i < words; i++ {
			binary.LittleEndian.PutUint32(blk[2+4*i:], binary.LittleEndian.Uint32(src[32+64*i+4*rr:]))
		}
	}
}

// widenRows dequantizes rows [r0, r0+g) into dst: each row is put back
// in the file's layout and dequantized there, exactly as before packing.
func (p *x16) widenRows(r0, g int, dst []float32) {
	rb := p.in / 32 * p.f.BlockBytes()
	bp := byteBuf.Get().(*[]byte)
	defer byteBuf.Put(bp)
	if cap(*bp) < g*rb {
		*bp = make([]byte, g*rb)
	}
	buf := (*bp)[:g*rb]
	for r := 0; r < g; r++ {
		p.rowBytes(r0+r, buf[r*rb:(r+1)*rb])
	}
	Weight{Kind: Quant, Format: p.f, Bytes: buf}.widenRows(0, g, p.in, dst)
}

var byteBuf = sync.Pool{New: func() any { return new([]byte) }}

// mulRowsX16 is mulRows for a regrouped weight: decode runs the kernel
// over the whole groups of [r0, r1) (the team's chunks are whole groups),
// anything else goes through widened rows.
func mulRowsX16(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	p := w.x16
	if T == 1 && r0%16 == 0 && r1%16 == 0 && asmGemvX16(p, x, r0, r1, y) {
		return
	}
	mulRowGroups(y, x, T, w, out, in, r0, r1)
}

// PackQuant regroups the Q4_0 or Q8_0 matrix w [out, in] for exact decode
// (see X16 above) when the kernels run here, it lies in a file mapping,
// it is at least packMin bytes and out is a multiple of 16; its pages are
// then given back to the kernel. Packing again is a no-op, and
// GOZOO_PACK=off turns packing off.
func PackQuant(w []byte, f quant.Format, out, in int) {
	if packOff || !canX16() || x16Words[f] == 0 || out%16 != 0 || in%32 != 0 || len(w) == 0 {
		return
	}
	rb := in / 32 * f.BlockBytes()
	if out*rb < packMin || len(w) < out*rb {
		return
	}
	w = w[:out*rb]
	pack(unsafe.Pointer(&w[0]), len(w), func() any { return packX16(w, f, out, in, release) })
}
