//go:build !amd64 || purego

package simd

import (
	"unsafe"

	"github.com/gozoo/gozoo/internal/quant"
)

// useGFNI has no kernel to pick here.
var useGFNI = false

// detect finds no kernels: plain Go everywhere else.
func detect() *isa { return nil }

func asmDots(tile *[16]float32, x *float32, R int, w Weight, w0, C, in, k int) {
	panic("simd: no assembly kernels in this build")
}

func asmGemv(x *float32, w Weight, w0, in, rows int, y *float32) {
	panic("simd: no assembly kernels in this build")
}

func asmDotsLD(tile *[16]float32, x *float32, ldx, R int, w Weight, w0, ldw, C, k int) {
	panic("simd: no assembly kernels in this build")
}

func asmGemvK(x *float32, w Weight, w0, ldw, k, rows int, y *float32) {
	panic("simd: no assembly kernels in this build")
}

func weighWidths() []int { return nil }

func asmPanelMul(k Kind, R, NP int, x *float32, ldx int, w unsafe.Pointer, ps, in int, y *float32, ldy int) {
	panic("simd: no assembly kernels in this build")
}

func asmGemm(R, N int, a *float32, lda int, b *float32, ldb, k int, c *float32, ldc int, alpha float32, add bool) {
	panic("simd: no assembly kernels in this build")
}

func gemmTile(N int) int { return 6 }

func asmWeigh(width int, p *float32, v Weight, off, ldv, rows int, out *float32) {
	panic("simd: no assembly kernels in this build")
}

func asmQuant(x []float32, w Weight, r0, rows, in, rb int, y, dst []float32) bool { return false }

func supported() []*isa { return nil }

func canCoded() bool { return false }

func canPanels() bool { return false }

func asmFastPackK(f quant.Format, w []byte, rb, blocks int, dst []uint32) bool { return false }

func asmGemvCoded(p *coded, x []float32, r0, r1 int, y []float32) bool { return false }

func asmUnpackCoded(p *coded, r0, r1 int, dst []float32) bool { return false }

func asmQuantizeActs(f quant.Format, x []float32, q []int8, d []float32, sums []int16, corr, lanes []int32, offset int32) bool {
	return false
}

func asmDotActs(w Weight, r0, rows, rb int, q []int8, d []float32, sums []int16, lanes []int32, y []float32) bool {
	return false
}

func asmDotActs4(w Weight, r0, rows, rb int, q []int8, d []float32, sums []int16, in int, y []float32, ldy int) bool {
	return false
}

func asmStageK(w Weight, r0, rows, rb, in int, dst []byte) bool { return false }

func asmDotActs4Staged(w Weight, r0, rows, rb int, st []byte, q []int8, d []float32, sums []int16, in int, y []float32, ldy int) bool {
	return false
}

func asmStage8(w Weight, r0, rb, in int, dst []byte) bool { return false }

func asmDotActs4Staged8(st []byte, q []int8, d []float32, in int, y []float32, ldy int) {
	panic("simd: no assembly kernels in this build")
}

func decodeLanesAVX2(f quant.Format) bool { return false }

func asmWiden16(w Weight, off, n int, dst []float32) {
	panic("simd: no assembly kernels in this build")
}

func haveExpShift() bool { return false }

func haveScaleF64() bool { return false }

func asmExpShift(x *float32, n int, m float32) float64 {
	panic("simd: no assembly kernels in this build")
}

func asmMax(x *float32, n int) float32 {
	panic("simd: no assembly kernels in this build")
}

func asmScaleF64(x *float32, n int, s float64) {
	panic("simd: no assembly kernels in this build")
}

func asmToF16(x []float32, dst []uint16) int { return 0 }

func asmRoundF16(x, dst []float32) int { return 0 }

func canPrefetch() bool { return false }

func prefetch(p uintptr, lines int) {}

func asmSiLU(x, u, out *float32, n int) {
	panic("simd: no assembly kernels in this build")
}

func fastGemmOK() bool { return false }

func asmGemmCoded(p *coded, x []float32, T, r0, r1 int, y []float32, ldy int) bool { return false }

func asmFastGemmK(f quant.Format, p *packedRows, blocks int, q []int8, in int, d []float32, sums []int16, T int, y []float32, ldy int) {
	panic("simd: no assembly kernels in this build")
}

func asmFastPack(f quant.Format, w []byte, rb, blocks int, dst []uint32, dw []float32) bool {
	return false
}

func asmFastGemm16(p *packedRows, blocks int, q []int8, in int, d []float32, corr []int32, T int, y []float32, ldy int) {
	panic("simd: no assembly kernels in this build")
}

func canX16() bool { return false }

func exactX16OK(f quant.Format) bool { return false }

func x16Inputs(f quant.Format) (n int, bcast bool) { return 0, false }

func fastX16OK(f quant.Format) bool { return false }

func stagesX16(f quant.Format) bool { return false }

func asmGatherX16(p *x16, r0, vals int, dst []byte, rb int) bool { return false }

func asmBroadcast(x, dst []float32) bool { return false }

func canGather() bool { return false }

func asmStageX16(p *x16, g, h int, st []byte) { panic("simd: no assembly kernels in this build") }

func asmFastX16(p *x16, q []int8, d []float32, sums []int16, corr []int32, r0, r1 int, y []float32) bool {
	return false
}

func asmGemvX16(p *x16, x, sums []float32, r0, r1 int, y []float32) bool { return false }

func canPanelX16(f quant.Format) bool { return false }

func asmPanelX16(p *x16, g int, dst []float32) { panic("simd: asmPanelX16 without its kernel") }

func canPackX16Fast(f quant.Format) bool { return false }

func asmFastGemmX16K(p *x16, g int, q []int8, d []float32, sums []int16, T int, y []float32, ldy int) bool {
	return false
}

func asmFastPackX16(p *x16, g int, pr *packedRows) { panic("simd: asmFastPackX16 without its kernel") }

func asmFastGemmX16Q8(p *x16, g int, q []int8, d []float32, corr []int32, T int, y []float32, ldy int) bool {
	return false
}

func canGemmX16(f quant.Format) bool { return false }

func asmGemmX16(p *x16, x, sums []float32, per, R, r0, r1 int, y []float32, ldy int) bool {
	return false
}
