package cuda

// Kernels of kernels/moe.cu (a mixture of experts' routing, activation
// and combination; its products are matmul.cu's).
var (
	// MoERoute picks each row's top-k experts from router logits:
	// moe_route(logits, ids, wts, T, E, K, norm), grid T, block 32,
	// dynamic shared memory 4·E bytes.
	MoERoute = NewKernel("moe", "moe_route", "pppiiii")
	// MoELists builds each expert's row entries: moe_lists(ids, list,
	// counts, T, K), grid E, block 32.
	MoELists = NewKernel("moe", "moe_lists", "pppii")
	// MoEAct writes h = act(g)·u: moe_act(h, g, u, n, act), act 0 SiLU,
	// 1 GELU (tanh), 2 GELU (erf), 3 ReLU, 4 fast mode's GELU table.
	MoEAct = NewKernel("moe", "moe_act", "pppli")
	// MoECombine sums each row's experts' outputs by their weights:
	// moe_combine(out, y, wts, n = T·D, D, K).
	MoECombine = NewKernel("moe", "moe_combine", "ppplii")
)
