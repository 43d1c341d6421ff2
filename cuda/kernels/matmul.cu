// Products y[T,N] = x[T,K]·Wᵀ with W [N,K] in its stored type (F32, BF16,
// F16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_XS), widened or dequantized in registers
// exactly as the CPU does (quant.cuh) and accumulated in float32; the bias
// add, the fast mode's 16-bit activations, and embedding lookups.
//
// Two forms of product, picked by the program's T:
//   mm_vec_*  (T = 1) and
//   mm_few_*  (T <= 8): one warp per output column; each lane decodes 8
//             weights of a chunk and multiplies them with all T rows, the
//             partial sums in registers; a warp-shuffle reduction at the
//             end. The weights are read once, coalesced.
//   mm_tile_* (T > 8): a 64x64 output tile per block of 256 threads, K in
//             steps of 32: the x tile and the weight tile (decoded) are
//             staged in shared memory, each thread sums a 4x4 block.
// Both share one signature:
//   (y, x, w, bias, T, N, K, wstride, list, counts, listStride, inDiv)
// bias may be 0. list 0 is a dense product of T rows. A MoE's expert
// products set list: blockIdx.z is the expert e, whose weight is at
// w + e*wstride bytes; its rows are counts[e] entries list[e*listStride+i]
// (read from device memory, so a captured graph replays any routing): an
// entry r reads x row r/inDiv and writes y row r. T then bounds counts[e].
// Pointers are 16-byte aligned (the Go side checks).

#include "quant.cuh"

#define FEW_WARPS 8
#define MAX_FEW 8

template <class F, int TR>
__device__ __forceinline__ void mm_few(float *__restrict__ y, const float *__restrict__ x, const uint8_t *__restrict__ w,
                                       const float *__restrict__ bias, int T, int N, int K, long long wstride,
                                       const int *__restrict__ list, const int *__restrict__ counts, int ls, int inDiv) {
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * FEW_WARPS + (threadIdx.x >> 5);
    const int e = blockIdx.z;
    int rows = list ? counts[e] : T;
    rows = min(rows, TR);
    if (n >= N || rows <= 0) return; // uniform over the warp
    const uint8_t *row = w + (size_t)e * wstride + (size_t)n * F::rowBytes(K);
    // Row r's activations start at x + xo[r] (x holds at most 2^31 values).
    int xo[TR], yr[TR];
#pragma unroll
    for (int r = 0; r < TR; r++) {
        int ent = r;
        if (list && r < rows) ent = list[(size_t)e * ls + r];
        xo[r] = (r < rows ? ent / inDiv : 0) * K;
        yr[r] = ent;
    }
    float acc[TR];
#pragma unroll
    for (int r = 0; r < TR; r++) acc[r] = 0.f;

    bool vec = true;
    if constexpr (F::FLOAT) vec = (K & 7) == 0;
    if (vec) {
        const int p = lane & 3;
        const int nchunks = (K + 31) >> 5;
        for (int c = lane >> 2; c < nchunks; c += 8) {
            if (c * 32 + 8 * p >= K) continue; // a float type's partial chunk
            float wv[8];
            F::dec(row, c, p, wv);
            const int k0 = c * 32 + F::off0(p), k1 = c * 32 + F::off1(p);
#pragma unroll
            for (int r = 0; r < TR; r++) {
                if (r < rows) {
                    float4 a = __ldg((const float4 *)(x + xo[r] + k0));
                    float4 b = __ldg((const float4 *)(x + xo[r] + k1));
                    float s = acc[r];
                    s = fmaf(wv[0], a.x, s);
                    s = fmaf(wv[1], a.y, s);
                    s = fmaf(wv[2], a.z, s);
                    s = fmaf(wv[3], a.w, s);
                    s = fmaf(wv[4], b.x, s);
                    s = fmaf(wv[5], b.y, s);
                    s = fmaf(wv[6], b.z, s);
                    s = fmaf(wv[7], b.w, s);
                    acc[r] = s;
                }
            }
        }
    } else {
        if constexpr (F::FLOAT) {
            for (int k = lane; k < K; k += 32) {
                float wk = F::one(row, k);
#pragma unroll
                for (int r = 0; r < TR; r++)
                    if (r < rows) acc[r] = fmaf(wk, __ldg(x + xo[r] + k), acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < TR; r++) {
        float s = acc[r];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        acc[r] = s;
    }
    if (lane == 0) {
        float b = bias ? bias[n] : 0.f;
#pragma unroll
        for (int r = 0; r < TR; r++)
            if (r < rows) y[(size_t)yr[r] * N + n] = bias ? __fadd_rn(acc[r], b) : acc[r];
    }
}

template <class F>
__device__ __forceinline__ void mm_few_any(float *y, const float *x, const uint8_t *w, const float *bias, int T, int N,
                                           int K, long long wstride, const int *list, const int *counts, int ls,
                                           int inDiv) {
    // Register blocks of 2, 4 and 8 rows; rows past T are skipped. (One
    // row is mm_vec_*, an entry of its own: the eight rows' registers
    // would halve a decode's occupancy.)
    if (T <= 2)
        mm_few<F, 2>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);
    else if (T <= 4)
        mm_few<F, 4>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);
    else
        mm_few<F, MAX_FEW>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);
}

#define TM 64
#define TN 64
#define TK 32
#define TPAD 4

template <class F>
__device__ __forceinline__ void mm_tile(float *__restrict__ y, const float *__restrict__ x, const uint8_t *__restrict__ w,
                                        const float *__restrict__ bias, int T, int N, int K, long long wstride,
                                        const int *__restrict__ list, const int *__restrict__ counts, int ls,
                                        int inDiv) {
    __shared__ __align__(16) float As[TK][TM + TPAD]; // x tile, transposed: As[k][m]
    __shared__ __align__(16) float Bs[TK][TN + TPAD]; // weight tile: Bs[k][n]
    const int tid = threadIdx.x;
    const int e = blockIdx.z;
    const int rows = list ? min(counts[e], T) : T;
    const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    if (m0 >= rows) return; // uniform over the block

    // This thread loads x rows lm and lm+32 of the tile, 4 values at kq*4.
    const int lm = tid >> 3, kq = tid & 7;
    const float *xa = nullptr, *xb = nullptr;
    if (m0 + lm < rows) xa = x + (size_t)((list ? list[(size_t)e * ls + m0 + lm] : m0 + lm) / inDiv) * K;
    if (m0 + lm + 32 < rows) xb = x + (size_t)((list ? list[(size_t)e * ls + m0 + lm + 32] : m0 + lm + 32) / inDiv) * K;
    // It decodes part wp of column wn's chunk.
    const int wn = tid & 63, wp = tid >> 6;
    const uint8_t *wrow = n0 + wn < N ? w + (size_t)e * wstride + (size_t)(n0 + wn) * F::rowBytes(K) : nullptr;
    // It sums rows ty*4.. and columns tx*4.. of the tile.
    const int ty = tid >> 4, tx = tid & 15;

    bool vec = true;
    if constexpr (F::FLOAT) vec = (K & 7) == 0;

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.f;

    const int nchunks = (K + TK - 1) / TK;
    for (int c = 0; c < nchunks; c++) {
        const int k = c * TK + kq * 4;
        float va[4] = {0.f, 0.f, 0.f, 0.f}, vb[4] = {0.f, 0.f, 0.f, 0.f};
        if (vec) {
            if (k < K) {
                if (xa) {
                    float4 t = __ldg((const float4 *)(xa + k));
                    va[0] = t.x, va[1] = t.y, va[2] = t.z, va[3] = t.w;
                }
                if (xb) {
                    float4 t = __ldg((const float4 *)(xb + k));
                    vb[0] = t.x, vb[1] = t.y, vb[2] = t.z, vb[3] = t.w;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (k + i < K) {
                    if (xa) va[i] = __ldg(xa + k + i);
                    if (xb) vb[i] = __ldg(xb + k + i);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            As[kq * 4 + i][lm] = va[i];
            As[kq * 4 + i][lm + 32] = vb[i];
        }

        float wv[8];
#pragma unroll
        for (int i = 0; i < 8; i++) wv[i] = 0.f;
        const int o0 = F::off0(wp), o1 = F::off1(wp);
        if (wrow) {
            if (vec) {
                if (c * TK + 8 * wp < K) F::dec(wrow, c, wp, wv);
            } else {
                if constexpr (F::FLOAT) {
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        if (c * TK + o0 + i < K) wv[i] = F::one(wrow, c * TK + o0 + i);
                        if (c * TK + o1 + i < K) wv[4 + i] = F::one(wrow, c * TK + o1 + i);
                    }
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            Bs[o0 + i][wn] = wv[i];
            Bs[o1 + i][wn] = wv[4 + i];
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TK; kk++) {
            float4 a = *(const float4 *)&As[kk][ty * 4];
            float4 b = *(const float4 *)&Bs[kk][tx * 4];
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int m = m0 + ty * 4 + i;
        if (m >= rows) continue;
        const int yrow = list ? list[(size_t)e * ls + m] : m;
        float *yp = y + (size_t)yrow * N;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = n0 + tx * 4 + j;
            if (n < N) yp[n] = bias ? __fadd_rn(acc[i][j], bias[n]) : acc[i][j];
        }
    }
}

#define MM_KERNELS(NAME, F)                                                                                           \
    extern "C" __global__ void __launch_bounds__(FEW_WARPS * 32)                                                     \
        mm_vec_##NAME(float *y, const float *x, const uint8_t *w, const float *bias, int T, int N, int K,           \
                      long long wstride, const int *list, const int *counts, int ls, int inDiv) {                   \
        mm_few<F, 1>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);                                     \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(FEW_WARPS * 32)                                                     \
        mm_few_##NAME(float *y, const float *x, const uint8_t *w, const float *bias, int T, int N, int K,           \
                      long long wstride, const int *list, const int *counts, int ls, int inDiv) {                   \
        mm_few_any<F>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);                                    \
    }                                                                                                                \
    extern "C" __global__ void __launch_bounds__(256)                                                                \
        mm_tile_##NAME(float *y, const float *x, const uint8_t *w, const float *bias, int T, int N, int K,          \
                       long long wstride, const int *list, const int *counts, int ls, int inDiv) {                  \
        mm_tile<F>(y, x, w, bias, T, N, K, wstride, list, counts, ls, inDiv);                                       \
    }                                                                                                                \
    extern "C" __global__ void embed_##NAME(float *out, const int *ids, const uint8_t *table, int T, int V, int D) { \
        embed<F>(out, ids, table, T, V, D);                                                                          \
    }

// embed writes row ids[t] of table [V, D] widened into out[t] (grid T):
// an id outside [0, V) (padding, or a bad token) gives a row of zeros.
template <class F>
__device__ __forceinline__ void embed(float *__restrict__ out, const int *__restrict__ ids,
                                     const uint8_t *__restrict__ table, int T, int V, int D) {
    const int t = blockIdx.x;
    if (t >= T) return;
    const int id = ids[t];
    float *o = out + (size_t)t * D;
    if (id < 0 || id >= V) {
        for (int k = threadIdx.x; k < D; k += blockDim.x) o[k] = 0.f;
        return;
    }
    const uint8_t *row = table + (size_t)id * F::rowBytes(D);
    bool vec = true;
    if constexpr (F::FLOAT) vec = (D & 7) == 0;
    if (vec) {
        const int nparts = (D + 31) / 32 * 4;
        for (int i = threadIdx.x; i < nparts; i += blockDim.x) {
            const int c = i >> 2, p = i & 3;
            if (c * 32 + 8 * p >= D) continue;
            float wv[8];
            F::dec(row, c, p, wv);
            const int k0 = c * 32 + F::off0(p), k1 = c * 32 + F::off1(p);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                o[k0 + j] = wv[j];
                o[k1 + j] = wv[4 + j];
            }
        }
    } else {
        if constexpr (F::FLOAT) {
            for (int k = threadIdx.x; k < D; k += blockDim.x) o[k] = F::one(row, k);
        }
    }
}

MM_KERNELS(f32, FmtF32)
MM_KERNELS(bf16, FmtBF16)
MM_KERNELS(f16, FmtF16)
MM_KERNELS(q8_0, FmtQ8_0)
MM_KERNELS(q4_0, FmtQ4_0)
MM_KERNELS(q5_0, FmtQ5_0)
MM_KERNELS(q4_k, FmtQ4_K)
MM_KERNELS(q6_k, FmtQ6_K)
MM_KERNELS(q4_1, FmtQ4_1)
MM_KERNELS(q5_1, FmtQ5_1)
MM_KERNELS(iq4_nl, FmtIQ4_NL)
MM_KERNELS(q2_k, FmtQ2_K)
MM_KERNELS(q3_k, FmtQ3_K)
MM_KERNELS(q5_k, FmtQ5_K)
MM_KERNELS(iq4_xs, FmtIQ4_XS)

// add_bias adds b[N] to every row of y[T, N] (n = T*N values).
extern "C" __global__ void add_bias(float *y, const float *b, long long n, int N) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(y[i], b[i % N]);
}

// round_bf16 is float32 to BF16 bits, to nearest, ties to even; a NaN
// stays a quiet NaN (simd.RoundActs).
__device__ __forceinline__ uint32_t round_bf16(float v) {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u | 0x00400000u) >> 16;
    return (u + 0x7fffu + (u >> 16 & 1)) >> 16;
}

// to_half writes x[n] as 16-bit floats: kind 1 BF16, 2 F16, each rounded
// to nearest, ties to even (the fast mode's activations for cuBLAS).
extern "C" __global__ void to_half(unsigned short *dst, const float *x, long long n, int kind) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i];
        dst[i] = kind == 1 ? (unsigned short)round_bf16(v) : __half_as_ushort(__float2half_rn(v));
    }
}

// round_half writes x[n] rounded to a 16-bit float's precision and
// widened back (kind 1 BF16, 2 F16): the fast mode's activations for the
// exact kernels, as simd.RoundActs. dst may be x.
extern "C" __global__ void round_half(float *dst, const float *x, long long n, int kind) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float v = x[i];
        dst[i] = kind == 1 ? __uint_as_float(round_bf16(v) << 16) : __half2float(__float2half_rn(v));
    }
}
