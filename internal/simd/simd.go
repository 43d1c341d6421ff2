// Package simd holds the zoo's compute kernels and the machinery that runs
// them: y = x·Wᵀ for activations x [T, in] in float32 and weights W
// [out, in] in their stored type (MulT, MulTFast), and the small kernels
// around the products: attention's scores and weighted rows (dots.go),
// softmax's exp, SiLU and the F16 conversions (exp.go, fast.go).
//
// A weight's Kind picks its kernels:
//
//   - F32, BF16, F16: widened in registers and multiplied in float32
//     (exact); prefill runs tiles of R×C dot products, decode one
//     sequential matrix-vector stream per thread (simd.go).
//   - Quant in exact mode (MulT): llama.cpp's blocks (Q8_0, Q4_0, Q5_0,
//     Q4_K, Q6_K, and the AVX2 widening of Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K,
//     Q5_K, IQ4_XS) dequantized exactly as ggml does and accumulated in
//     float32; the 4- and 5-bit decode kernels look each nibble up in a
//     table of its block's 16 dequantized values.
//   - Quant in fast mode (MulTFast, fast.go, fastgemm.go): llama.cpp's
//     arithmetic, activations quantized to 8 bits and integer dot
//     products; on AVX-512 VNNI, prefill repacks 16 weight rows (8 for
//     the K-quants) at a time so that each lane is an output column.
//   - Coded (coded.go): a BF16 or F32 matrix of a file mapping, packed
//     losslessly in 12 or 28 bits a weight for decode (PackBF16,
//     PackF32).
//   - X16 (x16.go): a Q4_0, Q8_0, Q4_K or Q6_K matrix of a file mapping,
//     regrouped by 16 rows for exact decode (PackQuant).
//   - Panels (panels.go): on AVX2, an F32, BF16 or F16 matrix of a file
//     mapping laid out in panels of 16 rows, for every product.
//
// The inner loops, 183 kernels, are Go assembly generated with avo
// (see _gen, and README.md for which file writes which kernels; the
// generated .s is checked in, so a plain go build needs nothing else):
// AVX-512 where the CPU has it (avx512f and avx512bw; VBMI, VNNI and GFNI
// for the kernels that need them), AVX2 with FMA and F16C otherwise,
// picked at run time through golang.org/x/sys/cpu. Other architectures,
// the purego build tag, and GOZOO_SIMD=off use the same blocking with
// plain Go loops, which CI runs against the golden cases too.
//
// The larger products are split by weight rows over a team of persistent
// workers, one per extra CPU, handed work through a slot they spin on: a
// call starts no goroutine and allocates nothing. During decode an idle
// worker prefetches the weights of the products that come next
// (prefetch.go). docs/performance.md describes the design and its
// measurements.
package simd

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gozoo/gozoo/internal/quant"
)

// Kind is a weight's storage type.
type Kind uint8

const (
	F32 Kind = iota
	BF16
	F16
	// Quant is a block-quantized weight (Format) in Bytes.
	Quant
	// Coded is a BF16 or F32 matrix packed in 4 bits a weight fewer
	// (coded.go), which MulT puts in place of one that PackBF16 or
	// PackF32 packed.
	Coded
	// X16 is a quantized matrix regrouped by 16 rows (x16.go), which
	// MulT puts in place of one that PackQuant packed.
	X16
	// Panels is an F32, BF16 or F16 matrix laid out in panels of 16 rows
	// (panels.go), which MulT puts in place of one that PackF32, PackBF16
	// or PackF16 packed on AVX2.
	Panels
)

// String is the kind's name.
func (k Kind) String() string {
	switch k {
	case F32:
		return "F32"
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case Quant:
		return "Quant"
	case Coded:
		return "Coded"
	case X16:
		return "X16"
	case Panels:
		return "Panels"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// bytes is the storage of n values of w.
func (w Weight) bytes(n int) int {
	switch w.Kind {
	case F32:
		return 4 * n
	case BF16, F16:
		return 2 * n
	case Coded:
		return n / w.coded.in * w.coded.stride
	case X16:
		return n / w.x16.in * w.x16.groupBytes() / 16
	case Panels:
		return n * w.panels.size()
	}
	return n / w.Format.BlockSize() * w.Format.BlockBytes()
}

// Weight is a matrix [rows, cols] in its stored type: F32 in F32s, 16-bit
// kinds in U16s, quantized blocks in Bytes, a packed BF16 or F32 matrix in coded,
// a regrouped quantized one in x16.
type Weight struct {
	Kind   Kind
	F32s   []float32
	U16s   []uint16
	Format quant.Format
	Bytes  []byte
	coded  *coded
	x16    *x16
	panels *panels
	sums   []float32 // a regrouped matrix's exact decode: x's sums over each sub-block (x16Inputs), then on AVX2 each of x's values 8 times
}

// isa is an instruction set with kernels: each computes the R×C dot
// products of R rows of x and C rows of w over k values (k a multiple of
// lanes) into out[i*C+j]; see dispatch_amd64.go.
type isa struct {
	name  string
	lanes int
	tileR int // x rows of the big tile (4 with AVX-512's 32 registers, 3 with AVX2's 16, which also has a 2-row tile)
}

// active is the instruction set in use; nil means plain Go.
var active *isa

// Name says which kernels run: "avx512", "avx2" or "go".
func Name() string {
	if active == nil {
		return "go"
	}
	return active.name
}

func init() {
	if os.Getenv("GOZOO_SIMD") == "off" {
		return
	}
	active = detect()
}

// Force selects plain Go (off) or the best kernels the CPU has (on), for
// tests that check both paths. It is not safe to call while kernels run.
func Force(on bool) {
	if on {
		active = detect()
	} else {
		active = nil
	}
}

// MulT computes y [T, out] = x [T, in] · wᵀ for w [out, in] (on its
// packing, when the caller put it there: Weight.On).
func MulT(y, x []float32, T int, w Weight, out, in int) {
	if w.Kind == X16 && (T == 1 || w.x16.byRows(T)) {
		if n, bcast := x16Inputs(w.x16.f); n > 0 || bcast {
			sp := sumsBuf.Get().(*[]float32)
			defer sumsBuf.Put(sp)
			w.sums = x16RowSums(x, T, in, n, bcast, sp)
		}
	}
	runRows(y, x, T, w, out, in, nil)
}

// runRows splits the weight rows of a product over the caller and the
// team: with acts set, the product of w with activations already
// quantized (fast mode), else with x.
func runRows(y, x []float32, T int, w Weight, out, in int, a *acts) {
	n := min(len(team)+1, runtime.GOMAXPROCS(0), max(1, out/64))
	if T == 1 && w.bytes(out*in) < splitBytes {
		n = 1
	}
	// One caller at a time has the team; any other works alone. Decode
	// takes it even for a product it does alone, to log the product in
	// the decode order that the team prefetches from.
	if len(team) == 0 || (n <= 1 && T > 1) || !teamBusy.CompareAndSwap(false, true) {
		mulRowsAny(y, x, T, w, out, in, 0, out, a)
		return
	}
	defer teamBusy.Store(false)
	if T == 1 {
		order.ran(spanOf(w, out*in))
	}
	if n <= 1 {
		mulRowsAny(y, x, T, w, out, in, 0, out, a)
		return
	}
	// The rows go in chunks that every thread, the caller included, takes
	// from a shared counter until none is left: a static split leaves the
	// caller waiting whenever the other core runs slower (memory, a late
	// start), which a decode profile showed as 10% of its time. Chunks are
	// runs of 4 rows, so tiles stay whole, about 4 per thread.
	chunk := max(4, (out/(4*n)+3)&^3)
	if w.Kind == X16 || w.Kind == Panels {
		chunk = (chunk + 15) &^ 15 // whole groups or panels of 16 rows
	}
	next := &teamNext
	next.Store(0)
	done := &teamDone
	for i := 1; i < n; i++ {
		done.Add(1)
		team[i-1].post(job{y: y, x: x, T: T, w: w, out: out, in: in, r1: chunk, next: next, acts: a, done: done})
	}
	mulChunks(y, x, T, w, out, in, chunk, next, a)
	for spin := 0; done.Load() != 0; spin++ {
		if spin&1023 == 1023 {
			runtime.Gosched()
		}
	}
}

// mulChunks takes chunks of chunk weight rows from next and computes
// them until every row is taken.
func mulChunks(y, x []float32, T int, w Weight, out, in, chunk int, next *atomic.Int64, a *acts) {
	for {
		r0 := int(next.Add(int64(chunk))) - chunk
		if r0 >= out {
			return
		}
		mulRowsAny(y, x, T, w, out, in, r0, min(out, r0+chunk), a)
	}
}

func mulRowsAny(y, x []float32, T int, w Weight, out, in, r0, r1 int, a *acts) {
	if a != nil {
		mulRowsFast(y, T, w, out, in, r0, r1, a)
		return
	}
	mulRows(y, x, T, w, out, in, r0, r1)
}

// splitBytes is the weight size from which a decode product is shared
// with the team: on a 2-core machine sharing beat keeping every product
// on the caller, and since the team prefetches weights between products
// (prefetch.go) it pays from 64 KB (gozoo bench decode runs; the figures
// are in docs/performance.md).
const splitBytes = 64 << 10

// job is one worker's share of a MulT (chunks of r1 weight rows taken
// from next) or of a Parallel task (parts [r0, r1)).
type job struct {
	y, x       []float32
	T, out, in int
	w          Weight
	acts       *acts
	task       Task
	r0, r1     int
	next       *atomic.Int64
	done       *atomic.Int32
}

// Task is work in parts that may run in any order on any thread.
type Task interface{ Part(i int) }

// Parallel runs parts 0..n-1 of t split over the caller and the team,
// and returns when all are done. When another caller has the team, the
// caller runs them alone.
func Parallel(n int, t Task) {
	threads := min(len(team)+1, runtime.GOMAXPROCS(0), n)
	if threads <= 1 || !teamBusy.CompareAndSwap(false, true) {
		for i := 0; i < n; i++ {
			t.Part(i)
		}
		return
	}
	defer teamBusy.Store(false)
	per := (n + threads - 1) / threads
	done := &teamDone
	for i := 1; i < threads; i++ {
		p0, p1 := i*per, min(n, (i+1)*per)
		if p0 >= p1 {
			continue
		}
		done.Add(1)
		team[i-1].post(job{task: t, r0: p0, r1: p1, done: done})
	}
	for i := 0; i < min(n, per); i++ {
		t.Part(i)
	}
	for spin := 0; done.Load() != 0; spin++ {
		if spin&1023 == 1023 {
			runtime.Gosched()
		}
	}
}

// worker is a persistent goroutine that takes jobs through a slot: the
// caller fills it and bumps seq; the worker spins on seq for a while (a
// decode step's products come microseconds apart) and then sleeps until
// woken.
type worker struct {
	seq    atomic.Uint64
	slot   job
	parked atomic.Bool
	wake   chan struct{}
}

// spinFor is how long an idle worker polls before it sleeps.
const spinFor = 200 * time.Microsecond

var (
	team     []*worker
	teamBusy atomic.Bool
	teamDone atomic.Int32 // the team's unfinished jobs
	teamNext atomic.Int64 // the next weight row of a shared MulT
)

func init() {
	for i := 1; i < runtime.NumCPU(); i++ {
		w := &worker{wake: make(chan struct{}, 1)}
		team = append(team, w)
		go w.loop()
	}
}

func (w *worker) post(j job) {
	w.slot = j
	w.seq.Add(1)
	if w.parked.Load() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *worker) loop() {
	var seen uint64
	var pf prefetcher
	first := w == team[0]
	for {
		start := time.Now()
		prefetched := false
		for spin := 0; w.seq.Load() == seen; spin++ {
			if first && pf.step() {
				prefetched = true
				continue
			}
			if spin&1023 != 1023 {
				continue
			}
			if prefetched {
				// Idle time counts from the end of the prefetching.
				start, prefetched = time.Now(), false
				continue
			}
			if time.Since(start) < spinFor {
				runtime.Gosched()
				continue
			}
			w.parked.Store(true)
			if w.seq.Load() == seen {
				<-w.wake
			}
			w.parked.Store(false)
			start = time.Now()
		}
		seen = w.seq.Load()
		j := w.slot
		if j.task != nil {
			for i := j.r0; i < j.r1; i++ {
				j.task.Part(i)
			}
		} else {
			mulChunks(j.y, j.x, j.T, j.w, j.out, j.in, j.r1, j.next, j.acts)
		}
		j.done.Add(-1)
	}
}

// mulRows computes the columns [r0, r1) of y: x against weight rows
// r0..r1-1. Rows of x go in blocks that stay in cache while each tile of 4
// weight rows streams past them.
func mulRows(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	if w.Kind == Coded {
		mulRowsCoded(y, x, T, w, out, in, r0, r1)
		return
	}
	if w.Kind == X16 {
		mulRowsX16(y, x, T, w, out, in, r0, r1)
		return
	}
	if w.Kind == Panels {
		mulRowsPanels(y, x, T, w, out, in, r0, r1)
		return
	}
	if w.Kind == Quant {
		mulRowsQuant(y, x, T, w, out, in, r0, r1)
		return
	}
	k := in
	if active != nil {
		k = in - in%active.lanes
	}
	var tile [16]float32
	if T == 1 {
		// Decode reads every weight once: row after row is one long
		// sequential stream, which the hardware prefetcher follows best
		// (tiles of 4 rows read 4 short streams and ran 1.6x slower).
		if active != nil && k == in {
			asmGemv(&x[0], w, r0*in, in, r1-r0, &y[r0])
			return
		}
		for j := r0; j < r1; j++ {
			dots(&tile, x, 0, 1, w, j, 1, in, k)
			y[j] = tile[0]
		}
		return
	}
	// About 512 KB of x per block: it stays in L2 while every 4-row tile of
	// the weights streams past it, so a prefill chunk reads the weights once.
	tb := max(1, min(T, 131072/in))
	// A 16-bit tile of 4 weight rows is widened to float32 once per block
	// of x, not once per 3 rows of it (the tile's own widening), where
	// the block has enough rows to pay for it.
	var wide []float32
	if (w.Kind == BF16 || w.Kind == F16) && active != nil && k == in && min(T, tb) >= 6 {
		bp := rowBuf.Get().(*[]float32)
		*bp = grow(*bp, 4*in)
		wide = *bp
		defer rowBuf.Put(bp)
	}
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(T, t0+tb)
		j := r0
		for ; j+4 <= r1; j += 4 {
			wt, wj := w, j
			if wide != nil {
				asmWiden16(w, j*in, 4*in, wide)
				wt, wj = Weight{Kind: F32, F32s: wide}, 0
			}
			t := t0
			for _, R := range tileSteps() {
				for ; t+R <= t1; t += R {
					dots(&tile, x, t, R, wt, wj, 4, in, k)
					for i := 0; i < R; i++ {
						copy(y[(t+i)*out+j:(t+i)*out+j+4], tile[i*4:i*4+4])
					}
				}
			}
			for ; t < t1; t++ {
				dots(&tile, x, t, 1, wt, wj, 4, in, k)
				copy(y[t*out+j:t*out+j+4], tile[:4])
			}
		}
		for ; j < r1; j++ {
			for t := t0; t < t1; t++ {
				dots(&tile, x, t, 1, w, j, 1, in, k)
				y[t*out+j] = tile[0]
			}
		}
	}
}

// tileSteps are the row counts of the multi-row tiles, largest first.
func tileSteps() []int {
	switch tileRows() {
	case 4:
		return steps4
	default:
		return steps32
	}
}

var steps4, steps32 = []int{4}, []int{3, 2}

func tileRows() int {
	if active == nil {
		return 4
	}
	return active.tileR
}

// dots fills tile with the R×C dot products of x rows t.. and w rows j..:
// the first k values by the active kernels, the rest in Go.
func dots(tile *[16]float32, x []float32, t, R int, w Weight, j, C, in, k int) {
	if active == nil || k == 0 {
		clear(tile[:R*C])
		k = 0
	} else {
		asmDots(tile, &x[t*in], R, w, j*in, C, in, k)
	}
	if k == in {
		return
	}
	buf := rowBuf.Get().(*[]float32)
	defer rowBuf.Put(buf)
	if cap(*buf) < in-k {
		*buf = make([]float32, in-k)
	}
	wv := (*buf)[:in-k]
	for jj := 0; jj < C; jj++ {
		w.widen(wv, (j+jj)*in+k)
		for i := 0; i < R; i++ {
			tile[i*C+jj] += dot(x[(t+i)*in+k:(t+i+1)*in], wv)
		}
	}
}

var rowBuf = sync.Pool{New: func() any { return new([]float32) }}

// quantGroup is how many quantized rows are dequantized at a time: they
// stay in cache while the float32 kernels run over them.
const quantGroup = 64

// mulRowsQuant is mulRows for block-quantized weights, in exact mode:
// groups of rows are dequantized to float32 (exactly as ggml does) and
// multiplied by the float32 kernels, accumulating in float32.
func mulRowsQuant(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	rb := w.bytes(in)
	if T == 1 && asmQuant(x, w, r0, r1-r0, in, rb, y[r0:r1], nil) {
		return // the fused kernel: one pass over the blocks
	}
	mulRowGroups(y, x, T, w, out, in, r0, r1)
}

// mulRowGroups computes rows [r0, r1) of a quantized or packed w's product
// by widening quantGroup weight rows at a time to float32 and running the
// float32 kernels over them.
func mulRowGroups(y, x []float32, T int, w Weight, out, in, r0, r1 int) {
	bp := rowBuf.Get().(*[]float32)
	defer rowBuf.Put(bp)
	need := quantGroup*in + T*quantGroup
	if cap(*bp) < need {
		*bp = make([]float32, need)
	}
	buf := (*bp)[:quantGroup*in]
	ybuf := (*bp)[quantGroup*in : need]
	for j0 := r0; j0 < r1; j0 += quantGroup {
		g := min(quantGroup, r1-j0)
		w.widenRows(j0, g, in, buf)
		rows := Weight{Kind: F32, F32s: buf[:g*in]}
		if T == 1 {
			mulRows(y[j0:], x, 1, rows, g, in, 0, g)
			continue
		}
		mulRows(ybuf, x, T, rows, g, in, 0, g)
		for t := 0; t < T; t++ {
			copy(y[t*out+j0:t*out+j0+g], ybuf[t*g:(t+1)*g])
		}
	}
}

// widenRows writes rows [j0, j0+g) of a quantized or packed w into dst
// as float32.
func (w Weight) widenRows(j0, g, in int, dst []float32) {
	if w.Kind == Coded {
		w.coded.unpackRows(j0, j0+g, dst)
		return
	}
	if w.Kind == X16 {
		w.x16.widenRows(j0, g, dst)
		return
	}
	rb := w.bytes(in)
	if !asmQuant(nil, w, j0, g, in, rb, nil, dst) {
		for r := 0; r < g; r++ {
			quant.DequantizeRow(w.Format, w.Bytes[(j0+r)*rb:(j0+r+1)*rb], dst[r*in:(r+1)*in])
		}
	}
}

// widen writes w's values from index off into dst.
func (w Weight) widen(dst []float32, off int) {
	switch w.Kind {
	case F32:
		copy(dst, w.F32s[off:])
	case BF16:
		for i, b := range w.U16s[off : off+len(dst)] {
			dst[i] = math.Float32frombits(uint32(b) << 16)
		}
	case F16:
		FromF16(dst, w.U16s[off:off+len(dst)])
	}
}

// FromF16 widens the F16 bits in src into dst (exact): by the vector
// kernel where one runs (an F16 KV cache's rows in attention), the rest
// through halfTable.
func FromF16(dst []float32, src []uint16) {
	src = src[:len(dst)]
	i := 0
	if n := len(dst) &^ 7; n > 0 && active != nil {
		asmWiden16(Weight{Kind: F16, U16s: src}, 0, n, dst)
		i = n
	}
	for ; i < len(dst); i++ {
		dst[i] = halfTable[src[i]]
	}
}

// dot is a plain-Go dot product with four partial sums.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
