package simd

import (
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A coded matrix keeps a BF16 or F32 weight matrix in 4 bits a weight
// fewer, losslessly, for decode: BF12 keeps a BF16 matrix in 12 bits a
// weight, F28 an F32 one in 28. Decode reads every weight once a token, so
// it runs at the machine's read bandwidth, and fewer bytes are a faster
// token. A weight's high byte (the sign and the exponent's top 7 bits)
// takes few values along a row (11-15 in rows of N(0, 0.02) draws, which
// the same-size trained matrices resemble: their exponents span a few
// octaves), while its low bytes (the exponent's last bit and the
// mantissa: one byte in a bfloat16, three in a float32) take any. So
// each row keeps a table of its 15 most frequent high bytes, plus 0x00 as
// code 15, and each weight a 4-bit code into it beside its low bytes. A
// weight whose high byte is not in its row's table (1e-5 of N(0, 0.02)
// draws) is stored as +0 and listed among the matrix's exceptions, whose
// products the product adds after the row's sum. The products are the
// weights' own, summed in another order, as any kernel's lanes sum them:
// nothing is rounded that the BF16 or F32 kernel does not round.
//
// A row is the table (16 bytes), then chunks of 32 weights: 16 bytes of
// codes (byte j: weight j's code in its low nibble, weight 16+j's in its
// high nibble) and the low bytes, weight after weight, each weight's
// little-endian (32 bytes in BF12, 96 in F28). gemvBF12AVX512 and
// gemvF28AVX512 widen a chunk with two table lookups (VPERMD) and two
// byte permutes (AVX-512 VBMI's VPERMB) into the float32 bits
// table[code]<<24 | low bytes<<(24 - 8·low).
//
// Which matrices: BF16 and F32 matrices of a read-only file mapping,
// packed when a model binds them to a Linear (PackBF16, PackF32; the
// weight keeps the Packing, graphs.Param.Prepare), whose pages are then
// given back to the kernel (later reads of the file's bytes fault them in
// again). Memory the program can write is never packed, so a packed copy
// never goes stale.

// coded is a packed matrix [out, in].
type coded struct {
	data    []byte // out rows of stride bytes
	stride  int
	out, in int
	low     int        // low bytes a weight: 1 (BF12) or 3 (F28)
	exc     []codedExc // by row, then column
}

// codedExc is a weight whose high byte is not in its row's table.
type codedExc struct {
	row, col int32
	bits     uint32 // its float32 bits
}

// value is the exception's weight.
func (e codedExc) value() float32 { return math.Float32frombits(e.bits) }

// codedStride is the bytes of a packed row of in weights (a multiple of
// 32) of low low bytes each.
func codedStride(in, low int) int { return 16 + in/32*(16+32*low) }

// fileBytes is the bytes of the matrix unpacked: BF16 or F32.
func (p *coded) fileBytes() int { return (p.low + 1) * p.out * p.in }

// codedBits are the weights a matrix is coded from: BF16 or F32 bits.
type codedBits interface{ uint16 | uint32 }

// packCoded packs w [out, in] (in a multiple of 32), or returns nil when
// the exceptions would be more than 64 and one weight in 1024. The rows
// go in slabs of 4 MB, split over the CPUs; with release set, each slab's
// source pages are given back once it is packed, so the matrix is never
// resident twice.
func packCoded[T codedBits](w []T, out, in int, release func([]byte)) *coded {
	size := int(unsafe.Sizeof(w[0]))
	p := &coded{stride: codedStride(in, size-1), out: out, in: in, low: size - 1}
	if p.data = packMemory(out * p.stride); p.data == nil {
		return nil
	}
	maxExc := max(64, out*in/1024)
	n := runtime.GOMAXPROCS(0)
	slab := max(n, (4<<20)/(size*in))
	parts := make([][]codedExc, n)
	for r0 := 0; r0 < out; r0 += slab {
		r1 := min(out, r0+slab)
		var wg sync.WaitGroup
		for i := range n {
			a, b := r0+(r1-r0)*i/n, r0+(r1-r0)*(i+1)/n
			wg.Go(func() {
				parts[i] = parts[i][:0]
				for r := a; r < b; r++ {
					parts[i] = packRow(p, r, w[r*in:(r+1)*in], parts[i])
				}
			})
		}
		wg.Wait()
		for _, e := range parts {
			p.exc = append(p.exc, e...)
		}
		if len(p.exc) > maxExc {
			freePacking(p.data)
			return nil
		}
		if release != nil {
			release(unsafe.Slice((*byte)(unsafe.Pointer(&w[r0*in])), size*(r1-r0)*in))
		}
	}
	return p
}

// packRow packs row r of p from src, appending its exceptions to exc.
func packRow[T codedBits](p *coded, r int, src []T, exc []codedExc) []codedExc {
	hiShift := 8 * p.low
	var count [256]int32
	for _, v := range src {
		count[v>>hiShift]++
	}
	// The table: 0x00 as code 15 (it widens to +0 with zero low bytes,
	// which stands in for the exceptions), then the 15 most frequent other
	// high bytes, ties to the lower byte.
	var seen [255]uint32 // count<<8 | 255-byte: the most frequent sort first
	n := 0
	for h := 1; h < 256; h++ {
		if count[h] > 0 {
			seen[n] = uint32(count[h])<<8 | uint32(255-h)
			n++
		}
	}
	top := seen[:n]
	slices.SortFunc(top, func(a, b uint32) int { return int(b) - int(a) })
	row := p.data[r*p.stride : (r+1)*p.stride]
	var code [256]uint8
	for i := range code {
		code[i] = 0xff
	}
	code[0] = 15
	for c, t := range top[:min(15, n)] {
		h := 255 - byte(t)
		row[c] = h
		code[h] = uint8(c)
	}
	chunkBytes := 16 + 32*p.low
	widen := 32 - 8*(p.low+1) // to float32 bits
	// Through fixed-size arrays, two weights a code byte, the low bytes
	// last: no bounds check per weight, twice as fast (BenchmarkPackCoded).
	for k := 0; k < len(src)/32; k++ {
		vals := (*[32]T)(src[32*k:])
		chunk := row[16+chunkBytes*k : 16+chunkBytes*(k+1)]
		codes := (*[16]byte)(chunk)
		var bits [32]uint32 // the weights, an exception's as 0
		for j := 0; j < 16; j++ {
			v0, v1 := vals[j], vals[16+j]
			c0, c1 := code[v0>>hiShift], code[v1>>hiShift]
			if c0 == 0xff {
				exc = append(exc, codedExc{int32(r), int32(32*k + j), uint32(v0) << widen})
				c0, v0 = 15, 0
			}
			if c1 == 0xff {
				exc = append(exc, codedExc{int32(r), int32(32*k + 16 + j), uint32(v1) << widen})
				c1, v1 = 15, 0
			}
			codes[j] = c0 | c1<<4
			bits[j], bits[16+j] = uint32(v0), uint32(v1)
		}
		if p.low == 1 {
			lows := (*[32]byte)(chunk[16:])
			for i, v := range bits {
				lows[i] = byte(v)
			}
			continue
		}
		// Three bytes a weight, by overlapping 4-byte stores (each
		// store's top byte is the next one's first), the last by bytes.
		lows := (*[96]byte)(chunk[16:])
		for i, v := range bits[:31] {
			binary.LittleEndian.PutUint32(lows[3*i:], v)
		}
		lows[93], lows[94], lows[95] = byte(bits[31]), byte(bits[31]>>8), byte(bits[31]>>16)
	}
	return exc
}

// unpackRows widens rows [r0, r1) into dst (rows of in values), with the
// exceptions in place.
func (p *coded) unpackRows(r0, r1 int, dst []float32) {
	if !asmUnpackCoded(p, r0, r1, dst) {
		chunkBytes := 16 + 32*p.low
		for r := r0; r < r1; r++ {
			row := p.data[r*p.stride : (r+1)*p.stride]
			out := dst[(r-r0)*p.in : (r-r0+1)*p.in]
			for k := 0; k < p.in/32; k++ {
				chunk := row[16+chunkBytes*k:]
				lows := chunk[16:]
				for i := 0; i < 32; i++ {
					c := chunk[i%16] >> (4 * (i / 16)) & 15
					bits := uint32(row[c]) << 24
					for b := 0; b < p.low; b++ {
						bits |= uint32(lows[p.low*i+b]) << (24 - 8*p.low + 8*b)
					}
					out[32*k+i] = math.Float32frombits(bits)
				}
			}
		}
	}
	for _, e := range p.excIn(r0, r1) {
		dst[int(e.row-int32(r0))*p.in+int(e.col)] = e.value()
	}
}

// excIn is the exceptions of rows [r0, r1).
func (p *coded) excIn(r0, r1 int) []codedExc {
	i := sort.Search(len(p.exc), func(i int) bool { return p.exc[i].row >= int32(r0) })
	j := i + sort.Search(len(p.exc)-i, func(k int) bool { return p.exc[i+k].row >= int32(r1) })
	return p.exc[i:j]
}

// codedRowsMax is the most rows of x one pass of the few-rows kernels
// (gemm{BF12,F28}x{2..8}AVX512) takes, and codedFewRows the most they
// serve, in passes: more rows widen the weights once and run the float
// kernels (SmolLM2-135M BF16 batched decode, 16 rows: 352 -> 388 tok/s
// in passes; 32 rows gained nothing).
const (
	codedRowsMax = 8
	codedFewRows = 16
)

// mulRowsCoded is mulRows for a packed weight: one row on the decode
// kernel, a few rows (a batched decode) on the few-rows kernels, each
// row's product then the same bit for bit, and more on widened rows.
func mulRowsCoded(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	p := w.coded
	if T == 1 && asmGemvCoded(p, x, r0, r1, y) {
		for _, e := range p.excIn(r0, r1) {
			y[e.row] += e.value() * x[e.col]
		}
		return
	}
	if T > 1 && T <= codedFewRows && canCoded() {
		for t0 := 0; t0 < T; t0 += codedRowsMax {
			n := min(codedRowsMax, T-t0)
			if n == 1 {
				asmGemvCoded(p, x[t0*in:], r0, r1, y[t0*out:])
			} else {
				asmGemmCoded(p, x[t0*in:], n, r0, r1, y[t0*out:], out)
			}
		}
		for _, e := range p.excIn(r0, r1) {
			for t := 0; t < T; t++ {
				y[t*out+int(e.row)] += e.value() * x[t*in+int(e.col)]
			}
		}
		return
	}
	mulRowGroups(y, x, T, w, out, in, r0, r1)
}

var (
	// packMin is the smallest matrix (bytes in the file) worth packing:
	// the size from which decode shares a product with the team.
	// GOZOO_PACK=all packs every one, so CI checks the packings on the
	// golden cases' small matrices too.
	packMin = map[bool]int{false: splitBytes, true: 0}[os.Getenv("GOZOO_PACK") == "all"]
	// packOff is GOZOO_PACK=off: matrices stay as the file has them.
	packOff = os.Getenv("GOZOO_PACK") == "off"
	// packAll is GOZOO_PACK=all, which also packs where no kernel reads
	// the packings (plain Go, AVX2): their Go paths then run, so a CI
	// machine without AVX-512 checks the packings' plumbing too.
	packAll = os.Getenv("GOZOO_PACK") == "all"
)

// A Packing is a matrix of a checkpoint file prepared for the decode
// kernels: coded (BF16 in 12 bits a weight, F32 in 28) or regrouped by 16
// rows (X16). The weight that owns it (graphs.Param.Prepare) hands it to
// the products through Weight.On. Its memory lies outside the Go heap and
// is freed by Release or, failing that, once nothing reaches the Packing.
type Packing struct {
	coded    *coded
	x16      *x16
	panels   *panels
	released atomic.Bool
	cleanup  runtime.Cleanup
}

func newPacking(c *coded, x *x16, pn *panels) *Packing {
	p := &Packing{coded: c, x16: x, panels: pn}
	data := p.memory()
	p.cleanup = runtime.AddCleanup(p, freePacking, data)
	return p
}

func (p *Packing) memory() []byte {
	switch {
	case p.coded != nil:
		return p.coded.data
	case p.panels != nil:
		return p.panels.data
	}
	return p.x16.data
}

// Release frees the packing's memory. The products of a weight whose
// packing is released read the stored data again; none may be running.
func (p *Packing) Release() {
	if p == nil || p.released.Swap(true) {
		return
	}
	p.cleanup.Stop()
	freePacking(p.memory())
}

// Sizes are the matrix's bytes as stored and the bytes its packing reads
// instead.
func (p *Packing) Sizes() (stored, packed int64) {
	if c := p.coded; c != nil {
		return int64(c.fileBytes()), int64(len(c.data) + int(unsafe.Sizeof(codedExc{}))*len(c.exc))
	}
	if pn := p.panels; pn != nil {
		return int64(len(pn.data)), int64(len(pn.data))
	}
	x := p.x16
	return int64(x.out * x.in / x.f.BlockSize() * x.f.BlockBytes()), int64(len(x.data))
}

// CodesFloats says whether PackBF16 and PackF32 code matrices here (BF12,
// F28) rather than lay them out in panels or leave them.
func CodesFloats() bool { return !packOff && (canCoded() || packAll) }

// PackBF16 packs the BF16 matrix w [out, in] for MulT in 12 bits a
// weight (see coded above), or returns nil where it does not: the kernels
// cannot use it (AVX-512 with VBMI), it is under packMin bytes, in is not
// a multiple of 32, its exceptions are too many, or GOZOO_PACK=off. w
// must lie in a read-only file mapping: its pages are given back to the
// kernel once packed.
func PackBF16(w []uint16, out, in int) *Packing {
	if pk := packFloat(w, out, in); pk != nil {
		return pk
	}
	return packPanels(BF16, w, out, in)
}

// PackF32 is PackBF16 for an F32 matrix, which it packs in 28 bits a
// weight.
func PackF32(w []float32, out, in int) *Packing {
	if len(w) == 0 {
		return nil
	}
	if pk := packFloat(unsafe.Slice((*uint32)(unsafe.Pointer(&w[0])), len(w)), out, in); pk != nil {
		return pk
	}
	return packPanels(F32, w, out, in)
}

func packFloat[T codedBits](w []T, out, in int) *Packing {
	size := int(unsafe.Sizeof(T(0)))
	if packOff || !(canCoded() || packAll) || in%32 != 0 || out*in < packMin/size || len(w) < out*in {
		return nil
	}
	c := packCoded(w[:out*in], out, in, release)
	if c == nil {
		return nil
	}
	return newPacking(c, nil, nil)
}

// On is w as the products run it: on p when p is a live packing of a
// matrix of w's kind and shape [out, in], else w itself.
func (w Weight) On(p *Packing, out, in int) Weight {
	if p == nil || p.released.Load() {
		return w
	}
	if c := p.coded; c != nil && c.codes(w.Kind) && c.out == out && c.in == in {
		return Weight{Kind: Coded, coded: c}
	}
	if x := p.x16; x != nil && w.Kind == Quant && x.f == w.Format && x.out == out && x.in == in {
		return Weight{Kind: X16, x16: x}
	}
	if pn := p.panels; pn != nil && w.Kind == pn.kind && pn.out == out && pn.in == in {
		return Weight{Kind: Panels, panels: pn}
	}
	return w
}

// Row widens row r of a packed weight (Weight.On) [rows, in] into dst
// and says whether it did: an embedding row of a tied head. The file's
// pages of a packed matrix were given back, and reading them again
// faults in far more than the row (the kernel reads around a fault).
func Row(w Weight, r, in int, dst []float32) bool {
	switch {
	case w.Kind == Coded && w.coded.in == in && r < w.coded.out:
		w.coded.unpackRows(r, r+1, dst[:in])
		return true
	case w.Kind == X16 && w.x16.in == in && r < w.x16.out:
		w.x16.widenRows(r, 1, dst[:in])
		return true
	case w.Kind == Panels && w.panels.in == in && r < w.panels.out:
		w.panels.widenRows(r, 1, dst[:in])
		return true
	}
	return false
}

// codes says whether p is a packing of a weight of kind k.
func (p *coded) codes(k Kind) bool {
	return k == BF16 && p.low == 1 || k == F32 && p.low == 3
}
