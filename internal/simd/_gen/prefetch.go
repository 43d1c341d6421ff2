package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// prefetchLines writes prefetchLines: a software prefetch (PREFETCHT0) of
// each of n 64-byte lines from address p. Prefetches never fault, so an
// address that is no longer mapped (a closed model's weights) is harmless,
// which is why p is an address and not a pointer the GC would keep alive.
func prefetchLines() {
	TEXT("prefetchLines", NOSPLIT, "func(p uintptr, n int)")
	Doc("prefetchLines hints the n 64-byte lines from address p into the caches; it never faults.")
	p, n := GP64(), GP64()
	Load(Param("p"), p)
	Load(Param("n"), n)
	Label("prefetch_loop")
	TESTQ(n, n)
	JLE(LabelRef("prefetch_end"))
	PREFETCHT0(Mem{Base: p})
	ADDQ(U8(64), p)
	DECQ(n)
	JMP(LabelRef("prefetch_loop"))
	Label("prefetch_end")
	RET()
}
