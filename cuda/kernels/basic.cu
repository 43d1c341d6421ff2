// Elementwise kernels, norms, RoPE and row moves: the CUDA side of the
// small ops in layers (kernels.go, mlp.go, layernorm.go) and graphs
// (exec.go, input.go, graphs.go). Each computes what the op's CPU kernel
// computes; where that is float32 arithmetic the operations are spelled
// with __fmul_rn, __fadd_rn, ... so that nvcc does not contract them into
// FMAs (Go on amd64 rounds each operation), and where the CPU goes
// through float64 (cos/sin of RoPE angles, erf, tanh, the norms' sums),
// so does the kernel.

#include <cuda_fp16.h>

// Elementwise kernels take one thread a value: grid Blocks(n, 256).
#define IDX() (int)(blockIdx.x * blockDim.x + threadIdx.x)

extern "C" __global__ void copy32(float *dst, const float *src, int n) {
    int i = IDX();
    if (i < n) dst[i] = src[i];
}

// ---------------------------------------------------------------------
// Activations (layers/kernels.go activationFor).

// exp32 is simd.Exp32 (Cephes' expf) operation for operation.
__device__ __forceinline__ float exp32(float x) {
    if (x > 88.72283f) return __int_as_float(0x7f800000);
    if (x < -87.33654f) return 0.0f;
    if (x != x) return x;
    float n = (float)__float2int_rz(__fadd_rn(__fmul_rn(x, 1.442695041f), x < 0.0f ? -0.5f : 0.5f));
    float r = __fadd_rn(__fsub_rn(x, __fmul_rn(n, 0.693359375f)), __fmul_rn(n, 2.12194440e-4f));
    float p = 1.9875691500e-4f;
    p = __fadd_rn(__fmul_rn(p, r), 1.3981999507e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 8.3334519073e-3f);
    p = __fadd_rn(__fmul_rn(p, r), 4.1665795894e-2f);
    p = __fadd_rn(__fmul_rn(p, r), 1.6666665459e-1f);
    p = __fadd_rn(__fmul_rn(p, r), 5.0000001201e-1f);
    float y = __fadd_rn(__fadd_rn(__fmul_rn(__fmul_rn(p, r), r), r), 1.0f);
    int ni = (int)n;
    if (ni > 127) return __fmul_rn(__fmul_rn(2.0f, y), __int_as_float((unsigned)(ni + 126) << 23));
    return __fmul_rn(y, __int_as_float((unsigned)(ni + 127) << 23));
}

// The activation kinds; layers/cuda_basic.go numbers them alike.
#define ACT_SILU 0
#define ACT_GELU_TANH 1       // gelu_pytorch_tanh, gelu_new
#define ACT_GELU_TANH_TABLE 2 // the same, as llama.cpp's F16 table gives it
#define ACT_GELU_ERF 3        // gelu
#define ACT_RELU 4

// float32(math.Sqrt(2/math.Pi))
#define SQRT_2_OVER_PI __int_as_float(0x3f4c422a)

__device__ __forceinline__ float silu(float x) {
    return __fdiv_rn(x, __fadd_rn(1.0f, exp32(-x)));
}

// geluTanh: 0.5·x·(2 - 2/(e^(2u)+1)), u = √(2/π)·(x + 0.044715·x³).
__device__ __forceinline__ float gelu_tanh(float x) {
    float x3 = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
    float u = __fmul_rn(SQRT_2_OVER_PI, __fadd_rn(x, x3));
    float t = __fsub_rn(2.0f, __fdiv_rn(2.0f, __fadd_rn(exp32(__fmul_rn(2.0f, u)), 1.0f)));
    return __fmul_rn(__fmul_rn(0.5f, x), t);
}

// simd.GELUTable: x rounded to F16, ggml_gelu_f32 of it with tanh in
// float64, the result rounded to F16; 0 below -10 and x above 10.
__device__ __forceinline__ float gelu_table(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    float h = __half2float(__float2half_rn(x));
    float u = __fmul_rn(__fmul_rn(SQRT_2_OVER_PI, h), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, h), h)));
    float g = __fmul_rn(__fmul_rn(0.5f, h), __fadd_rn(1.0f, (float)tanh((double)u)));
    return __half2float(__float2half_rn(g));
}

// geluErf: float32(0.5·x·(1 + erf(x/√2))) in float64.
__device__ __forceinline__ float gelu_erf(float x) {
    double d = (double)x;
    return (float)__dmul_rn(__dmul_rn(0.5, d), __dadd_rn(1.0, erf(__ddiv_rn(d, 1.4142135623730951))));
}

// relu: Go's max(x, 0): NaN stays NaN, -0 gives +0.
__device__ __forceinline__ float relu(float x) {
    if (x != x) return x;
    return x > 0.0f ? x : 0.0f;
}

__device__ __forceinline__ float activation(float x, int kind) {
    switch (kind) {
    case ACT_SILU: return silu(x);
    case ACT_GELU_TANH: return gelu_tanh(x);
    case ACT_GELU_TANH_TABLE: return gelu_table(x);
    case ACT_GELU_ERF: return gelu_erf(x);
    default: return relu(x);
    }
}

// act: out[i] = act(x[i]) (activate, the non-gated MLP's).
extern "C" __global__ void act(float *out, const float *x, int n, int kind) {
    int i = IDX();
    if (i < n) out[i] = activation(x[i], kind);
}

// gated_act: out[i] = act(g[i]) · u[i] (gatedAct, SwiGLU and GeGLU).
extern "C" __global__ void gated_act(float *out, const float *g, const float *u, int n, int kind) {
    int i = IDX();
    if (i < n) out[i] = __fmul_rn(activation(g[i], kind), u[i]);
}

// ---------------------------------------------------------------------
// Pointwise maps and the residual add.

// scale_f32: out[i] = x[i] · p.
extern "C" __global__ void scale_f32(float *out, const float *x, int n, float p) {
    int i = IDX();
    if (i < n) out[i] = __fmul_rn(x[i], p);
}

// softcap: out[i] = float32(c · tanh(x[i] / c)) in float64.
extern "C" __global__ void softcap(float *out, const float *x, int n, float p) {
    int i = IDX();
    if (i < n) {
        double c = (double)p;
        out[i] = (float)__dmul_rn(c, tanh(__ddiv_rn((double)x[i], c)));
    }
}

// add_f32: out[i] = a[i] + b[i].
extern "C" __global__ void add_f32(float *out, const float *a, const float *b, int n) {
    int i = IDX();
    if (i < n) out[i] = __fadd_rn(a[i], b[i]);
}

// ---------------------------------------------------------------------
// Norms: one block a row, blockDim a multiple of 32 (at most 1024), the
// row's sums in float64 as the CPU takes them.

__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// block_sum returns the sum of v over the block to every thread.
__device__ double block_sum(double v) {
    __shared__ double part[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads(); // part may still be read by a previous call
    if (lane == 0) part[warp] = v;
    __syncthreads();
    v = lane < warps ? part[lane] : 0.0;
    if (warp == 0) v = warp_sum(v);
    if (threadIdx.x == 0) part[0] = v;
    __syncthreads();
    return part[0];
}

// rms_norm: grid rows, row r of x [rows, d] to out:
// inv = float32(1/sqrt(float64(float32(Σx²/d) + eps))),
// out[j] = (offset + w[j]) · (x[j] · inv).
extern "C" __global__ void rms_norm(float *out, const float *x, const float *w, int rows, int d, float eps, float offset) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * d;
    float *yr = out + (size_t)r * d;
    double ss = 0.0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        double v = (double)xr[j];
        ss = __dadd_rn(ss, __dmul_rn(v, v));
    }
    ss = block_sum(ss);
    float m = (float)__ddiv_rn(ss, (double)d);
    float inv = (float)__ddiv_rn(1.0, __dsqrt_rn((double)__fadd_rn(m, eps)));
    for (int j = threadIdx.x; j < d; j += blockDim.x)
        yr[j] = __fmul_rn(__fadd_rn(offset, w[j]), __fmul_rn(xr[j], inv));
}

// layer_norm: grid rows, row r of x [rows, d] to out, with eps a float64
// (its bits): mean and inv = 1/sqrt(var + eps) in float64,
// out[j] = float32((x[j] - mean)·inv) · w[j] + b[j].
extern "C" __global__ void layer_norm(float *out, const float *x, const float *w, const float *b, int rows, int d, long long epsBits) {
    int r = blockIdx.x;
    if (r >= rows) return;
    const float *xr = x + (size_t)r * d;
    float *yr = out + (size_t)r * d;
    double s = 0.0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) s = __dadd_rn(s, (double)xr[j]);
    double mean = __ddiv_rn(block_sum(s), (double)d);
    double ss = 0.0;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        double e = __dsub_rn((double)xr[j], mean);
        ss = __dadd_rn(ss, __dmul_rn(e, e));
    }
    ss = block_sum(ss);
    double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(ss, (double)d), __longlong_as_double(epsBits))));
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
        float v = (float)__dmul_rn(__dsub_rn((double)xr[j], mean), inv);
        yr[j] = __fadd_rn(__fmul_rn(v, w[j]), b[j]);
    }
}

// ---------------------------------------------------------------------
// RoPE, NeoX "rotate half" (layers/kernels.go rotate).

// The inverse frequencies come as 128 float parameters f000..f127 (a
// kernel's parameters are fixed at capture, and the table is a constant
// of the op); unused ones are 0.
#define RF8(a) float f##a##0, float f##a##1, float f##a##2, float f##a##3, \
               float f##a##4, float f##a##5, float f##a##6, float f##a##7
#define RS8(a, k) inv[k + 0] = f##a##0; inv[k + 1] = f##a##1; inv[k + 2] = f##a##2; inv[k + 3] = f##a##3; \
                  inv[k + 4] = f##a##4; inv[k + 5] = f##a##5; inv[k + 6] = f##a##6; inv[k + 7] = f##a##7;
#define ROPE_MAX_HALF 128

// rope: grid (T, Blocks(H·half, blockDim)), x and out [T, H, 2·half],
// pos int32 [T]. Row t at position p = pos[t] (p < 0: padding, zeros):
// angle a_i = float32(p)·inv_i in float32, cos and sin of it in float64
// rounded to float32, then each times scale in float32 when scale != 0
// (YaRN's attention factor); out[i] = x1·cos - x2·sin, out[i+half] =
// x2·cos + x1·sin, x1 = x[i], x2 = x[i+half], for each head.
extern "C" __global__ void rope(float *out, const float *x, const int *pos, int H, int half, float scale,
                                RF8(00), RF8(01), RF8(02), RF8(03), RF8(04), RF8(05), RF8(06), RF8(07),
                                RF8(08), RF8(09), RF8(10), RF8(11), RF8(12), RF8(13), RF8(14), RF8(15)) {
    __shared__ float inv[ROPE_MAX_HALF], cs[ROPE_MAX_HALF], sn[ROPE_MAX_HALF];
    int t = blockIdx.x;
    int p = pos[t];
    int pairs = H * half;
    int k = blockIdx.y * blockDim.x + threadIdx.x;
    size_t row = (size_t)t * pairs * 2;
    if (p < 0) { // the same for the whole block
        if (k < pairs) {
            int h = k / half, i = k - h * half;
            size_t off = row + (size_t)h * 2 * half;
            out[off + i] = 0.0f;
            out[off + i + half] = 0.0f;
        }
        return;
    }
    if (threadIdx.x == 0) {
        RS8(00, 0) RS8(01, 8) RS8(02, 16) RS8(03, 24) RS8(04, 32) RS8(05, 40) RS8(06, 48) RS8(07, 56)
        RS8(08, 64) RS8(09, 72) RS8(10, 80) RS8(11, 88) RS8(12, 96) RS8(13, 104) RS8(14, 112) RS8(15, 120)
    }
    __syncthreads();
    float fp = (float)p;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        double a = (double)__fmul_rn(fp, inv[i]);
        cs[i] = (float)cos(a);
        sn[i] = (float)sin(a);
        if (scale != 0.0f) {
            cs[i] = __fmul_rn(cs[i], scale);
            sn[i] = __fmul_rn(sn[i], scale);
        }
    }
    __syncthreads();
    if (k < pairs) {
        int h = k / half, i = k - h * half;
        size_t off = row + (size_t)h * 2 * half;
        float x1 = x[off + i], x2 = x[off + i + half];
        float c = cs[i], s = sn[i];
        out[off + i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        out[off + i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
}

// ---------------------------------------------------------------------
// Head and row moves.

// head_range: out [T, count, Dh] = heads [from, from+count) of x [T, H, Dh].
extern "C" __global__ void head_range(float *out, const float *x, int n, int H, int Dh, int from, int count) {
    int o = IDX();
    if (o >= n) return;
    int per = count * Dh;
    int t = o / per, rem = o - t * per;
    out[o] = x[((size_t)t * H + from) * Dh + rem];
}

// head_rows: within each group of hd values, out[i] = x[2i] and
// out[hd/2+i] = x[2i+1] (i < hd/2); inverse: out[2i] = x[i] and
// out[2i+1] = x[hd/2+i].
extern "C" __global__ void head_rows(float *out, const float *x, int n, int hd, int inverse) {
    int o = IDX();
    if (o >= n) return;
    int half = hd / 2;
    int g = o / hd, j = o - g * hd;
    int src;
    if (inverse) src = (j & 1) ? half + (j >> 1) : (j >> 1);
    else src = j < half ? 2 * j : 2 * (j - half) + 1;
    out[o] = x[(size_t)g * hd + src];
}

// pick_rows: out [R, D], row i = h[rows[i]] (h [T, D]); a row index
// outside [0, T) (-1: none wanted) gives zeros.
extern "C" __global__ void pick_rows(float *out, const float *h, const int *rows, int R, int T, int D) {
    int o = IDX();
    if (o >= R * D) return;
    int i = o / D, j = o - i * D;
    int r = rows[i];
    out[o] = (r >= 0 && r < T) ? h[(size_t)r * D + j] : 0.0f;
}

// replace_rows: out [T, D], row t = e[t] where mask[t] != 0, else h[t].
extern "C" __global__ void replace_rows(float *out, const float *h, const float *e, const int *mask, int n, int D) {
    int o = IDX();
    if (o >= n) return;
    out[o] = mask[o / D] != 0 ? e[o] : h[o];
}
