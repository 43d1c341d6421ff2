// A mixture of experts' routing, activation and combination (layers'
// sparseMoE). The products (router logits, experts' gate, up and down)
// are matmul.cu's, the experts' gathered by the row lists built here, on
// the device: routing changes every step, and a captured step replays
// these launches with the parameters it was captured with.
//
// Scratch, for T rows, E experts, top K:
//   ids[T*K], wts[T*K]  each row's experts, ascending, and their weights
//   list[E*T], counts[E] each expert's entries t*K+slot, in ascending order
// An entry t*K+slot is row t's slot-th expert: the gate and up products
// read x row t and write row t*K+slot of [T*K, F] buffers; the down
// product reads that row and writes row t*K+slot of [T*K, D]; the combine
// sums row t's K rows.

#include <cuda_fp16.h>
#include <math.h>

// moe_route turns router logits [T, E] into each row's top-K experts, as
// layers.route: a softmax over all E in float64 sums (each exp rounded to
// float32, divided by the float64 sum, rounded), the K largest
// probabilities (lower index first on ties), divided by their float32 sum
// (added largest first) when norm. ids and wts take the K experts in
// ascending order of expert, the order in which the combine adds them.
// Grid T, block 32 (one warp a row), dynamic shared memory E floats.
extern "C" __global__ void moe_route(const float *__restrict__ logits, int *__restrict__ ids, float *__restrict__ wts,
                                     int T, int E, int K, int norm) {
    extern __shared__ float probs[];
    const int t = blockIdx.x, lane = threadIdx.x;
    if (t >= T) return;
    const float *l = logits + (size_t)t * E;
    float m = l[0];
    for (int e = lane; e < E; e += 32) m = fmaxf(m, l[e]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    double sum = 0;
    for (int e = lane; e < E; e += 32) {
        double ex = exp((double)__fsub_rn(l[e], m));
        probs[e] = (float)ex;
        sum += ex;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    for (int e = lane; e < E; e += 32) probs[e] = (float)__ddiv_rn((double)probs[e], sum);
    __syncwarp();

    // K rounds of a warp argmax; a chosen expert's probability becomes -1.
    int sel[32];
    float pv[32];
    for (int i = 0; i < K; i++) {
        float best = -1.f;
        int bi = E;
        for (int e = lane; e < E; e += 32) {
            float p = probs[e];
            if (p > best) best = p, bi = e; // e ascends: ties keep the lower
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
        }
        sel[i] = bi, pv[i] = best;
        __syncwarp();
        if (lane == 0 && bi < E) probs[bi] = -1.f;
        __syncwarp();
    }
    if (lane != 0) return;
    float top = 0.f;
    for (int i = 0; i < K; i++) top = __fadd_rn(top, pv[i]);
    for (int i = 0; i < K; i++)
        if (norm) pv[i] = __fdiv_rn(pv[i], top);
    // Insertion sort by expert.
    for (int i = 1; i < K; i++) {
        int s = sel[i];
        float p = pv[i];
        int j = i - 1;
        for (; j >= 0 && sel[j] > s; j--) sel[j + 1] = sel[j], pv[j + 1] = pv[j];
        sel[j + 1] = s, pv[j + 1] = p;
    }
    for (int i = 0; i < K; i++) {
        ids[(size_t)t * K + i] = sel[i];
        wts[(size_t)t * K + i] = pv[i];
    }
}

// moe_lists writes expert e's entries (t*K+slot where ids holds e) into
// list[e*T ...] in ascending order and their number into counts[e]. Grid
// E, block 32.
extern "C" __global__ void moe_lists(const int *__restrict__ ids, int *__restrict__ list, int *__restrict__ counts,
                                     int T, int K) {
    const int e = blockIdx.x, lane = threadIdx.x;
    const int n = T * K;
    int c = 0;
    for (int base = 0; base < n; base += 32) {
        const int i = base + lane;
        const bool hit = i < n && ids[i] == e;
        const unsigned b = __ballot_sync(0xffffffffu, hit);
        if (hit) list[(size_t)e * T + c + __popc(b & ((1u << lane) - 1))] = i;
        c += __popc(b);
    }
    if (lane == 0) counts[e] = c;
}

// The activations of layers.activationFor, in the CPU's order of float32
// operations (exp and tanh may differ in the last place).
// The codes are basic.cu's (cuda.Act*).
#define ACT_SILU 0
#define ACT_GELU_TANH 1
#define ACT_GELU_TABLE 2 // fast mode's GELU: llama.cpp's F16 table
#define ACT_GELU_ERF 3
#define ACT_RELU 4

__device__ __forceinline__ float act_fn(float x, int act) {
    switch (act) {
    case ACT_SILU:
        return __fdiv_rn(x, __fadd_rn(1.f, expf(-x)));
    case ACT_GELU_TANH: {
        // u = √(2/π)·(x + 0.044715·x·x·x); 0.5·x·(2 - 2/(e^(2u)+1)).
        float x3 = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
        float u = __fmul_rn(0.7978845608028654f, __fadd_rn(x, x3));
        float r = __fsub_rn(2.f, __fdiv_rn(2.f, __fadd_rn(expf(__fmul_rn(2.f, u)), 1.f)));
        return __fmul_rn(__fmul_rn(0.5f, x), r);
    }
    case ACT_GELU_ERF: {
        double xd = x;
        return (float)__dmul_rn(__dmul_rn(0.5, xd), __dadd_rn(1.0, erf(__ddiv_rn(xd, 1.4142135623730951))));
    }
    case ACT_RELU:
        return fmaxf(x, 0.f);
    case ACT_GELU_TABLE: {
        if (x <= -10.f) return 0.f;
        if (x >= 10.f) return x;
        float h = __half2float(__float2half_rn(x));
        // ggml_gelu_f32: 0.5x(1 + tanh(√(2/π)·x·(1 + 0.044715x²))), the
        // result rounded to F16.
        float u = __fmul_rn(__fmul_rn(0.7978845608028654f, h), __fadd_rn(1.f, __fmul_rn(__fmul_rn(0.044715f, h), h)));
        float g = __fmul_rn(__fmul_rn(0.5f, h), __fadd_rn(1.f, (float)tanh((double)u)));
        return __half2float(__float2half_rn(g));
    }
    }
    return x;
}

// moe_act writes h = act(g)·u over n values; h may be g.
extern "C" __global__ void moe_act(float *h, const float *g, const float *u, long long n,
                                   int act) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        h[i] = __fmul_rn(act_fn(g[i], act), u[i]);
}

// moe_combine writes out[t] = Σ_slot y[t*K+slot]·wts[t*K+slot] over row
// t's experts in ascending order, from zero, each product rounded (the
// CPU's o += y·p). n = T*D values.
extern "C" __global__ void moe_combine(float *__restrict__ out, const float *__restrict__ y,
                                       const float *__restrict__ wts, long long n, int D, int K) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const long long t = i / D, d = i % D;
        float o = 0.f;
        for (int s = 0; s < K; s++) o = __fadd_rn(o, __fmul_rn(y[(t * K + s) * D + d], wts[t * K + s]));
        out[i] = o;
    }
}
