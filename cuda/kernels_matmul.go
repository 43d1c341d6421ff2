package cuda

// Kernels of kernels/matmul.cu. The products share one parameter list:
// (y, x, w, bias, T, N, K, wstride, list, counts, listStride, inDiv); see
// the file's comment.
const mmParams = "ppppiiilppii"

var (
	// MatMulVec* are the products of one row (decode), as MatMulFew*.
	MatMulVecF32    = NewKernel("matmul", "mm_vec_f32", mmParams)
	MatMulVecBF16   = NewKernel("matmul", "mm_vec_bf16", mmParams)
	MatMulVecF16    = NewKernel("matmul", "mm_vec_f16", mmParams)
	MatMulVecQ8_0   = NewKernel("matmul", "mm_vec_q8_0", mmParams)
	MatMulVecQ4_0   = NewKernel("matmul", "mm_vec_q4_0", mmParams)
	MatMulVecQ5_0   = NewKernel("matmul", "mm_vec_q5_0", mmParams)
	MatMulVecQ4_K   = NewKernel("matmul", "mm_vec_q4_k", mmParams)
	MatMulVecQ6_K   = NewKernel("matmul", "mm_vec_q6_k", mmParams)
	MatMulVecQ4_1   = NewKernel("matmul", "mm_vec_q4_1", mmParams)
	MatMulVecQ5_1   = NewKernel("matmul", "mm_vec_q5_1", mmParams)
	MatMulVecIQ4_NL = NewKernel("matmul", "mm_vec_iq4_nl", mmParams)
	MatMulVecQ2_K   = NewKernel("matmul", "mm_vec_q2_k", mmParams)
	MatMulVecQ3_K   = NewKernel("matmul", "mm_vec_q3_k", mmParams)
	MatMulVecQ5_K   = NewKernel("matmul", "mm_vec_q5_k", mmParams)
	MatMulVecIQ4_XS = NewKernel("matmul", "mm_vec_iq4_xs", mmParams)

	// MatMulFew* are the products of 2 to 8 rows, one warp per output
	// column: grid (ceil(N/8), 1, experts), block 256.
	MatMulFewF32    = NewKernel("matmul", "mm_few_f32", mmParams)
	MatMulFewBF16   = NewKernel("matmul", "mm_few_bf16", mmParams)
	MatMulFewF16    = NewKernel("matmul", "mm_few_f16", mmParams)
	MatMulFewQ8_0   = NewKernel("matmul", "mm_few_q8_0", mmParams)
	MatMulFewQ4_0   = NewKernel("matmul", "mm_few_q4_0", mmParams)
	MatMulFewQ5_0   = NewKernel("matmul", "mm_few_q5_0", mmParams)
	MatMulFewQ4_K   = NewKernel("matmul", "mm_few_q4_k", mmParams)
	MatMulFewQ6_K   = NewKernel("matmul", "mm_few_q6_k", mmParams)
	MatMulFewQ4_1   = NewKernel("matmul", "mm_few_q4_1", mmParams)
	MatMulFewQ5_1   = NewKernel("matmul", "mm_few_q5_1", mmParams)
	MatMulFewIQ4_NL = NewKernel("matmul", "mm_few_iq4_nl", mmParams)
	MatMulFewQ2_K   = NewKernel("matmul", "mm_few_q2_k", mmParams)
	MatMulFewQ3_K   = NewKernel("matmul", "mm_few_q3_k", mmParams)
	MatMulFewQ5_K   = NewKernel("matmul", "mm_few_q5_k", mmParams)
	MatMulFewIQ4_XS = NewKernel("matmul", "mm_few_iq4_xs", mmParams)

	// MatMulTile* are the products of many rows, 64x64 tiles: grid
	// (ceil(N/64), ceil(T/64), experts), block 256.
	MatMulTileF32    = NewKernel("matmul", "mm_tile_f32", mmParams)
	MatMulTileBF16   = NewKernel("matmul", "mm_tile_bf16", mmParams)
	MatMulTileF16    = NewKernel("matmul", "mm_tile_f16", mmParams)
	MatMulTileQ8_0   = NewKernel("matmul", "mm_tile_q8_0", mmParams)
	MatMulTileQ4_0   = NewKernel("matmul", "mm_tile_q4_0", mmParams)
	MatMulTileQ5_0   = NewKernel("matmul", "mm_tile_q5_0", mmParams)
	MatMulTileQ4_K   = NewKernel("matmul", "mm_tile_q4_k", mmParams)
	MatMulTileQ6_K   = NewKernel("matmul", "mm_tile_q6_k", mmParams)
	MatMulTileQ4_1   = NewKernel("matmul", "mm_tile_q4_1", mmParams)
	MatMulTileQ5_1   = NewKernel("matmul", "mm_tile_q5_1", mmParams)
	MatMulTileIQ4_NL = NewKernel("matmul", "mm_tile_iq4_nl", mmParams)
	MatMulTileQ2_K   = NewKernel("matmul", "mm_tile_q2_k", mmParams)
	MatMulTileQ3_K   = NewKernel("matmul", "mm_tile_q3_k", mmParams)
	MatMulTileQ5_K   = NewKernel("matmul", "mm_tile_q5_k", mmParams)
	MatMulTileIQ4_XS = NewKernel("matmul", "mm_tile_iq4_xs", mmParams)

	// Embed* gather rows of a table [V, D] by int32 ids, widened:
	// embed(out, ids, table, T, V, D), grid T; an id outside [0, V) gives
	// a row of zeros.
	EmbedF32    = NewKernel("matmul", "embed_f32", "pppiii")
	EmbedBF16   = NewKernel("matmul", "embed_bf16", "pppiii")
	EmbedF16    = NewKernel("matmul", "embed_f16", "pppiii")
	EmbedQ8_0   = NewKernel("matmul", "embed_q8_0", "pppiii")
	EmbedQ4_0   = NewKernel("matmul", "embed_q4_0", "pppiii")
	EmbedQ5_0   = NewKernel("matmul", "embed_q5_0", "pppiii")
	EmbedQ4_K   = NewKernel("matmul", "embed_q4_k", "pppiii")
	EmbedQ6_K   = NewKernel("matmul", "embed_q6_k", "pppiii")
	EmbedQ4_1   = NewKernel("matmul", "embed_q4_1", "pppiii")
	EmbedQ5_1   = NewKernel("matmul", "embed_q5_1", "pppiii")
	EmbedIQ4_NL = NewKernel("matmul", "embed_iq4_nl", "pppiii")
	EmbedQ2_K   = NewKernel("matmul", "embed_q2_k", "pppiii")
	EmbedQ3_K   = NewKernel("matmul", "embed_q3_k", "pppiii")
	EmbedQ5_K   = NewKernel("matmul", "embed_q5_k", "pppiii")
	EmbedIQ4_XS = NewKernel("matmul", "embed_iq4_xs", "pppiii")

	// AddBias adds b[N] to every row of y: add_bias(y, b, n = T·N, N).
	AddBias = NewKernel("matmul", "add_bias", "ppli")
	// ToHalf writes n float32 values as 16-bit floats rounded to nearest
	// even: to_half(dst, x, n, kind), kind 1 BF16, 2 F16.
	ToHalf = NewKernel("matmul", "to_half", "ppli")
	// RoundHalf rounds n float32 values to a 16-bit float's precision,
	// kept as float32: round_half(dst, x, n, kind); dst may be x.
	RoundHalf = NewKernel("matmul", "round_half", "ppli")
)
