//go:build !purego

package simd

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/gozoo/gozoo/internal/quant"
)

//go:generate sh -c "cd _gen && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64.go -pkg simd"

var (
	avx512 = &isa{name: "avx512", lanes: 16, tileR: 4}
	avx2   = &isa{name: "avx2", lanes: 8, tileR: 3}
)

// useGFNI picks the exact Q6_K decode kernel that builds its 6-bit values
// with GFNI's bit moves (AVX-512 machines since Ice Lake, and Zen 4); tests
// clear it to check the plain AVX-512 kernel too.
var useGFNI = cpu.X86.HasAVX512GFNI

// canCoded says whether the coded matrices' kernels (BF12, F28) run
// here: AVX-512 with VBMI's byte permute (Ice Lake and later, Zen 4).
func canCoded() bool { return active == avx512 && cpu.X86.HasAVX512VBMI }

// canPanels says whether float matrices are laid out in panels here
// (panels.go): the AVX2 kernel set. AVX-512 machines keep their 16-lane
// dot tiles and coded packings.
func canPanels() bool { return active == avx2 }

// canX16 says whether the kernels of regrouped matrices run here.
func canX16() bool { return active == avx512 }

// exactX16OK says whether exact decode has a kernel for f regrouped here:
// x16AVX2's (on fast mode's layouts) on AVX2 and AVX-512, where x16Exact's
// formats run their own AVX-512 kernels.
func exactX16OK(f quant.Format) bool {
	return active == avx512 && x16Exact[f] || (active == avx512 || active == avx2) && x16AVX2[f]
}

// avx2X16 says whether f's regrouped exact products run the AVX2 kernels
// here: on AVX2, and on AVX-512 for the formats without AVX-512 kernels.
func avx2X16(f quant.Format) bool {
	return x16AVX2[f] && (active == avx2 || active == avx512 && !x16Exact[f])
}

// x16Inputs is what the exact regrouped kernel for f reads besides x: x's
// sums over each n values (none for n = 0), and with bcast then each of
// x's values eight times.
func x16Inputs(f quant.Format) (n int, bcast bool) {
	switch {
	case avx2X16(f):
		return x16SumAVX2[f], true
	case active == avx512:
		return x16Sum[f], false
	}
	return 0, false
}

// fastX16OK says whether fast mode decodes f from an X16 regrouping here
// (fastX16*AVX2, on AVX2 machines: AVX-512 ones run the VNNI kernels; Q4_K
// only on VNNI, fastX16Q4_KVNNI and fastGemmX16Q4_Kx*VNNI).
func fastX16OK(f quant.Format) bool {
	switch f {
	case quant.Q4_K, quant.Q5_0:
		return fastGemmOK()
	case quant.Q4_0, quant.IQ4_NL, quant.Q8_0, quant.Q4_1, quant.Q5_1, quant.IQ4_XS, quant.Q2_K, quant.Q3_K:
		return active == avx2 || active == avx512
	}
	return false
}

// stagesX16 says whether fast prefill stages f's regrouped groups
// (asmStageX16); the others rebuild rows in the file's layout.
func stagesX16(f quant.Format) bool {
	return f == quant.Q4_0 || f == quant.IQ4_NL || f == quant.Q8_0
}

// gemmKernels are the broadcast micro-kernels by rows (1..6) and column
// block (16, 8).
var gemmKernels = [6][2]func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha float32, add int){
	{gemm1x16F32AVX2, gemm1x8F32AVX2}, {gemm2x16F32AVX2, gemm2x8F32AVX2},
	{gemm3x16F32AVX2, gemm3x8F32AVX2}, {gemm4x16F32AVX2, gemm4x8F32AVX2},
	{gemm5x16F32AVX2, gemm5x8F32AVX2}, {gemm6x16F32AVX2, gemm6x8F32AVX2},
}

// gemmKernels512 are the 512-bit micro-kernels of 16 columns by rows
// (1..8).
var gemmKernels512 = [8]func(a *float32, lda int, b *float32, ldb int, k int, c *float32, ldc int, alpha float32, add int){
	gemm1x16F32AVX512, gemm2x16F32AVX512, gemm3x16F32AVX512, gemm4x16F32AVX512,
	gemm5x16F32AVX512, gemm6x16F32AVX512, gemm7x16F32AVX512, gemm8x16F32AVX512,
}

// gemmTile is the most rows asmGemm takes at once for N columns.
func gemmTile(N int) int {
	if active == avx512 && N == 16 {
		return 8
	}
	return 6
}

// asmGemm runs the R×N micro-kernel (Gemm checks the bounds).
func asmGemm(R, N int, a *float32, lda int, b *float32, ldb, k int, c *float32, ldc int, alpha float32, add bool) {
	acc := 0
	if add {
		acc = 1
	}
	if active == avx512 && N == 16 {
		gemmKernels512[R-1](a, lda, b, ldb, k, c, ldc, alpha, acc)
		return
	}
	gemmKernels[R-1][2-N/8](a, lda, b, ldb, k, c, ldc, alpha, acc)
}

// panelKernels are panelMul{R}x1 by kind (F32, BF16, F16) and rows, then
// panelMul1x4 at [kind][6].
var panelKernels = [3][7]func(x *float32, ldx int, w unsafe.Pointer, ps int, k int, y *float32, ldy int){
	{wrapP32(panelMul1x1F32AVX2), wrapP32(panelMul2x1F32AVX2), wrapP32(panelMul3x1F32AVX2), wrapP32(panelMul4x1F32AVX2), wrapP32(panelMul5x1F32AVX2), wrapP32(panelMul6x1F32AVX2), wrapP32(panelMul1x4F32AVX2)},
	{wrapP16(panelMul1x1BF16AVX2), wrapP16(panelMul2x1BF16AVX2), wrapP16(panelMul3x1BF16AVX2), wrapP16(panelMul4x1BF16AVX2), wrapP16(panelMul5x1BF16AVX2), wrapP16(panelMul6x1BF16AVX2), wrapP16(panelMul1x4BF16AVX2)},
	{wrapP16(panelMul1x1F16AVX2), wrapP16(panelMul2x1F16AVX2), wrapP16(panelMul3x1F16AVX2), wrapP16(panelMul4x1F16AVX2), wrapP16(panelMul5x1F16AVX2), wrapP16(panelMul6x1F16AVX2), wrapP16(panelMul1x4F16AVX2)},
}

func wrapP32(f func(*float32, int, *float32, int, int, *float32, int)) func(*float32, int, unsafe.Pointer, int, int, *float32, int) {
	return func(x *float32, ldx int, w unsafe.Pointer, ps, k int, y *float32, ldy int) {
		f(x, ldx, (*float32)(w), ps, k, y, ldy)
	}
}

func wrapP16(f func(*float32, int, *uint16, int, int, *float32, int)) func(*float32, int, unsafe.Pointer, int, int, *float32, int) {
	return func(x *float32, ldx int, w unsafe.Pointer, ps, k int, y *float32, ldy int) {
		f(x, ldx, (*uint16)(w), ps, k, y, ldy)
	}
}

// asmPanelMul runs panelMul{R}x{NP} (NP 1, or 4 with R 1) for a panel
// matrix of kind k (mulRowsPanels checks the bounds).
func asmPanelMul(k Kind, R, NP int, x *float32, ldx int, w unsafe.Pointer, ps, in int, y *float32, ldy int) {
	i := R - 1
	if NP == 4 {
		i = 6
	}
	panelKernels[k][i](x, ldx, w, ps, in, y, ldy)
}

// asmStageX16 stages half h (rows 8h..8h+7) of regrouped group g of p
// into st for asmDotActs4Staged8.
func asmStageX16(p *x16, g, h int, st []byte) {
	wp, nb := &p.data[g*p.groupBytes()], p.in/32
	switch p.f {
	case quant.Q4_0:
		fastStageX16Q4_0AVX2(wp, h, nb, &st[0])
	case quant.IQ4_NL:
		fastStageX16IQ4_NLAVX2(wp, h, nb, &st[0])
	case quant.Q8_0:
		fastStageX16Q8_0AVX2(wp, h, nb, &st[0])
	default:
		panic("simd: no staging of regrouped " + p.f.String())
	}
}

// asmBroadcast writes each of x's values eight times into dst.
func asmBroadcast(x, dst []float32) bool {
	if active == nil || len(x) == 0 || len(dst) < 8*len(x) {
		return false
	}
	x16BroadcastAVX2(&x[0], len(x), &dst[0])
	return true
}

// canGather says whether x16Gather8AVX2 runs here.
func canGather() bool { return active != nil }

// asmGatherX16 writes the values of rows r0..r0+7 (half a group) of p
// into the rows at dst (rb bytes apart), vals bytes into each block of the
// file's layout; false where the kernel does not run.
func asmGatherX16(p *x16, r0, vals int, dst []byte, rb int) bool {
	nb := p.in / p.f.BlockSize()
	if active == nil || r0%8 != 0 || p.words%4 != 0 || len(dst) < 8*rb || nb*p.f.BlockBytes() != rb {
		return false
	}
	src := &p.data[r0/16*p.groupBytes()+p.head+32*(r0%16/8)]
	x16Gather8AVX2(src, p.blockBytes(), p.words/4, nb, &dst[vals], rb, p.f.BlockBytes())
	return true
}

// asmFastX16 computes y[r0:r1] (whole groups of 16) from the regrouped p
// and Q8_0 activations (corr: −8·Σx a block for Q4_0; with VNNI, 16·Σx
// for Q5_0 and 128·Σx for Q8_0 and IQ4_NL), Q8_1 ones for
// Q4_1 and Q5_1 (d: scale and sum pairs), or Q8_K ones (sums: of every
// 16) for IQ4_XS, Q2_K and Q3_K; false where no kernel takes p's format.
func asmFastX16(p *x16, q []int8, d []float32, sums []int16, corr []int32, r0, r1 int, y []float32) bool {
	if active == nil || r0%16 != 0 || r1%16 != 0 || r1 <= r0 {
		return false
	}
	wp, groups, nb := &p.data[r0/16*p.groupBytes()], (r1-r0)/16, p.in/32
	switch {
	case p.f == quant.Q4_0 && len(corr) == nb:
		fastX16Q4_0AVX2(wp, groups, nb, &q[0], &d[0], &corr[0], &y[r0])
	case p.f == quant.IQ4_NL && len(corr) == nb && fastGemmOK():
		fastX16IQ4_NLVNNI(wp, groups, nb, &q[0], &d[0], &corr[0], &y[r0])
	case p.f == quant.IQ4_NL:
		fastX16IQ4_NLAVX2(wp, groups, nb, &q[0], &d[0], nil, &y[r0])
	case p.f == quant.Q8_0 && len(corr) == nb && fastGemmOK():
		fastX16Q8_0VNNI(wp, groups, nb, &q[0], &d[0], &corr[0], &y[r0])
	case p.f == quant.Q8_0:
		fastX16Q8_0AVX2(wp, groups, nb, &q[0], &d[0], nil, &y[r0])
	case p.f == quant.Q4_1 && len(d) == 2*nb:
		fastX16Q4_1AVX2(wp, groups, nb, &q[0], &d[0], nil, &y[r0])
	case p.f == quant.Q5_1 && len(d) == 2*nb:
		fastX16Q5_1AVX2(wp, groups, nb, &q[0], &d[0], nil, &y[r0])
	case p.f == quant.IQ4_XS && len(d) == nb/8:
		fastX16IQ4_XSAVX2(wp, groups, nb/8, &q[0], &d[0], &y[r0])
	case p.f == quant.Q2_K && len(d) == nb/8 && len(sums) == nb*2:
		fastX16Q2_KAVX2(wp, groups, nb/8, &q[0], &d[0], &sums[0], &y[r0])
	case p.f == quant.Q3_K && len(d) == nb/8 && len(sums) == nb*2:
		fastX16Q3_KAVX2(wp, groups, nb/8, &q[0], &d[0], &sums[0], &y[r0])
	case p.f == quant.Q4_K && len(d) == nb/8 && len(sums) == nb*2 && fastGemmOK():
		fastX16Q4_KVNNI(wp, groups, nb/8, &q[0], &d[0], &sums[0], &y[r0])
	case p.f == quant.Q5_0 && len(d) == nb && len(corr) == nb && fastGemmOK():
		fastX16Q5_0VNNI(wp, groups, nb, &q[0], &d[0], &corr[0], &y[r0])
	default:
		return false
	}
	return true
}

// x16Panels is the kernel that widens a group of each format's AVX2
// regrouping into a panel (x16Panel*AVX2): every format that regroups.
var x16Panels = map[quant.Format]func(w *byte, blocks int, dst *float32){
	quant.Q4_0: x16PanelQ4_0AVX2, quant.Q8_0: x16PanelQ8_0AVX2, quant.Q5_1: x16PanelQ5_1AVX2, quant.Q5_0: x16PanelQ5_0AVX2,
	quant.IQ4_NL: x16PanelIQ4_NLAVX2, quant.IQ4_XS: x16PanelIQ4_XSAVX2, quant.Q2_K: x16PanelQ2_KAVX2,
	quant.Q3_K: x16PanelQ3_KAVX2, quant.Q4_K: x16PanelQ4_KAVX2, quant.Q5_K: x16PanelQ5_KAVX2, quant.Q6_K: x16PanelQ6_KAVX2,
}

// canPanelX16 says whether a kernel widens a group of f's regrouping into
// a panel here.
func canPanelX16(f quant.Format) bool {
	return (active == avx2 || active == avx512) && x16Panels[f] != nil
}

// asmPanelX16 widens group g of p into the panel dst (16·in values).
func asmPanelX16(p *x16, g int, dst []float32) {
	if !canPanelX16(p.f) || len(dst) < 16*p.in {
		panic("simd: asmPanelX16 without its kernel")
	}
	k := x16Panels[p.f]
	if p.f == quant.Q8_0 && active == avx512 {
		k = x16PanelQ8_0AVX512
	}
	k(&p.data[g*p.groupBytes()], p.in/p.f.BlockSize(), &dst[0])
}

// canGemmX16 says whether the exact few-row kernels
// (gemm{Q8_0,Q4_K,Q5_0}x16x*AVX512) run here for f.
func canGemmX16(f quant.Format) bool {
	return (f == quant.Q8_0 || f == quant.Q4_K || f == quant.Q5_0) && active == avx512
}

// asmGemmX16 computes y[t*ldy + j], j in [r0, r1) (whole groups), for R
// (2 to 4) rows of x (and Q4_K's sums, per floats a row) against the
// regrouped p, if the kernels run here.
func asmGemmX16(p *x16, x, sums []float32, per, R, r0, r1 int, y []float32, ldy int) bool {
	if !canGemmX16(p.f) || R < 2 || R > 4 || r0 == r1 || len(x) < R*p.in || len(y) < (R-1)*ldy+r1 {
		return false
	}
	w, groups := &p.data[r0/16*p.groupBytes()], (r1-r0)/16
	switch p.f {
	case quant.Q8_0:
		k := [...]func(x *float32, ldx int, w *byte, blocks int, groups int, y *float32, ldy int){gemmQ8_0x16x2AVX512, gemmQ8_0x16x3AVX512, gemmQ8_0x16x4AVX512}[R-2]
		k(&x[0], p.in, w, p.in/32, groups, &y[r0], ldy)
	case quant.Q5_0:
		k := [...]func(x *float32, ldx int, w *byte, blocks int, groups int, y *float32, ldy int){gemmQ5_0x16x2AVX512, gemmQ5_0x16x3AVX512, gemmQ5_0x16x4AVX512}[R-2]
		k(&x[0], p.in, w, p.in/32, groups, &y[r0], ldy)
	case quant.Q4_K:
		if per < p.in/32 || len(sums) < (R-1)*per+p.in/32 {
			return false
		}
		k := [...]func(x *float32, ldx int, sums *float32, lds int, w *byte, blocks int, groups int, y *float32, ldy int){gemmQ4_Kx16x2AVX512, gemmQ4_Kx16x3AVX512, gemmQ4_Kx16x4AVX512}[R-2]
		k(&x[0], p.in, &sums[0], per, w, p.in/256, groups, &y[r0], ldy)
	}
	return true
}

// asmGemvX16 computes y[r] for rows [r0, r1) of p, whole groups of 16,
// if the kernel runs here.
// (sums: x's sums over each sub-block, for the K-quants).
func asmGemvX16(p *x16, x, sums []float32, r0, r1 int, y []float32) bool {
	n, bcast := x16Inputs(p.f)
	ns := 0 // x's sums, before its broadcast values
	if n > 0 {
		ns = p.in / n
	}
	if !exactX16OK(p.f) || r0 == r1 || len(sums) < ns || bcast && len(sums) < ns+8*p.in {
		return false
	}
	_ = y[r1-1]
	w := &p.data[r0/16*p.groupBytes()]
	switch p.f {
	case quant.Q4_0:
		if bcast {
			gemvX16Q4_0AVX2(&sums[ns], &sums[0], w, p.in/32, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ4_0x16AVX512(&x[0], w, p.in/32, (r1-r0)/16, &y[r0])
	case quant.Q8_0:
		if bcast {
			gemvX16Q8_0AVX2(&sums[ns], w, p.in/32, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ8_0x16AVX512(&x[0], w, p.in/32, (r1-r0)/16, &y[r0])
	case quant.Q4_K:
		if bcast {
			gemvX16Q4_KAVX2(&sums[ns], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ4_Kx16AVX512(&x[0], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
	case quant.Q6_K:
		if bcast {
			gemvX16Q6_KAVX2(&sums[ns], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ6_Kx16AVX512(&x[0], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
	case quant.Q2_K:
		if bcast {
			gemvX16Q2_KAVX2(&sums[ns], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ2_Kx16AVX512(&x[0], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
	case quant.Q3_K:
		if bcast {
			gemvX16Q3_KAVX2(&sums[ns], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ3_Kx16AVX512(&x[0], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
	case quant.Q5_1:
		if bcast {
			gemvX16Q5_1AVX2(&sums[ns], &sums[0], w, p.in/32, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ5_1x16AVX512(&x[0], &sums[0], w, p.in/32, (r1-r0)/16, &y[r0])
	case quant.Q5_0:
		gemvQ5_0x16AVX512(&x[0], w, p.in/32, (r1-r0)/16, &y[r0])
	case quant.Q5_K:
		if bcast {
			gemvX16Q5_KAVX2(&sums[ns], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvQ5_Kx16AVX512(&x[0], &sums[0], w, p.in/256, (r1-r0)/16, &y[r0])
	case quant.IQ4_NL:
		if bcast {
			gemvX16IQ4_NLAVX2(&sums[ns], w, p.in/32, (r1-r0)/16, &y[r0])
			break
		}
		gemvIQ4_NLx16AVX512(&x[0], w, p.in/32, (r1-r0)/16, &y[r0])
	case quant.IQ4_XS:
		if bcast {
			gemvX16IQ4_XSAVX2(&sums[ns], w, p.in/256, (r1-r0)/16, &y[r0])
			break
		}
		gemvIQ4_XSx16AVX512(&x[0], w, p.in/256, (r1-r0)/16, &y[r0])
	default:
		return false
	}
	return true
}

// asmGemvCoded computes y[r] for rows [r0, r1) of p without its
// exceptions, if the kernel runs here.
func asmGemvCoded(p *coded, x []float32, r0, r1 int, y []float32) bool {
	if !canCoded() || r0 == r1 {
		return false
	}
	if p.low == 1 {
		gemvBF12AVX512(&x[0], &p.data[r0*p.stride], p.stride, p.in/32, r1-r0, &y[r0])
	} else {
		gemvF28AVX512(&x[0], &p.data[r0*p.stride], p.stride, p.in/32, r1-r0, &y[r0])
	}
	return true
}

// gemmCoded is the products of 2..codedRowsMax rows of x by coding
// (BF12, F28) and row count.
var gemmCoded = [2][codedRowsMax + 1]func(x *float32, ldx int, w *byte, ldw int, chunks int, rows int, y *float32, ldy int){
	{nil, nil, gemmBF12x2AVX512, gemmBF12x3AVX512, gemmBF12x4AVX512, gemmBF12x5AVX512, gemmBF12x6AVX512, gemmBF12x7AVX512, gemmBF12x8AVX512},
	{nil, nil, gemmF28x2AVX512, gemmF28x3AVX512, gemmF28x4AVX512, gemmF28x5AVX512, gemmF28x6AVX512, gemmF28x7AVX512, gemmF28x8AVX512},
}

// asmGemmCoded computes y[t, r] = x_t · w_r (y of row stride ldy) for the
// T rows of x and rows [r0, r1) of p without its exceptions, each product
// gemv{BF12,F28}'s bit for bit, if the kernel runs here.
func asmGemmCoded(p *coded, x []float32, T, r0, r1 int, y []float32, ldy int) bool {
	if !canCoded() || r0 == r1 || T < 2 || T >= len(gemmCoded[0]) {
		return false
	}
	_, _ = x[T*p.in-1], y[(T-1)*ldy+r1-1]
	code := 0
	if p.low != 1 {
		code = 1
	}
	gemmCoded[code][T](&x[0], p.in, &p.data[r0*p.stride], p.stride, p.in/32, r1-r0, &y[r0], ldy)
	return true
}

// asmUnpackCoded widens rows [r0, r1) of p into dst without its
// exceptions, if the kernel runs here.
func asmUnpackCoded(p *coded, r0, r1 int, dst []float32) bool {
	if !canCoded() || r0 == r1 {
		return false
	}
	_ = dst[(r1-r0)*p.in-1]
	if p.low == 1 {
		unpackBF12AVX512(&p.data[r0*p.stride], p.stride, p.in/32, r1-r0, &dst[0])
	} else {
		unpackF28AVX512(&p.data[r0*p.stride], p.stride, p.in/32, r1-r0, &dst[0])
	}
	return true
}

// detect picks AVX-512, else AVX2 with FMA and F16C, else nothing.
func detect() *isa {
	switch {
	case hasAVX512():
		return avx512
	case hasAVX2():
		return avx2
	}
	return nil
}

// hasAVX2 says whether the AVX2 kernels (*AVX2, prefetchLines) run here:
// they use AVX2, FMA and F16C, VEX-encoded only (TestAVX2KernelsVEX).
func hasAVX2() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C }

// hasAVX512 says whether the AVX-512 kernels run here: F for the
// arithmetic, BW for the 16-bit loads, DQ and VL that most of them also
// use, BMI1 (quantQ8_KActsAVX512's TZCNT), and the AVX2 set, since fast
// mode runs the AVX2 kernels on AVX-512 machines too and the AVX-512
// kernels use AVX2 and F16C instructions. Every AVX-512 CPU with BW has
// the rest; the checks guard against hypervisors that hide features.
// (GFNI, VBMI and VNNI are checked where their kernels are picked.)
func hasAVX512() bool {
	x := &cpu.X86
	return x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasBMI1 && hasAVX2()
}

// asmDots runs the active kernel for an R×C tile at weight offset w0. Each
// kernel is called directly, so the compiler sees it does not keep its
// pointers and tile stays on the stack.
func asmDots(tile *[16]float32, x *float32, R int, w Weight, w0, C, in, k int) {
	asmDotsLD(tile, x, in, R, w, w0, in, C, k)
}

// asmDotsLD is asmDots with separate row strides for x and w.
func asmDotsLD(tile *[16]float32, x *float32, ldx, R int, w Weight, w0, ldw, C, k int) {
	o := &tile[0]
	if C == 1 { // one dot product: the matrix-vector kernel over one row
		asmGemvK(x, w, w0, ldw, k, 1, o)
		return
	}
	if active == avx512 {
		switch w.Kind {
		case F32:
			wp := &w.F32s[w0]
			switch {
			case R == 4:
				tile4x4F32AVX512(x, ldx, wp, ldw, k, o)
			case C == 4:
				tile1x4F32AVX512(x, ldx, wp, ldw, k, o)
			}
		case BF16:
			wp := &w.U16s[w0]
			switch {
			case R == 4:
				tile4x4BF16AVX512(x, ldx, wp, ldw, k, o)
			case C == 4:
				tile1x4BF16AVX512(x, ldx, wp, ldw, k, o)
			}
		case F16:
			wp := &w.U16s[w0]
			switch {
			case R == 4:
				tile4x4F16AVX512(x, ldx, wp, ldw, k, o)
			case C == 4:
				tile1x4F16AVX512(x, ldx, wp, ldw, k, o)
			}
		}
		return
	}
	switch w.Kind {
	case F32:
		wp := &w.F32s[w0]
		switch {
		case R == 3:
			tile3x4F32AVX2(x, ldx, wp, ldw, k, o)
		case R == 2:
			tile2x4F32AVX2(x, ldx, wp, ldw, k, o)
		case C == 4:
			tile1x4F32AVX2(x, ldx, wp, ldw, k, o)
		}
	case BF16:
		wp := &w.U16s[w0]
		switch {
		case R == 3:
			tile3x4BF16AVX2(x, ldx, wp, ldw, k, o)
		case R == 2:
			tile2x4BF16AVX2(x, ldx, wp, ldw, k, o)
		case C == 4:
			tile1x4BF16AVX2(x, ldx, wp, ldw, k, o)
		}
	case F16:
		wp := &w.U16s[w0]
		switch {
		case R == 3:
			tile3x4F16AVX2(x, ldx, wp, ldw, k, o)
		case R == 2:
			tile2x4F16AVX2(x, ldx, wp, ldw, k, o)
		case C == 4:
			tile1x4F16AVX2(x, ldx, wp, ldw, k, o)
		}
	}
}

// asmGemv runs the active matrix-vector kernel over rows weight rows from
// offset w0.
func asmGemv(x *float32, w Weight, w0, in, rows int, y *float32) { asmGemvK(x, w, w0, in, in, rows, y) }

// asmGemvK is asmGemv over the first k values of rows of stride ldw.
func asmGemvK(x *float32, w Weight, w0, ldw, k, rows int, y *float32) {
	in := ldw
	avx := active == avx512
	switch w.Kind {
	case F32:
		if avx {
			gemvF32AVX512(x, &w.F32s[w0], in, k, rows, y)
		} else {
			gemvF32AVX2(x, &w.F32s[w0], in, k, rows, y)
		}
	case BF16:
		if avx {
			gemvBF16AVX512(x, &w.U16s[w0], in, k, rows, y)
		} else {
			gemvBF16AVX2(x, &w.U16s[w0], in, k, rows, y)
		}
	case F16:
		if avx {
			gemvF16AVX512(x, &w.U16s[w0], in, k, rows, y)
		} else {
			gemvF16AVX2(x, &w.U16s[w0], in, k, rows, y)
		}
	}
}

// weighWidths are the column blocks of the weighRows kernels, widest first.
func weighWidths() []int {
	if active == avx512 {
		return []int{128, 64}
	}
	return []int{64, 32}
}

func asmWeigh(width int, p *float32, v Weight, off, ldv, rows int, out *float32) {
	// Direct calls, not a table of functions: through a function value
	// the compiler cannot see that the kernels keep no pointer, and the
	// callers' stack buffers would move to the heap.
	if v.Kind == F16 {
		vp := &v.U16s[off]
		switch {
		case active == avx512 && width == 128:
			weighRows128F16AVX512(p, vp, ldv, rows, out)
		case active == avx512:
			weighRows64F16AVX512(p, vp, ldv, rows, out)
		case width == 64:
			weighRows64F16AVX2(p, vp, ldv, rows, out)
		default:
			weighRows32F16AVX2(p, vp, ldv, rows, out)
		}
		return
	}
	vp := &v.F32s[off]
	switch {
	case active == avx512 && width == 128:
		weighRows128AVX512(p, vp, ldv, rows, out)
	case active == avx512:
		weighRows64AVX512(p, vp, ldv, rows, out)
	case width == 64:
		weighRows64AVX2(p, vp, ldv, rows, out)
	default:
		weighRows32AVX2(p, vp, ldv, rows, out)
	}
}

// asmQuant runs the active kernel for rows of a Q8_0 or Q4_0 weight from
// row r0 (rb bytes a row, in values): a matrix-vector product into y when
// x is set, else the dequantized rows into dst. It reports false for
// formats without a kernel.
func asmQuant(x []float32, w Weight, r0, rows, in, rb int, y, dst []float32) bool {
	if active == nil || rows == 0 {
		return false
	}
	blocks := in / 32
	wp := &w.Bytes[r0*rb]
	if x != nil && active == avx512 && (w.Format == quant.Q6_K || w.Format == quant.Q4_K) {
		switch {
		case w.Format == quant.Q6_K && useGFNI:
			gemvQ6_KGFNI(&x[0], wp, rb, in/256, rows, &y[0])
		case w.Format == quant.Q6_K:
			gemvQ6_KAVX512(&x[0], wp, rb, in/256, rows, &y[0])
		default:
			gemvQ4_KAVX512(&x[0], wp, rb, in/256, rows, &halfTable[0], &y[0])
		}
		return true
	}
	if x != nil && gemvAVX2(x, w.Format, wp, rb, in, rows, y) {
		return true
	}
	if active == avx512 && w.Format == quant.Q5_0 {
		if x != nil {
			gemvQ5_0AVX512(&x[0], wp, rb, blocks, rows, &halfTable[0], &y[0])
		} else {
			dequantQ5_0AVX512(wp, rb, blocks, rows, &q5Shifts[0], &dst[0])
		}
		return true
	}
	if x == nil && active == avx512 && (w.Format == quant.Q6_K || w.Format == quant.Q4_K) {
		// Rows of whole super-blocks lie one after another: one call.
		if w.Format == quant.Q6_K {
			dequantQ6_KAVX512(wp, rows*in/256, &dst[0])
		} else {
			dequantQ4_KAVX512(wp, rows*in/256, &dst[0])
		}
		return true
	}
	if x == nil {
		// The formats with only a widening kernel: rows of whole blocks
		// lie one after another, so one call (exact decode widens groups
		// of rows and runs the float32 kernels, mulRowGroups).
		n := rows * in / w.Format.BlockSize()
		switch w.Format {
		case quant.Q4_1:
			dequantQ4_1AVX2(wp, n, &dst[0])
			return true
		case quant.Q5_1:
			dequantQ5_1AVX2(wp, n, &dst[0])
			return true
		case quant.Q2_K:
			dequantQ2_KAVX2(wp, n, &dst[0])
			return true
		case quant.Q3_K:
			dequantQ3_KAVX2(wp, n, &dst[0])
			return true
		case quant.Q5_K:
			dequantQ5_KAVX2(wp, n, &dst[0])
			return true
		case quant.IQ4_XS:
			dequantIQ4_XSAVX2(wp, n, &dst[0])
			return true
		}
	}
	if w.Format == quant.IQ4_NL {
		// AVX2 kernels, which AVX-512 machines run too.
		if x != nil {
			gemvIQ4_NLAVX2(&x[0], wp, rb, blocks, rows, &y[0])
		} else {
			dequantIQ4_NLAVX2(wp, rb, blocks, rows, &dst[0])
		}
		return true
	}
	if x == nil && active == avx2 && w.Format == quant.Q5_0 {
		dequantQ5_0AVX2(wp, rb, blocks, rows, &q5Shifts[0], &dst[0])
		return true
	}
	if x == nil && active == avx2 && (w.Format == quant.Q6_K || w.Format == quant.Q4_K) {
		if w.Format == quant.Q6_K {
			dequantQ6_KAVX2(wp, rows*in/256, &dst[0])
		} else {
			dequantQ4_KAVX2(wp, rows*in/256, &dst[0])
		}
		return true
	}
	switch {
	case w.Format == quant.Q8_0 && active == avx512 && x != nil:
		gemvQ8_0AVX512(&x[0], wp, rb, blocks, rows, &halfTable[0], &y[0])
	case w.Format == quant.Q8_0 && active == avx512:
		dequantQ8_0AVX512(wp, rb, blocks, rows, &dst[0])
	case w.Format == quant.Q4_0 && active == avx512 && x != nil:
		gemvQ4_0AVX512(&x[0], wp, rb, blocks, rows, &halfTable[0], &y[0])
	case w.Format == quant.Q4_0 && active == avx512:
		dequantQ4_0AVX512(wp, rb, blocks, rows, &dst[0])
	case w.Format == quant.Q8_0 && x != nil:
		gemvQ8_0AVX2(&x[0], wp, rb, blocks, rows, &y[0])
	case w.Format == quant.Q8_0:
		dequantQ8_0AVX2(wp, rb, blocks, rows, &dst[0])
	case w.Format == quant.Q4_0 && x != nil:
		gemvQ4_0AVX2(&x[0], wp, rb, blocks, rows, &y[0])
	case w.Format == quant.Q4_0:
		dequantQ4_0AVX2(wp, rb, blocks, rows, &dst[0])
	default:
		return false
	}
	return true
}

// gemvAVX2 runs exact decode fused with dequantization for the formats
// whose matrix-vector kernel is the AVX2 one on every CPU (the ones
// without an AVX-512 kernel), and for Q4_K and Q6_K on AVX2 machines.
func gemvAVX2(x []float32, f quant.Format, wp *byte, rb, in, rows int, y []float32) bool {
	switch f {
	case quant.Q4_1:
		gemvQ4_1AVX2(&x[0], wp, rb, in/32, rows, &y[0])
	case quant.Q5_1:
		gemvQ5_1AVX2(&x[0], wp, rb, in/32, rows, &y[0])
	case quant.Q2_K:
		gemvQ2_KAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	case quant.Q3_K:
		gemvQ3_KAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	case quant.Q5_K:
		gemvQ5_KAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	case quant.IQ4_XS:
		gemvIQ4_XSAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	case quant.Q4_K:
		if active != avx2 {
			return false
		}
		gemvQ4_KAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	case quant.Q6_K:
		if active != avx2 {
			return false
		}
		gemvQ6_KAVX2(&x[0], wp, rb, in/256, rows, &y[0])
	default:
		return false
	}
	return true
}

// supported lists the instruction sets this CPU runs, best first, for
// tests that check every kernel.
func supported() []*isa {
	var out []*isa
	if hasAVX512() {
		out = append(out, avx512)
	}
	if hasAVX2() {
		out = append(out, avx2)
	}
	return out
}

// q5Shifts are the per-lane shifts that bring each Q5_0 value's fifth bit
// down from the block's 32-bit qh.
var q5Shifts = func() (s [32]uint32) {
	for i := range s {
		s[i] = uint32(i)
	}
	return s
}()

// asmQuantizeActs quantizes one row of activations x for fast mode with
// the active kernels, as quant.QuantizeActs does: Q8_K super-blocks (with
// their sums of 16) for the K-quants, Q8_1 blocks for Q4_1 and Q5_1, Q8_0
// blocks for the Q8_0 family, then with corr non-empty offset times each
// block's sum there and with lanes non-empty -offset times the sum of
// every four values. False when no kernel does it.
func asmQuantizeActs(f quant.Format, x []float32, q []int8, d []float32, sums []int16, corr, lanes []int32, offset int32) bool {
	if active == nil || len(x) < quant.ActBlock(f) {
		return false
	}
	if quant.ActScales(f) == 2 {
		if len(corr) > 0 || len(lanes) > 0 {
			return false // no Q8_1 kernel takes them
		}
		quantQ8_1ActsAVX2(&x[0], len(x)/32, &q[0], &d[0])
		return true
	}
	if quant.KQuant(f) {
		if active == avx512 {
			quantQ8_KActsAVX512(&x[0], len(x)/256, &q[0], &d[0], &sums[0])
		} else {
			quantQ8_KActsAVX2(&x[0], len(x)/256, &q[0], &d[0], &sums[0])
		}
		return true
	}
	if active != avx512 {
		quantQ8_0ActsAVX2(&x[0], len(x)/32, &q[0], &d[0])
		if len(corr) > 0 {
			blockSums(corr, q, offset)
		}
		if len(lanes) > 0 {
			laneSums(lanes, q, -offset)
		}
		return true
	}
	var cp, lp *int32
	if len(corr) > 0 {
		cp = &corr[0]
	}
	if len(lanes) > 0 {
		lp = &lanes[0]
	}
	quantQ8_0ActsAVX512(&x[0], len(x)/32, &q[0], &d[0], cp, lp, offset)
	return true
}

// asmDotActs computes y[i] = w_(r0+i) · acts for rows weight rows (rb
// bytes each) with the active integer kernels; false when there is none
// for the format.
func asmDotActs(w Weight, r0, rows, rb int, q []int8, d []float32, sums []int16, lanes []int32, y []float32) bool {
	if active == nil || rows == 0 {
		return false
	}
	wp, blocks := &w.Bytes[r0*rb], len(q)/quant.ActBlock(w.Format)
	switch {
	case w.Format == quant.Q4_0 && len(lanes) == len(q)/4 && fastGemmOK():
		fastQ4_0VNNI(wp, rb, rows, blocks, &q[0], &d[0], &lanes[0], &halfTable[0], &y[0])
		return true
	case w.Format == quant.Q5_0 && len(lanes) == len(q)/4 && fastGemmOK():
		fastQ5_0VNNI(wp, rb, rows, blocks, &q[0], &d[0], &lanes[0], &halfTable[0], &y[0])
		return true
	case w.Format == quant.Q6_K && len(lanes) == len(q)/4 && fastGemmOK():
		fastQ6_KVNNI(wp, rb, rows, blocks, &q[0], &d[0], &lanes[0], &y[0])
		return true
	case w.Format == quant.Q4_0 && len(lanes) == len(q)/4:
		fastQ4_0LanesAVX2(wp, rb, rows, blocks, &q[0], &d[0], &lanes[0], &y[0])
		return true
	}
	switch w.Format {
	case quant.Q8_0:
		fastQ8_0AVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q4_0:
		fastQ4_0AVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q5_0:
		fastQ5_0AVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q4_K:
		fastQ4_KAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	case quant.Q6_K:
		fastQ6_KAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	case quant.IQ4_NL:
		fastIQ4_NLAVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q4_1:
		fastQ4_1AVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q5_1:
		fastQ5_1AVX2(wp, rb, rows, blocks, &q[0], &d[0], &y[0])
	case quant.Q5_K:
		fastQ5_KAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	case quant.IQ4_XS:
		fastIQ4_XSAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	case quant.Q2_K:
		fastQ2_KAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	case quant.Q3_K:
		fastQ3_KAVX2(wp, rb, rows, blocks, &q[0], &d[0], &sums[0], &y[0])
	default:
		return false
	}
	return true
}

// asmDotActs4 is asmDotActs for four rows of activations at once (row
// stride in values; scales, the K-quants' sums and outputs likewise), for
// the formats with a four-row kernel; false otherwise.
func asmDotActs4(w Weight, r0, rows, rb int, q []int8, d []float32, sums []int16, in int, y []float32, ldy int) bool {
	if active == nil || rows == 0 {
		return false
	}
	wp, blocks := &w.Bytes[r0*rb], in/32
	switch w.Format {
	case quant.Q8_0:
		fastQ8_0x4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.Q4_0:
		fastQ4_0x4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.Q5_0:
		fastQ5_0x4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.IQ4_NL:
		fastIQ4_NLx4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.Q4_1:
		fastQ4_1x4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.Q5_1:
		fastQ5_1x4AVX2(wp, rb, rows, blocks, &q[0], &d[0], in, &y[0], ldy)
	case quant.Q4_K:
		fastQ4_Kx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q5_K:
		fastQ5_Kx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q6_K:
		fastQ6_Kx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q2_K:
		fastQ2_Kx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q3_K:
		fastQ3_Kx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.IQ4_XS:
		fastIQ4_XSx4AVX2(wp, rb, rows, in/256, &q[0], &d[0], &sums[0], in, &y[0], ldy)
	default:
		return false
	}
	return true
}

// asmStageK stages rows weight rows from r0 (in values each) into dst,
// kStaged bytes a super-block, for asmDotActs4Staged; false for a format
// without staged kernels.
func asmStageK(w Weight, r0, rows, rb, in int, dst []byte) bool {
	if active == nil || rows == 0 || len(dst) < rows*in/256*kStaged {
		return false
	}
	wp, nb := &w.Bytes[r0*rb], in/256
	switch w.Format {
	case quant.Q4_K:
		fastStageQ4_KAVX2(wp, rb, rows, nb, &dst[0])
	case quant.Q5_K:
		fastStageQ5_KAVX2(wp, rb, rows, nb, &dst[0])
	case quant.Q6_K:
		fastStageQ6_KAVX2(wp, rb, rows, nb, &dst[0])
	case quant.Q2_K:
		fastStageQ2_KAVX2(wp, rb, rows, nb, &dst[0])
	case quant.Q3_K:
		fastStageQ3_KAVX2(wp, rb, rows, nb, &dst[0])
	case quant.IQ4_XS:
		fastStageIQ4_XSAVX2(wp, rb, rows, nb, &dst[0])
	default:
		return false
	}
	return true
}

// asmDotActs4Staged is asmDotActs4 on rows staged by asmStageK (st holds
// exactly rows r0..r0+rows).
func asmDotActs4Staged(w Weight, r0, rows, rb int, st []byte, q []int8, d []float32, sums []int16, in int, y []float32, ldy int) bool {
	if active == nil || rows == 0 || len(st) < rows*in/256*kStaged {
		return false
	}
	wp, nb := &w.Bytes[r0*rb], in/256
	switch w.Format {
	case quant.Q4_K:
		fastStagedQ4_Kx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q5_K:
		fastStagedQ5_Kx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q6_K:
		fastStagedQ6_Kx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q2_K:
		fastStagedQ2_Kx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.Q3_K:
		fastStagedQ3_Kx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	case quant.IQ4_XS:
		fastStagedIQ4_XSx4AVX2(wp, rb, rows, nb, &st[0], &q[0], &d[0], &sums[0], in, &y[0], ldy)
	default:
		return false
	}
	return true
}

// asmStage8 stages the eight weight rows from r0 (in values each) into
// dst, q8Staged bytes a block, for asmDotActs4Staged8; false for a format
// outside the Q8_0 family.
func asmStage8(w Weight, r0, rb, in int, dst []byte) bool {
	if active == nil || len(dst) < in/32*q8Staged {
		return false
	}
	wp, nb := &w.Bytes[r0*rb], in/32
	switch w.Format {
	case quant.Q8_0:
		fastStage8Q8_0AVX2(wp, rb, nb, &dst[0])
	case quant.Q4_0:
		fastStage8Q4_0AVX2(wp, rb, nb, &dst[0])
	case quant.Q5_0:
		fastStage8Q5_0AVX2(wp, rb, nb, &dst[0])
	case quant.IQ4_NL:
		fastStage8IQ4_NLAVX2(wp, rb, nb, &dst[0])
	default:
		return false
	}
	return true
}

// asmDotActs4Staged8 computes the eight staged rows' products with four
// rows of Q8_0 activations (stride in values): y[i*ldy + r].
func asmDotActs4Staged8(st []byte, q []int8, d []float32, in int, y []float32, ldy int) {
	fastStaged8x4AVX2(&st[0], in/32, &q[0], &d[0], in, &y[0], ldy)
}

// decodeLanesAVX2 reports whether decode on f takes lanes on this CPU
// without VNNI (fastQ4_0LanesAVX2).
func decodeLanesAVX2(f quant.Format) bool { return active != nil && f == quant.Q4_0 }

// asmWiden16 widens n 16-bit weights of w from index off into dst (n a
// multiple of 8).
func asmWiden16(w Weight, off, n int, dst []float32) {
	if w.Kind == BF16 {
		widenBF16AVX2(&w.U16s[off], n, &dst[0])
	} else {
		widenF16AVX2(&w.U16s[off], n, &dst[0])
	}
}

func haveExpShift() bool { return active != nil }

func haveScaleF64() bool { return active == avx512 }

func asmExpShift(x *float32, n int, m float32) float64 {
	if active == avx512 {
		return expShiftAVX512(x, n, m)
	}
	return expShiftAVX2(x, n, m)
}

func asmMax(x *float32, n int) float32 {
	if active == avx512 {
		return maxAVX512(x, n)
	}
	return maxAVX2(x, n)
}

func asmScaleF64(x *float32, n int, s float64) { scaleF64AVX512(x, n, s) }

// asmToF16 converts the leading multiple of 16 values of x to F16 bits
// in dst with the active kernel, and asmRoundF16 rounds them to F16
// precision in dst; each returns how many it did.
func asmToF16(x []float32, dst []uint16) int {
	n := len(x) &^ 15
	if active != avx512 || n == 0 {
		return 0
	}
	toF16AVX512(&x[0], &dst[0], n)
	return n
}

func asmRoundF16(x, dst []float32) int {
	n := len(x) &^ 15
	if active != avx512 || n == 0 {
		return 0
	}
	roundF16AVX512(&x[0], &dst[0], n)
	return n
}

func canPrefetch() bool { return active != nil }

func prefetch(p uintptr, lines int) { prefetchLines(p, lines) }

func asmSiLU(x, u, out *float32, n int) {
	switch {
	case active == avx512 && u == nil:
		siluAVX512(x, out, n)
	case active == avx512:
		siluMulAVX512(x, u, out, n)
	case u == nil:
		siluAVX2(x, out, n)
	default:
		siluMulAVX2(x, u, out, n)
	}
}

// fastGemmOK says whether fast mode's prefill runs on the VNNI kernels
// (fastgemm.go): AVX-512 with VNNI on 256- and 512-bit vectors.
func fastGemmOK() bool {
	return active == avx512 && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL
}

// asmFastGemmK is asmFastGemm16 for kLanes(f) K-quant weight rows (packK)
// against Q8_K activations.
func asmFastGemmK(f quant.Format, p *packedRows, blocks int, q []int8, in int, d []float32, sums []int16, T int, y []float32, ldy int) {
	t := 0
	for _, k := range fastGemmKRows[f] {
		if n := (T - t) / k.rows * k.rows; n > 0 {
			k.kernel(&p.b[0], blocks, &q[t*in], in, &d[t*blocks], &sums[t*blocks*16], n, &y[t*ldy], ldy)
			t += n
		}
	}
}

// fastGemmKRows is each repacked K-quant's prefill kernels, the most rows
// first (Q6_K's four-row one: session 49 in docs/performance.md).
var fastGemmKRows = map[quant.Format][]struct {
	rows   int
	kernel func(packed *byte, blocks int, xq *int8, ldx int, xd *float32, sums *int16, rows int, y *float32, ldy int)
}{
	quant.Q4_K:   {{2, fastGemmQ4_Kx2VNNI}, {1, fastGemmQ4_Kx1VNNI}},
	quant.Q6_K:   {{4, fastGemmQ6_Kx4VNNI}, {2, fastGemmQ6_Kx2VNNI}, {1, fastGemmQ6_Kx1VNNI}},
	quant.IQ4_XS: {{2, fastGemmIQ4_XSx2VNNI}, {1, fastGemmIQ4_XSx1VNNI}},
}

// asmFastPack repacks 16 rows of w (Q4_0, Q5_0 or Q8_0, blocks blocks, stride
// rb bytes) into dst and dw, if a kernel does it here.
func asmFastPack(f quant.Format, w []byte, rb, blocks int, dst []uint32, dw []float32) bool {
	if active != avx512 || blocks == 0 || len(w) < 15*rb+blocks*f.BlockBytes() || len(dst) < 128*blocks || len(dw) < 16*blocks {
		return false
	}
	switch f {
	case quant.Q4_0:
		fastPackQ4_0AVX512(&w[0], rb, blocks, &dst[0], &dw[0])
	case quant.Q5_0:
		fastPackQ5_0AVX512(&w[0], rb, blocks, &dst[0], &dw[0])
	case quant.Q8_0:
		fastPackQ8_0AVX512(&w[0], rb, blocks, &dst[0], &dw[0])
	default:
		return false
	}
	return true
}

// asmFastPackK repacks kLanes(f) rows of w (Q4_K or Q6_K, blocks
// super-blocks, stride rb bytes) into dst, if a kernel does it here.
func asmFastPackK(f quant.Format, w []byte, rb, blocks int, dst []uint32) bool {
	if active != avx512 || blocks == 0 || len(w) < (kLanes(f)-1)*rb+blocks*f.BlockBytes() || len(dst) < blocks*packKBytes(f)/4 {
		return false
	}
	switch f {
	case quant.Q4_K:
		fastPackQ4_KAVX512(&w[0], rb, blocks, &dst[0])
	case quant.Q6_K:
		fastPackQ6_KAVX512(&w[0], rb, blocks, &dst[0])
	default:
		return false
	}
	return true
}

// asmFastGemmX16K computes y[t*ldy + c], c < 16, for T rows of Q8_K
// activations against group g of the regrouped Q4_K p, read in place;
// false where the kernels do not run.
func asmFastGemmX16K(p *x16, g int, q []int8, d []float32, sums []int16, T int, y []float32, ldy int) bool {
	blocks := p.in / 256
	if p.f != quant.Q4_K || !fastGemmOK() || T <= 0 || len(q) < T*p.in || len(d) < T*blocks || len(sums) < T*16*blocks || len(y) < (T-1)*ldy+16 {
		return false
	}
	w := &p.data[g*p.groupBytes()]
	t := 0
	for _, k := range []struct {
		rows   int
		kernel func(w *byte, blocks int, xq *int8, ldx int, xd *float32, xs *int16, rows int, y *float32, ldy int)
	}{{4, fastGemmX16Q4_Kx4VNNI}, {2, fastGemmX16Q4_Kx2VNNI}, {1, fastGemmX16Q4_Kx1VNNI}} {
		if n := (T - t) / k.rows * k.rows; n > 0 {
			k.kernel(w, blocks, &q[t*p.in], p.in, &d[t*blocks], &sums[t*16*blocks], n, &y[t*ldy], ldy)
			t += n
		}
	}
	return true
}

// fastGemmX16Q8 is the VNNI kernels that read a regrouped Q5_0, Q8_0 or
// IQ4_NL group in place (fastGemmX16*x{4,2,1}VNNI), by format and row
// count.
var fastGemmX16Q8 = map[quant.Format][3]func(w *byte, blocks int, xq *int8, ldx int, xd *float32, corr *int32, rows int, y *float32, ldy int){
	quant.Q5_0:   {fastGemmX16Q5_0x4VNNI, fastGemmX16Q5_0x2VNNI, fastGemmX16Q5_0x1VNNI},
	quant.Q8_0:   {fastGemmX16Q8_0x4VNNI, fastGemmX16Q8_0x2VNNI, fastGemmX16Q8_0x1VNNI},
	quant.IQ4_NL: {fastGemmX16IQ4_NLx4VNNI, fastGemmX16IQ4_NLx2VNNI, fastGemmX16IQ4_NLx1VNNI},
}

// asmFastGemmX16Q8 computes the 16 columns of group g of the regrouped p
// (Q5_0, Q8_0 or IQ4_NL) for T rows of Q8_0 activations (corr: their block sums
// times the weights' offset), reading the regrouping in place.
func asmFastGemmX16Q8(p *x16, g int, q []int8, d []float32, corr []int32, T int, y []float32, ldy int) bool {
	blocks := p.in / 32
	ks, ok := fastGemmX16Q8[p.f]
	if !ok || !fastGemmOK() || T <= 0 || len(q) < T*p.in || len(d) < T*blocks || len(corr) < T*blocks || len(y) < (T-1)*ldy+16 {
		return false
	}
	w := &p.data[g*p.groupBytes()]
	t := 0
	for i, rows := range []int{4, 2, 1} {
		if n := (T - t) / rows * rows; n > 0 {
			ks[i](w, blocks, &q[t*p.in], p.in, &d[t*blocks], &corr[t*blocks], n, &y[t*ldy], ldy)
			t += n
		}
	}
	return true
}

// canPackX16Fast says whether a kernel repacks f's regrouped groups for
// the VNNI prefill kernels here (fastPackX16*AVX512).
func canPackX16Fast(f quant.Format) bool {
	return fastGemmOK() && (f == quant.Q4_0 || f == quant.IQ4_XS)
}

// asmFastPackX16 repacks group g of p into pr (grown to p's blocks).
func asmFastPackX16(p *x16, g int, pr *packedRows) {
	if p.f == quant.IQ4_XS {
		blocks := p.in / 256
		if !canPackX16Fast(p.f) || len(pr.b) < blocks*packKBytes(p.f) {
			panic("simd: asmFastPackX16 without its kernel")
		}
		fastPackX16IQ4_XSAVX512(&p.data[g*p.groupBytes()], blocks, (*uint32)(unsafe.Pointer(&pr.b[0])))
		return
	}
	blocks := p.in / 32
	if !canPackX16Fast(p.f) || len(pr.b) < 512*blocks || len(pr.dw) < 16*blocks {
		panic("simd: asmFastPackX16 without its kernel")
	}
	src, dst, dw := &p.data[g*p.groupBytes()], (*uint32)(unsafe.Pointer(&pr.b[0])), &pr.dw[0]
	switch p.f {
	case quant.Q4_0:
		fastPackX16Q4_0AVX512(src, blocks, dst, dw)
	}
}

// asmFastGemm16 computes y[t*ldy + c], c < 16, for T rows of activations
// against the sixteen weight rows packed in p.
func asmFastGemm16(p *packedRows, blocks int, q []int8, in int, d []float32, corr []int32, T int, y []float32, ldy int) {
	t4 := T &^ 3
	if t4 > 0 {
		fastGemm16x4VNNI(&p.b[0], &p.dw[0], blocks, &q[0], in, &d[0], &corr[0], t4, &y[0], ldy)
	}
	if T > t4 {
		fastGemm16x1VNNI(&p.b[0], &p.dw[0], blocks, &q[t4*in], in, &d[t4*blocks], &corr[t4*blocks], T-t4, &y[t4*ldy], ldy)
	}
}
