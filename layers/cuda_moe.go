package layers

import (
	"fmt"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
)

// The device side of sparseMoE (cuda/kernels/moe.cu). Every launch's
// parameters depend on the program's shapes only: the routing lives in
// device scratch, so a captured step replays any routing.
//
//  1. logits [T, E] = x·routerᵀ (the product of matmulT, fast mode's
//     included);
//  2. moe_route: each row's top-k experts and weights, ascending by expert;
//  3. moe_lists: each expert's entries t·k+slot;
//  4. the gate and up products of every expert over its entries' x rows
//     (the gathered product kernels, grid.z the experts; an expert routed
//     no row returns at once), into G and U [T·k, F];
//  5. moe_act: G = act(G)·U;
//  6. the down products of every expert over its entries' G rows, into
//     Y [T·k, D];
//  7. moe_combine: out[t] = Σ Y[t·k+slot]·w[t, slot], experts ascending
//     from zero, as the CPU's loop adds them.
//
// In fast mode a 16-bit expert's activations (x, and G before the down
// product) are rounded to its type first (round_half), as the CPU's fast
// mode rounds them, and the products are the exact kernels: the results
// are the CPU's fast mode's up to summation order. Quantized experts take
// the exact arithmetic in both modes (the CPU's fast mode quantizes the
// activations to 8 bits), and fast mode's GELU is llama.cpp's F16 table,
// as on the CPU.

// moe scratch indices.
const (
	moeLogits = iota
	moeRouterHalf
	moeIDs
	moeWeights
	moeList
	moeCounts
	moeGate
	moeUp
	moeDown
	moeXBF16
	moeXF16
)

// CUDA implements ops.CUDAKernel (see above).
func (k sparseMoE) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if k.sliced != nil {
		return nil, fmt.Errorf("the experts are per-expert tensors read in place on the host (transformers 4.x): the device takes stacked experts")
	}
	if len(in) != 5 {
		return nil, fmt.Errorf("%d inputs, want 5 (x, router, gate, up, down)", len(in))
	}
	E, K := k.experts, k.topK
	if E < 1 || K < 1 || K > E || K > 32 || E > 65535 {
		return nil, fmt.Errorf("top %d of %d experts (the device takes up to 32 of up to 65535)", K, E)
	}
	act, err := actCode(k.act, k.fast)
	if err != nil {
		return nil, err
	}
	x, router := in[0], in[1]
	if err := checkTensor("x", x, cuda.F32, -1, -1); err != nil {
		return nil, err
	}
	T, D := x.Shape[0], x.Shape[1]
	if err := checkTensor("router", router, deviceType(k.routerType), E, -1); err != nil {
		return nil, err
	}
	if c, err := weightCols(k.routerType, router.Shape[1]); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	} else if c != D {
		return nil, fmt.Errorf("router %v does not fit x %v", router.Shape, x.Shape)
	}
	names := [3]string{"gate", "up", "down"}
	var F int
	var strides [3]int64
	for j, w := range in[2:] {
		if err := checkTensor(names[j], w, deviceType(k.expertTypes[j]), E, -1, -1); err != nil {
			return nil, err
		}
		cols, err := weightCols(k.expertTypes[j], w.Shape[2])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[j], err)
		}
		if j == 0 {
			F = w.Shape[1]
		}
		wantRows, wantCols := F, D
		if j == 2 {
			wantRows, wantCols = D, F
		}
		if w.Shape[1] != wantRows || cols != wantCols {
			return nil, fmt.Errorf("stacked %s %v does not fit %d experts of [%d, %d] over x %v", names[j], w.Shape, E, wantRows, wantCols, x.Shape)
		}
		strides[j] = int64(w.Shape[1]) * int64(w.Shape[2]) * int64(w.Type.Size())
	}
	if err := checkTensor("output", out, cuda.F32, T, D); err != nil {
		return nil, err
	}
	if T == 0 {
		return nil, nil
	}
	if int64(T)*int64(K)*int64(max(D, F, E)) > 1<<31-1 {
		return nil, fmt.Errorf("%d rows of top %d over [%d, %d] are too many for the kernels", T, K, D, F)
	}
	if err := aligned16(x.Ptr, router.Ptr, in[2].Ptr, in[3].Ptr, in[4].Ptr, out.Ptr); err != nil {
		return nil, err
	}
	scratch := func(i, bytes int) (cuda.Ptr, error) { return ws.Scratch(i, bytes) }
	var bufs [moeXF16 + 1]cuda.Ptr
	for _, b := range []struct{ i, bytes int }{
		{moeLogits, 4 * T * E}, {moeIDs, 4 * T * K}, {moeWeights, 4 * T * K}, {moeList, 4 * E * T},
		{moeCounts, 4 * E}, {moeGate, 4 * T * K * F}, {moeUp, 4 * T * K * F}, {moeDown, 4 * T * K * D},
	} {
		if bufs[b.i], err = scratch(b.i, b.bytes); err != nil {
			return nil, err
		}
	}

	var calls []cuda.Call
	add := func(cs []cuda.Call, err error) error {
		calls = append(calls, cs...)
		return err
	}
	// 1-3: route.
	if err := add(product{y: bufs[moeLogits], x: x.Ptr, w: router.Ptr, T: T, N: E, K: D,
		dtype: k.routerType, fast: k.fast, scratch: moeRouterHalf}.calls(ws)); err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	calls = append(calls,
		cuda.Call{K: cuda.MoERoute, Grid: cuda.D1(T), Block: cuda.D1(32), Shared: 4 * E,
			Args: []any{bufs[moeLogits], bufs[moeIDs], bufs[moeWeights], T, E, K, btoi(k.normTopK)}},
		cuda.Call{K: cuda.MoELists, Grid: cuda.D1(E), Block: cuda.D1(32),
			Args: []any{bufs[moeIDs], bufs[moeList], bufs[moeCounts], T, K}})

	// acts returns the activations a product with a weight of type d
	// reads: in fast mode, rounded to a 16-bit weight's type.
	rounded := map[graphs.DType]cuda.Ptr{}
	acts := func(d graphs.DType) (cuda.Ptr, error) {
		if !k.fast || (d != graphs.BF16 && d != graphs.F16) {
			return x.Ptr, nil
		}
		if p, ok := rounded[d]; ok {
			return p, nil
		}
		idx := moeXBF16
		if d == graphs.F16 {
			idx = moeXF16
		}
		p, err := scratch(idx, 4*T*D)
		if err != nil {
			return 0, err
		}
		grid, block := elementwise(T * D)
		calls = append(calls, cuda.Call{K: cuda.RoundHalf, Grid: grid, Block: block, Args: []any{p, x.Ptr, int64(T * D), halfKind(d)}})
		rounded[d] = p
		return p, nil
	}
	expert := func(j int, y, xin cuda.Ptr, N, Kin, inDiv int) error {
		err := add(product{y: y, x: xin, w: in[2+j].Ptr, T: T, N: N, K: Kin, dtype: k.expertTypes[j],
			experts: E, wstride: strides[j], list: bufs[moeList], counts: bufs[moeCounts], inDiv: inDiv}.calls(ws))
		if err != nil {
			return fmt.Errorf("%s: %w", names[j], err)
		}
		return nil
	}
	// 4-5: gate and up, the activation.
	for j, y := range []cuda.Ptr{bufs[moeGate], bufs[moeUp]} {
		xin, err := acts(k.expertTypes[j])
		if err != nil {
			return nil, err
		}
		if err := expert(j, y, xin, F, D, K); err != nil {
			return nil, err
		}
	}
	n := T * K * F
	grid, block := elementwise(n)
	calls = append(calls, cuda.Call{K: cuda.MoEAct, Grid: grid, Block: block,
		Args: []any{bufs[moeGate], bufs[moeGate], bufs[moeUp], int64(n), act}})
	if d := k.expertTypes[2]; k.fast && (d == graphs.BF16 || d == graphs.F16) {
		calls = append(calls, cuda.Call{K: cuda.RoundHalf, Grid: grid, Block: block,
			Args: []any{bufs[moeGate], bufs[moeGate], int64(n), halfKind(d)}})
	}
	// 6-7: down, the combination.
	if err := expert(2, bufs[moeDown], bufs[moeGate], D, F, 1); err != nil {
		return nil, err
	}
	grid, block = elementwise(T * D)
	calls = append(calls, cuda.Call{K: cuda.MoECombine, Grid: grid, Block: block,
		Args: []any{out.Ptr, bufs[moeDown], bufs[moeWeights], int64(T * D), D, K}})
	return calls, nil
}
