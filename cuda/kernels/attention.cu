// Attention: the KV pool's store, cached (paged) attention of a forward's
// rows over their sequences' keys, and the vision encoder's attention within
// blocks of rows.
//
// Every kernel runs 128 threads (4 warps) a block. The softmax is online
// (flash-style): keys are taken in chunks, each query keeps its running
// maximum and sum, and its output is rescaled when the maximum grows. As on
// the CPU (layers/attention_kernel.go), scores are float32, exponentials are
// full-precision expf of the score less the maximum, their sums float64, and
// the output is float(double(acc) * (1 / sum)).
//
// Cached attention reads a row's position and block table from rows[T][2]
// = {pos, table} (pos -1: padding) and its keys through blocks[]: the launch
// parameters are the program's shapes only, so a captured step replays.
// Two kernels share the rows: attn_tile takes a tile of 32 rows when at
// least TILE_MIN of them are real and all are of one sequence (a prefill:
// the tile's queries share every key chunk they load), attn_rows takes every
// other row (decodes), optionally split over keys, the splits merged by
// attn_combine. Both decide with tile_owned, from device memory.

#include <cuda_fp16.h>

#define NT 128       // threads a block
#define NWARP 4      // warps a block
#define TQ 32        // rows of a tile
#define RPW 8        // rows of a tile a warp takes
#define TILE_MIN 4   // real rows from which a one-sequence tile is attn_tile's
#define MAXD 256     // the widest head
#define FULL 0xffffffffu

typedef unsigned long long u64;

__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

__device__ __forceinline__ double warp_sumd(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

// kv_at is the address of kv head g's row at position p in the pool:
// block b = blocks[table + p/B] lives in slab b/SB at element offset
// (b%SB)·Hkv·B·D, laid out [Hkv][B][D], float32 or (f16) IEEE half.
__device__ __forceinline__ const char *kv_at(const u64 *slabs, const int *blocks, int table, int p,
                                             int g, int Hkv, int B, int SB, int D, int f16) {
    int b = blocks[table + p / B];
    long long off = ((long long)(b % SB) * Hkv * B + (long long)g * B + p % B) * D;
    return (const char *)slabs[b / SB] + off * (f16 ? 2 : 4);
}

// ld reads element i of a row, widening a half exactly.
__device__ __forceinline__ float ld(const char *row, int i, int f16) {
    return f16 ? __half2float(((const __half *)row)[i]) : ((const float *)row)[i];
}

// PagedKV finds a key's and a value's rows through one sequence's block
// table.
struct PagedKV {
    const u64 *kslabs, *vslabs;
    const int *blocks;
    int table, g, Hkv, B, SB, f16, Dk, Dv;

    // load copies position p's key and value rows to kd and vd, a lane
    // every 32 elements.
    __device__ __forceinline__ void load(float *kd, float *vd, int p, int lane) const {
        const char *kr = kv_at(kslabs, blocks, table, p, g, Hkv, B, SB, Dk, f16);
        const char *vr = kv_at(vslabs, blocks, table, p, g, Hkv, B, SB, Dv, f16);
        for (int d = lane; d < Dk; d += 32) kd[d] = ld(kr, d, f16);
        for (int d = lane; d < Dv; d += 32) vd[d] = ld(vr, d, f16);
    }
};

// DenseKV finds key p's rows at k and v + p·stride (a head of [R, H, Dh]).
struct DenseKV {
    const float *k, *v;
    long long stride;
    int Dk, Dv;

    __device__ __forceinline__ void load(float *kd, float *vd, int p, int lane) const {
        const float *kr = k + p * stride, *vr = v + p * stride;
        for (int d = lane; d < Dk; d += 32) kd[d] = kr[d];
        for (int d = lane; d < Dv; d += 32) vd[d] = vr[d];
    }
};

// tile_owned reports whether the tile of rows t0..t0+TQ-1 (those below T)
// is attn_tile's: at least TILE_MIN real rows, all with one block table.
// Every lane of the calling warp must call it.
__device__ __forceinline__ bool tile_owned(const int *rows, int T, int t0) {
    int t = t0 + (threadIdx.x & 31);
    int pos = -1, table = 0;
    if (t < T) {
        pos = rows[2 * t];
        table = rows[2 * t + 1];
    }
    unsigned real = __ballot_sync(FULL, pos >= 0);
    if (__popc(real) < TILE_MIN) return false;
    int first = __shfl_sync(FULL, table, __ffs(real) - 1);
    return __all_sync(FULL, pos < 0 || table == first);
}

// kv_store writes each real row's keys k [T, Hkv, Dk] and values v [T, Hkv,
// Dv] at its position in its sequence's block, rounded to half (nearest,
// ties to even) in an F16 pool. Grid (Hkv, T).
extern "C" __global__ void __launch_bounds__(NT)
kv_store(const u64 *kslabs, const u64 *vslabs, const int *rows, const int *blocks,
         const float *k, const float *v, int Hkv, int Dk, int Dv, int B, int SB, int f16) {
    int g = blockIdx.x, t = blockIdx.y;
    int pos = rows[2 * t], table = rows[2 * t + 1];
    if (pos < 0) return;
    const float *ks = k + ((long long)t * Hkv + g) * Dk;
    const float *vs = v + ((long long)t * Hkv + g) * Dv;
    char *kd = (char *)kv_at(kslabs, blocks, table, pos, g, Hkv, B, SB, Dk, f16);
    char *vd = (char *)kv_at(vslabs, blocks, table, pos, g, Hkv, B, SB, Dv, f16);
    if (f16) {
        for (int d = threadIdx.x; d < Dk; d += NT) ((__half *)kd)[d] = __float2half_rn(ks[d]);
        for (int d = threadIdx.x; d < Dv; d += NT) ((__half *)vd)[d] = __float2half_rn(vs[d]);
        return;
    }
    for (int d = threadIdx.x; d < Dk; d += NT) ((float *)kd)[d] = ks[d];
    for (int d = threadIdx.x; d < Dv; d += NT) ((float *)vd)[d] = vs[d];
}

// attn_rows attends row t's query heads of kv head g (the group
// g·G..g·G+G-1, G = Hq/Hkv) over split s of its keys lo..pos: keys by
// chunks of KC, loaded once for the group. Grid (Hkv, T, S).
//
// With S = 1 it writes the output rows (zero for padding) and, when stats
// is set, each head's maximum and sum; with S > 1 the unnormalized output,
// maximum and sum of its split to part_o [T, Hq, S, Dv] and part_ml [T, Hq,
// S, 2], for attn_combine. With probs set it stores each score at probs
// [T, Hq, cap] for attn_probs. With tiled set, rows of a tile attn_tile
// owns are left to it.
//
// Shared: lsum[G] doubles, then floats mx[G], resc[G], qs[G·Dk],
// sc[G·KC], acc[G·Dv], ks[KC·Dk], vs[KC·Dv].
extern "C" __global__ void __launch_bounds__(NT)
attn_rows(float *out, const float *q, const u64 *kslabs, const u64 *vslabs, const int *rows,
          const int *blocks, float *probs, double *stats, float *part_o, double *part_ml, int T, int Hq,
          int Hkv, int Dk, int Dv, int B, int SB, int f16, int window, int cap, int S, int KC, int tiled,
          float scale) {
    extern __shared__ double smem[];
    int g = blockIdx.x, t = blockIdx.y, s = blockIdx.z;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int G = Hq / Hkv;
    if (tiled && tile_owned(rows, T, t / TQ * TQ)) return;
    int pos = rows[2 * t], table = rows[2 * t + 1];
    long long qh = (long long)t * Hq + (long long)g * G; // the group's first (row, head)
    if (pos < 0) {
        if (S == 1)
            for (int i = tid; i < G * Dv; i += NT) out[qh * Dv + i] = 0.f;
        return;
    }
    double *lsum = smem;
    float *mx = (float *)(lsum + G), *resc = mx + G, *qs = resc + G, *sc = qs + G * Dk;
    float *acc = sc + G * KC, *ks = acc + G * Dv, *vs = ks + KC * Dk;

    int lo = window > 0 ? max(0, pos - window + 1) : 0;
    int per = (pos + 1 - lo + S - 1) / S;
    per = (per + KC - 1) / KC * KC; // whole chunks a split
    int k0 = lo + s * per, k1 = min(pos + 1, k0 + per);
    PagedKV kv{kslabs, vslabs, blocks, table, g, Hkv, B, SB, f16, Dk, Dv};

    for (int i = tid; i < G * Dk; i += NT) qs[i] = q[qh * Dk + i];
    for (int i = tid; i < G * Dv; i += NT) acc[i] = 0.f;
    for (int h = tid; h < G; h += NT) {
        mx[h] = -INFINITY;
        lsum[h] = 0.0;
    }
    for (int c0 = k0; c0 < k1; c0 += KC) {
        int nk = min(KC, k1 - c0);
#pragma unroll 2
        for (int j = warp; j < nk; j += NWARP) kv.load(ks + j * Dk, vs + j * Dv, c0 + j, lane);
        __syncthreads();
        // Scores: a warp a (head, key), lanes across the dot product.
        for (int i = warp; i < G * nk; i += NWARP) {
            int h = i / nk, j = i - h * nk;
            const float *qr = qs + h * Dk, *kr = ks + j * Dk;
            float a = 0.f;
            for (int d = lane; d < Dk; d += 32) a += qr[d] * kr[d];
            a = warp_sum(a) * scale;
            if (lane == 0) {
                sc[h * KC + j] = a;
                if (probs) probs[(qh + h) * cap + c0 + j] = a;
            }
        }
        __syncthreads();
        // Each head's chunk maximum, rescale and exponentials: a warp a head.
        for (int h = warp; h < G; h += NWARP) {
            float *e = sc + h * KC;
            float m = -INFINITY;
            for (int j = lane; j < nk; j += 32) m = fmaxf(m, e[j]);
            m = warp_max(m);
            float mold = mx[h], mnew = fmaxf(mold, m);
            double part = 0.0;
            for (int j = lane; j < nk; j += 32) {
                float x = expf(e[j] - mnew);
                e[j] = x;
                part += (double)x;
            }
            part = warp_sumd(part);
            __syncwarp();
            if (lane == 0) {
                float r = expf(mold - mnew); // 0 on the first chunk (mold = -inf)
                resc[h] = r;
                mx[h] = mnew;
                lsum[h] = lsum[h] * (double)r + part;
            }
        }
        __syncthreads();
        // The weighted values: a thread an output element.
        for (int i = tid; i < G * Dv; i += NT) {
            int h = i / Dv, d = i - h * Dv;
            const float *e = sc + h * KC;
            float a = acc[i] * resc[h];
            for (int j = 0; j < nk; j++) a += e[j] * vs[j * Dv + d];
            acc[i] = a;
        }
        __syncthreads();
    }
    __syncthreads(); // the initial values when the split has no keys
    if (S == 1) {
        for (int i = tid; i < G * Dv; i += NT) out[qh * Dv + i] = (float)((double)acc[i] * (1.0 / lsum[i / Dv]));
        if (stats)
            for (int h = tid; h < G; h += NT) {
                stats[2 * (qh + h)] = (double)mx[h];
                stats[2 * (qh + h) + 1] = lsum[h];
            }
        return;
    }
    for (int i = tid; i < G * Dv; i += NT) {
        int h = i / Dv;
        part_o[((qh + h) * S + s) * Dv + (i - h * Dv)] = acc[i];
    }
    for (int h = tid; h < G; h += NT) {
        part_ml[2 * ((qh + h) * S + s)] = (double)mx[h];
        part_ml[2 * ((qh + h) * S + s) + 1] = lsum[h];
    }
}

// attn_combine merges row t's head h over attn_rows's S splits: with M the
// largest split maximum, out = Σ acc·e^(m-M) / Σ l·e^(m-M). Padding rows
// come out zero; rows of a tile attn_tile owns (tiled) are left alone.
// Grid (Hq, T).
extern "C" __global__ void __launch_bounds__(NT)
attn_combine(float *out, const float *part_o, const double *part_ml, double *stats, const int *rows, int T,
             int Hq, int Dv, int S, int tiled) {
    int h = blockIdx.x, t = blockIdx.y;
    if (tiled && tile_owned(rows, T, t / TQ * TQ)) return;
    long long qh = (long long)t * Hq + h;
    float *o = out + qh * Dv;
    if (rows[2 * t] < 0) {
        for (int d = threadIdx.x; d < Dv; d += NT) o[d] = 0.f;
        return;
    }
    const double *ml = part_ml + qh * S * 2;
    const float *po = part_o + qh * S * Dv;
    float M = -INFINITY;
    for (int s = 0; s < S; s++) M = fmaxf(M, (float)ml[2 * s]);
    double L = 0.0;
    for (int s = 0; s < S; s++)
        if (ml[2 * s + 1] > 0.0) L += ml[2 * s + 1] * (double)expf((float)ml[2 * s] - M);
    double inv = 1.0 / L;
    for (int d = threadIdx.x; d < Dv; d += NT) {
        float a = 0.f;
        for (int s = 0; s < S; s++)
            if (ml[2 * s + 1] > 0.0) a += po[s * Dv + d] * expf((float)ml[2 * s] - M);
        o[d] = (float)((double)a * inv);
    }
    if (stats && threadIdx.x == 0) {
        stats[2 * qh] = (double)M;
        stats[2 * qh + 1] = L;
    }
}

// attn_probs turns the scores of row t's head h at probs[t, h, 0..cap) into
// probabilities, float(double(e^(s-M)) · (1/L)) with the head's maximum and
// sum from stats, over its keys lo..pos, and zero elsewhere and for padding.
// Grid (ceil(cap/256), Hq, T), 256 threads.
extern "C" __global__ void __launch_bounds__(256)
attn_probs(float *probs, const double *stats, const int *rows, int Hq, int cap, int window) {
    int j = blockIdx.x * 256 + threadIdx.x, h = blockIdx.y, t = blockIdx.z;
    if (j >= cap) return;
    long long qh = (long long)t * Hq + h;
    float *p = probs + qh * cap;
    int pos = rows[2 * t];
    int lo = window > 0 ? max(0, pos - window + 1) : 0;
    if (pos < 0 || j < lo || j > pos) {
        p[j] = 0.f;
        return;
    }
    float e = expf(p[j] - (float)stats[2 * qh]);
    p[j] = (float)((double)e * (1.0 / stats[2 * qh + 1]));
}

// tile_attend attends the queries of up to TQ rows (row r's at q +
// (qh0 + r·rstride)·Dk, its output at out + (qh0 + r·rstride)·Dv) over keys
// klo..khi, row r seeing keys rlo[r]..rhi[r] only (none when rhi < rlo:
// its output is zero). Warp w takes rows w·RPW..w·RPW+RPW-1; a chunk of KC
// keys (32 or 64) is loaded by the block, each lane scores keys lane and
// lane+32 for its warp's rows, keeps its rows' outputs for elements lane,
// lane+32, ... (Dv ≤ MAXD) in registers, and its share of the sums.
// With probs set, scores go to probs + (qh0 + r·rstride)·cap, and each
// row's maximum and sum to stats.
//
// Shared (floats): qs[TQ·Dk], ks[KC·(Dk+1)] (padded: lanes read a column),
// vs[KC·Dv], ps[NWARP·RPW·KC].
template <class KV>
__device__ __forceinline__ void tile_attend(const KV &kv, float *sm, float *out, const float *q, long long qh0,
                                            int rstride, int nrows, const int *rlo, const int *rhi, int klo,
                                            int khi, int Dk, int Dv, int KC, float scale, float *probs,
                                            double *stats, int cap) {
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int kp = Dk + 1;
    float *qs = sm, *ks = qs + TQ * Dk, *vs = ks + KC * kp, *pw = vs + KC * Dv + warp * RPW * KC;
    for (int i = tid; i < TQ * Dk; i += NT) {
        int r = i / Dk;
        qs[i] = r < nrows && rhi[r] >= rlo[r] ? q[(qh0 + (long long)r * rstride) * Dk + (i - r * Dk)] : 0.f;
    }
    int r0 = warp * RPW, nc = (Dv + 31) / 32, two = KC > 32;
    float m[RPW], acc[RPW][MAXD / 32];
    double l[RPW];
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0;
#pragma unroll
        for (int c = 0; c < MAXD / 32; c++) acc[r][c] = 0.f;
    }
    for (int c0 = klo; c0 <= khi; c0 += KC) {
        int nk = min(KC, khi + 1 - c0);
        for (int j = warp; j < KC; j += NWARP) {
            if (j < nk) {
                kv.load(ks + j * kp, vs + j * Dv, c0 + j, lane);
            } else { // zeros: a masked key's weight 0 must not meet a NaN
                for (int d = lane; d < Dk; d += 32) ks[j * kp + d] = 0.f;
                for (int d = lane; d < Dv; d += 32) vs[j * Dv + d] = 0.f;
            }
        }
        __syncthreads();
        float s0[RPW], s1[RPW];
#pragma unroll
        for (int r = 0; r < RPW; r++) s0[r] = s1[r] = 0.f;
        const float *k0 = ks + lane * kp, *k1 = ks + (two ? lane + 32 : lane) * kp, *qw = qs + r0 * Dk;
        for (int d = 0; d < Dk; d++) {
            float a = k0[d], b = k1[d];
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float x = qw[r * Dk + d];
                s0[r] += x * a;
                s1[r] += x * b;
            }
        }
#pragma unroll
        for (int r = 0; r < RPW; r++) {
            int lo = rlo[r0 + r], hi = rhi[r0 + r];
            int p0 = c0 + lane, p1 = c0 + lane + 32;
            bool v0 = lane < nk && p0 >= lo && p0 <= hi;
            bool v1 = two && lane + 32 < nk && p1 >= lo && p1 <= hi;
            float x0 = v0 ? s0[r] * scale : -INFINITY, x1 = v1 ? s1[r] * scale : -INFINITY;
            if (probs) {
                float *pr = probs + (qh0 + (long long)(r0 + r) * rstride) * cap;
                if (v0) pr[p0] = x0;
                if (v1) pr[p1] = x1;
            }
            float mnew = fmaxf(m[r], warp_max(fmaxf(x0, x1)));
            float rs = 1.f, e0 = 0.f, e1 = 0.f;
            if (mnew != -INFINITY) { // the row has seen a key
                rs = expf(m[r] - mnew);
                e0 = expf(x0 - mnew);
                e1 = expf(x1 - mnew);
            }
            m[r] = mnew;
            l[r] = l[r] * (double)rs + (double)e0 + (double)e1; // this lane's share
            pw[r * KC + lane] = e0;
            if (two) pw[r * KC + lane + 32] = e1;
#pragma unroll
            for (int c = 0; c < MAXD / 32; c++) acc[r][c] *= rs;
        }
        __syncwarp();
        for (int j = 0; j < nk; j++) {
            float v[MAXD / 32];
#pragma unroll
            for (int c = 0; c < MAXD / 32; c++) v[c] = c < nc && lane + 32 * c < Dv ? vs[j * Dv + lane + 32 * c] : 0.f;
#pragma unroll
            for (int r = 0; r < RPW; r++) {
                float e = pw[r * KC + j];
#pragma unroll
                for (int c = 0; c < MAXD / 32; c++)
                    if (c < nc) acc[r][c] += e * v[c];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < RPW; r++) {
        int row = r0 + r;
        if (row >= nrows) break; // warp-uniform
        double L = warp_sumd(l[r]);
        long long qh = qh0 + (long long)row * rstride;
        float *o = out + qh * Dv;
        if (rhi[row] < rlo[row]) {
            for (int d = lane; d < Dv; d += 32) o[d] = 0.f;
            continue;
        }
        double inv = 1.0 / L;
#pragma unroll
        for (int c = 0; c < MAXD / 32; c++) {
            int d = lane + 32 * c;
            if (c < nc && d < Dv) o[d] = (float)((double)acc[r][c] * inv);
        }
        if (stats && lane == 0) {
            stats[2 * qh] = (double)m[r];
            stats[2 * qh + 1] = L;
        }
    }
}

// attn_tile attends query head h of the tile of rows blockIdx.y·TQ.. when
// tile_owned gives it the tile (one sequence, at least TILE_MIN real
// rows): every key chunk of the rows' union of key ranges is loaded once
// for the tile. Padding rows of the tile come out zero. Grid (Hq,
// ceil(T/TQ)). Shared: tile_attend's.
extern "C" __global__ void __launch_bounds__(NT)
attn_tile(float *out, const float *q, const u64 *kslabs, const u64 *vslabs, const int *rows, const int *blocks,
          float *probs, double *stats, int T, int Hq, int Hkv, int Dk, int Dv, int B, int SB, int f16, int window,
          int cap, int KC, float scale) {
    extern __shared__ float tsm[];
    __shared__ int rlo[TQ], rhi[TQ], span[3];
    int h = blockIdx.x, t0 = blockIdx.y * TQ, tid = threadIdx.x;
    if (!tile_owned(rows, T, t0)) return;
    if (tid < 32) {
        int t = t0 + tid, pos = -1, table = 0;
        if (t < T) {
            pos = rows[2 * t];
            table = rows[2 * t + 1];
        }
        int lo = window > 0 ? max(0, pos - window + 1) : 0;
        if (pos < 0) lo = 0;
        rlo[tid] = lo;
        rhi[tid] = pos; // -1: padding, no keys
        int a = pos < 0 ? 0x7fffffff : lo, b = pos;
        for (int o = 16; o > 0; o >>= 1) {
            a = min(a, __shfl_xor_sync(FULL, a, o));
            b = max(b, __shfl_xor_sync(FULL, b, o));
        }
        unsigned real = __ballot_sync(FULL, pos >= 0);
        int tab = __shfl_sync(FULL, table, __ffs(real) - 1);
        if (tid == 0) {
            span[0] = a;
            span[1] = b;
            span[2] = tab;
        }
    }
    __syncthreads();
    int G = Hq / Hkv;
    PagedKV kv{kslabs, vslabs, blocks, span[2], h / G, Hkv, B, SB, f16, Dk, Dv};
    tile_attend(kv, tsm, out, q, (long long)t0 * Hq + h, Hq, min(TQ, T - t0), rlo, rhi, span[0], span[1], Dk, Dv,
                KC, scale, probs, stats, cap);
}

// block_attn is blockAttention: head h of rows r0..r0+TQ-1 of image n
// (blockIdx.y·TQ.., blockIdx.z) attends every row of its image, q, k, v
// [N·P, H, Dh], out [N·P, H·Dh]. Grid (H, ceil(P/TQ), N). Shared:
// tile_attend's.
extern "C" __global__ void __launch_bounds__(NT)
block_attn(float *out, const float *q, const float *k, const float *v, int P, int H, int Dh, int KC, float scale) {
    extern __shared__ float bsm[];
    __shared__ int rlo[TQ], rhi[TQ];
    int h = blockIdx.x, r0 = blockIdx.y * TQ, n = blockIdx.z, tid = threadIdx.x;
    int nrows = min(TQ, P - r0);
    if (tid < TQ) {
        rlo[tid] = 0;
        rhi[tid] = tid < nrows ? P - 1 : -1;
    }
    __syncthreads();
    long long base = ((long long)n * P * H + h) * Dh; // key 0's head h
    DenseKV kv{k + base, v + base, (long long)H * Dh, Dh, Dh};
    tile_attend(kv, bsm, out, q, ((long long)n * P + r0) * H + h, H, nrows, rlo, rhi, 0, P - 1, Dh, Dh, KC, scale,
                (float *)0, (double *)0, 0);
}
