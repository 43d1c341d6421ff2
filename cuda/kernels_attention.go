package cuda

// Kernels of kernels/attention.cu: the KV pool's store, cached attention
// over the pool and the vision encoder's block attention. The layouts and
// grids are in the .cu file's comments.
var (
	// KVStore writes a forward's keys and values into the pool:
	// kv_store(kslabs, vslabs, rows, blocks, k, v, Hkv, Dk, Dv, B,
	// slabBlocks, f16), grid (Hkv, T).
	KVStore = NewKernel("attention", "kv_store", "ppppppiiiiii")
	// AttnRows attends a row's heads of one kv head over a split of its
	// keys: attn_rows(out, q, kslabs, vslabs, rows, blocks, probs, stats,
	// partO, partML, T, Hq, Hkv, Dk, Dv, B, slabBlocks, f16, window, cap,
	// splits, chunk, tiled, scale), grid (Hkv, T, splits).
	AttnRows = NewKernel("attention", "attn_rows", "ppppppppppiiiiiiiiiiiiif")
	// AttnTile attends a tile of 32 rows of one sequence, one query head:
	// attn_tile(out, q, kslabs, vslabs, rows, blocks, probs, stats, T,
	// Hq, Hkv, Dk, Dv, B, slabBlocks, f16, window, cap, chunk, scale),
	// grid (Hq, ceil(T/32)).
	AttnTile = NewKernel("attention", "attn_tile", "ppppppppiiiiiiiiiiif")
	// AttnCombine merges attn_rows's splits: attn_combine(out, partO,
	// partML, stats, rows, T, Hq, Dv, splits, tiled), grid (Hq, T).
	AttnCombine = NewKernel("attention", "attn_combine", "pppppiiiii")
	// AttnProbs turns stored scores into probabilities: attn_probs(probs,
	// stats, rows, Hq, cap, window), grid (ceil(cap/256), Hq, T).
	AttnProbs = NewKernel("attention", "attn_probs", "pppiii")
	// BlockAttn is attention within blocks of P rows: block_attn(out, q,
	// k, v, P, H, Dh, chunk, scale), grid (H, ceil(P/32), rows/P).
	BlockAttn = NewKernel("attention", "block_attn", "ppppiiiif")
)
