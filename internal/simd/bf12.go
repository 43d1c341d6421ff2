package simd

import (
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"unsafe"
)

// BF12 keeps a BF16 weight matrix in 12 bits a weight, losslessly, for
// decode. Decode reads every weight once a token, so on BF16 weights it
// runs at the machine's read bandwidth (about 31 GB/s for two cores here,
// and gemvBF16AVX512 streams at that). A bfloat16 is a high byte (the sign
// and the exponent's top 7 bits) and a low byte (the exponent's last bit
// and the 7-bit mantissa); along a row of weights the high byte takes few
// values (11-15 in rows of N(0, 0.02) draws, which the same-size trained
// matrices resemble: their exponents span a few octaves). So each row
// keeps a table of its 15 most frequent high bytes, plus 0x00 as code 15,
// and each weight a 4-bit code into it beside its low byte. A weight whose
// high byte is not in its row's table (1e-5 of N(0, 0.02) draws) is stored
// as +0 and listed among the matrix's exceptions, whose products the
// product adds after the row's sum. The products are the BF16 weights'
// own, summed in another order, as any kernel's lanes sum them: nothing is
// rounded that the BF16 kernel does not round.
//
// A row is the table (16 bytes), then chunks of 32 weights: 16 bytes of
// codes (byte j: weight j's code in its low nibble, weight 16+j's in its
// high nibble) and the 32 low bytes. gemvBF12AVX512 widens a chunk with
// two table lookups (VPERMD) and two byte permutes (AVX-512 VBMI's VPERMB)
// into the float32 bits table[code]<<24 | low<<16.
//
// Which matrices: BF16 matrices of a read-only file mapping (Mapped),
// packed when a model binds them to a Linear (PackBF16), whose pages are
// then given back to the kernel (later reads, an embedding row, fault them
// in again from the file). Memory the program can write is never packed,
// so a packed copy never goes stale.

// bf12 is a packed matrix [out, in].
type bf12 struct {
	data    []byte // out rows of stride bytes
	stride  int
	out, in int
	exc     []bf12Exc // by row, then column
}

// bf12Exc is a weight whose high byte is not in its row's table.
type bf12Exc struct {
	row, col int32
	bits     uint16
}

// bf12Stride is the bytes of a packed row of in weights (a multiple of 32).
func bf12Stride(in int) int { return 16 + in/32*48 }

// packBF12 packs w [out, in] (in a multiple of 32), or returns nil when the
// exceptions would be more than 64 and one weight in 1024. The rows go in
// slabs of 4 MB, split over the CPUs; with release set, each slab's source
// pages are given back once it is packed, so the matrix is never resident
// twice.
func packBF12(w []uint16, out, in int, release func([]byte)) *bf12 {
	p := &bf12{stride: bf12Stride(in), out: out, in: in}
	if p.data = packMemory(out * p.stride); p.data == nil {
		return nil
	}
	maxExc := max(64, out*in/1024)
	n := runtime.GOMAXPROCS(0)
	slab := max(n, (2<<20)/in)
	parts := make([][]bf12Exc, n)
	for r0 := 0; r0 < out; r0 += slab {
		r1 := min(out, r0+slab)
		var wg sync.WaitGroup
		for i := range n {
			a, b := r0+(r1-r0)*i/n, r0+(r1-r0)*(i+1)/n
			wg.Go(func() {
				parts[i] = parts[i][:0]
				for r := a; r < b; r++ {
					parts[i] = p.packRow(r, w[r*in:(r+1)*in], parts[i])
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
			release(unsafe.Slice((*byte)(unsafe.Pointer(&w[r0*in])), 2*(r1-r0)*in))
		}
	}
	return p
}

// packRow packs row r from src, appending its exceptions to exc.
func (p *bf12) packRow(r int, src []uint16, exc []bf12Exc) []bf12Exc {
	var count [256]int32
	for _, v := range src {
		count[v>>8]++
	}
	// The table: 0x00 as code 15 (it widens to +0 with a zero low byte,
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
	for k := 0; k < len(src)/32; k++ {
		chunk := row[16+48*k : 16+48*(k+1)]
		for j := 0; j < 16; j++ {
			v0, v1 := src[32*k+j], src[32*k+16+j]
			c0, c1 := code[v0>>8], code[v1>>8]
			l0, l1 := byte(v0), byte(v1)
			if c0 == 0xff {
				exc = append(exc, bf12Exc{int32(r), int32(32*k + j), v0})
				c0, l0 = 15, 0
			}
			if c1 == 0xff {
				exc = append(exc, bf12Exc{int32(r), int32(32*k + 16 + j), v1})
				c1, l1 = 15, 0
			}
			chunk[j] = c0 | c1<<4
			chunk[16+j], chunk[32+j] = l0, l1
		}
	}
	return exc
}

// unpackRows widens rows [r0, r1) into dst (rows of in values), with the
// exceptions in place.
func (p *bf12) unpackRows(r0, r1 int, dst []float32) {
	if !asmUnpackBF12(p, r0, r1, dst) {
		for r := r0; r < r1; r++ {
			row := p.data[r*p.stride : (r+1)*p.stride]
			out := dst[(r-r0)*p.in : (r-r0+1)*p.in]
			for k := 0; k < p.in/32; k++ {
				chunk := row[16+48*k:]
				for i := 0; i < 32; i++ {
					c := chunk[i%16] >> (4 * (i / 16)) & 15
					out[32*k+i] = math.Float32frombits(uint32(row[c])<<24 | uint32(chunk[16+i])<<16)
				}
			}
		}
	}
	for _, e := range p.excIn(r0, r1) {
		dst[int(e.row-int32(r0))*p.in+int(e.col)] = math.Float32frombits(uint32(e.bits) << 16)
	}
}

// excIn is the exceptions of rows [r0, r1).
func (p *bf12) excIn(r0, r1 int) []bf12Exc {
	i := sort.Search(len(p.exc), func(i int) bool { return p.exc[i].row >= int32(r0) })
	j := i + sort.Search(len(p.exc)-i, func(k int) bool { return p.exc[i+k].row >= int32(r1) })
	return p.exc[i:j]
}

// mulRowsBF12 is mulRows for a packed weight.
func mulRowsBF12(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	p := w.bf12
	if T == 1 && asmGemvBF12(p, x, r0, r1, y) {
		for _, e := range p.excIn(r0, r1) {
			y[e.row] += math.Float32frombits(uint32(e.bits)<<16) * x[e.col]
		}
		return
	}
	mulRowGroups(y, x, T, w, out, in, r0, r1)
}

var (
	packMu sync.Mutex
	// mapped is the read-only file mappings (Mapped), whose matrices may
	// be packed.
	mapped []span
	// packs is the packed matrices (*bf12, *x16; nil for a refusal) by
	// the address of their data in the mapping.
	packs sync.Map // uintptr -> any
	// packMin is the smallest matrix (bytes in the file) worth packing:
	// the size from which decode shares a product with the team.
	// GOZOO_PACK=all packs every one, so CI checks the packings on the
	// golden cases' small matrices too.
	packMin = map[bool]int{false: splitBytes, true: 0}[os.Getenv("GOZOO_PACK") == "all"]
	// packOff is GOZOO_PACK=off: matrices stay as the file has them.
	packOff = os.Getenv("GOZOO_PACK") == "off"
)

// Mapped records that b is a read-only mapping of a file: matrices in it
// may be packed (PackBF16, PackQuant), and their pages given back to the
// kernel.
func Mapped(b []byte) {
	if len(b) == 0 {
		return
	}
	packMu.Lock()
	defer packMu.Unlock()
	mapped = append(mapped, span{uintptr(unsafe.Pointer(&b[0])), len(b)})
}

// Unmapped forgets the mapping b, and every packing of a matrix in it,
// before b is unmapped (another mapping may later take its addresses).
func Unmapped(b []byte) {
	if len(b) == 0 {
		return
	}
	packMu.Lock()
	defer packMu.Unlock()
	s := span{uintptr(unsafe.Pointer(&b[0])), len(b)}
	for i, m := range mapped {
		if m == s {
			mapped = append(mapped[:i], mapped[i+1:]...)
			break
		}
	}
	// The packings go too: no product runs on a model whose file is
	// being unmapped.
	packs.Range(func(k, v any) bool {
		if a := k.(uintptr); a >= s.p && a < s.p+uintptr(s.n) {
			packs.Delete(k)
			switch p := v.(type) {
			case *bf12:
				if p != nil {
					freePacking(p.data)
				}
			case *x16:
				if p != nil {
					freePacking(p.data)
				}
			}
		}
		return true
	})
}

// PackBF16 packs the BF16 matrix w [out, in] for MulT (see BF12 above)
// when the kernels can use it (AVX-512 with VBMI), it lies in a file
// mapping, it is at least packMin bytes, in is a multiple of 32 and its
// exceptions are few; the pages of w are then given back to the kernel.
// Packing again, or after a refusal, is a no-op, and GOZOO_PACK=off turns
// packing off.
func PackBF16(w []uint16, out, in int) {
	if packOff || !canBF12() || in%32 != 0 || out*in < packMin/2 || len(w) < out*in {
		return
	}
	w = w[:out*in]
	pack(unsafe.Pointer(&w[0]), 2*len(w), func() any { return packBF12(w, out, in, release) })
}

// pack stores build's packing of the n bytes at a, once, if they lie in
// a file mapping. A refusal is kept too (a nil packing), so that the
// graphs built later do not try the matrix again.
func pack(a unsafe.Pointer, n int, build func() any) {
	if _, ok := packs.Load(uintptr(a)); ok {
		return
	}
	packMu.Lock()
	defer packMu.Unlock()
	inFile := false
	for _, m := range mapped {
		inFile = inFile || (uintptr(a) >= m.p && uintptr(a)+uintptr(n) <= m.p+uintptr(m.n))
	}
	if _, ok := packs.Load(uintptr(a)); ok || !inFile {
		return
	}
	packs.Store(uintptr(a), build())
}

// Packed reports the matrices packed so far: how many, their bytes in
// the file and the bytes their packings read instead.
func Packed() (matrices int, fileBytes, packedBytes int64) {
	packs.Range(func(_, v any) bool {
		switch p := v.(type) {
		case *bf12:
			if p != nil {
				matrices++
				fileBytes += int64(2 * p.out * p.in)
				packedBytes += int64(len(p.data) + int(unsafe.Sizeof(bf12Exc{}))*len(p.exc))
			}
		case *x16:
			if p != nil {
				matrices++
				fileBytes += int64(p.out * p.in / p.f.BlockSize() * p.f.BlockBytes())
				packedBytes += int64(len(p.data))
			}
		}
		return true
	})
	return matrices, fileBytes, packedBytes
}

// packingOf is the packing of w's data, or nil.
func packingOf(w Weight) any {
	var a uintptr
	switch {
	case w.Kind == BF16 && len(w.U16s) > 0:
		a = uintptr(unsafe.Pointer(&w.U16s[0]))
	case w.Kind == Quant && len(w.Bytes) > 0:
		a = uintptr(unsafe.Pointer(&w.Bytes[0]))
	default:
		return nil
	}
	v, _ := packs.Load(a)
	return v
}

// Row widens row r of w [rows, in] into dst from w's packing, if it has
// one, and says whether it did: an embedding row of a tied head. The
// file's pages of a packed matrix were given back, and reading them again
// faults in far more than the row (the kernel reads around a fault: 128
// random rows of Qwen3-0.6B's Q8_0 table brought 100 MB back).
func Row(w Weight, r, in int, dst []float32) bool {
	switch p := packingOf(w).(type) {
	case *bf12:
		if p != nil && w.Kind == BF16 && p.in == in && r < p.out {
			p.unpackRows(r, r+1, dst[:in])
			return true
		}
	case *x16:
		if p != nil && w.Kind == Quant && p.f == w.Format && p.in == in && r < p.out {
			p.widenRows(r, 1, dst[:in])
			return true
		}
	}
	return false
}

// packed is w's packing, if it has one.
func packed(w Weight, out, in int) (Weight, bool) {
	switch p := packingOf(w).(type) {
	case *bf12:
		if p != nil && w.Kind == BF16 && p.out == out && p.in == in {
			return Weight{Kind: BF12, bf12: p}, true
		}
	case *x16:
		if p != nil && w.Kind == Quant && p.f == w.Format && p.out == out && p.in == in {
			return Weight{Kind: X16, x16: p}, true
		}
	}
	return w, false
}
