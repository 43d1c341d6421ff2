// Weight decoders shared by the product, embedding and MoE kernels: every
// stored type (F32, BF16, F16 and ggml's blocks) gives eight values of one
// 32-value chunk of a row at a time, widened or dequantized exactly as
// internal/quant and graphs.Widen do on the CPU, in registers: F32, BF16,
// F16, Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_XS.
//
// A row of K values is K/32 chunks (the float types may end in a partial
// one). Part p (0..3) of chunk c decodes eight values: w[0..3] at
// c*32 + F::off0(p) + i and w[4..7] at c*32 + F::off1(p) + i. Every run of
// four starts at a multiple of four, so the matching activations load as
// one float4. The quantized decoders use __fmul_rn and __fsub_rn: nvcc
// contracts a*b - c into one FMA by default, and ggml's d1*q - m1 (Q4_K)
// is two roundings.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float half_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float bf16_to_float(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

// ld16 reads a little-endian u16 at a 2-byte aligned address.
__device__ __forceinline__ uint16_t ld16(const uint8_t *p) { return __ldg((const unsigned short *)p); }

struct FmtF32 {
    static constexpr bool FLOAT = true;
    __device__ static size_t rowBytes(int K) { return (size_t)K * 4; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    // dec needs the row 16-byte aligned (K % 8 == 0 and an aligned base).
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const float4 *q = (const float4 *)(row + (size_t)(c * 32 + 8 * p) * 4);
        float4 a = __ldg(q), b = __ldg(q + 1);
        w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
        w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    }
    __device__ static float one(const uint8_t *row, int k) { return __ldg((const float *)row + k); }
};

template <bool BF>
struct Fmt16 {
    static constexpr bool FLOAT = true;
    __device__ static size_t rowBytes(int K) { return (size_t)K * 2; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static float widen(uint32_t h) { return BF ? bf16_to_float((uint16_t)h) : half_to_float((uint16_t)h); }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        uint4 q = __ldg((const uint4 *)(row + (size_t)(c * 32 + 8 * p) * 2));
        uint32_t v[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[2 * i] = widen(v[i] & 0xffff);
            w[2 * i + 1] = widen(v[i] >> 16);
        }
    }
    __device__ static float one(const uint8_t *row, int k) { return widen(__ldg((const unsigned short *)row + k)); }
};
typedef Fmt16<true> FmtBF16;
typedef Fmt16<false> FmtF16;

// block_q8_0: f16 d, int8 qs[32]; y = q*d.
struct FmtQ8_0 {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 34; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 34;
        float d = half_to_float(ld16(b));
        const uint8_t *q = b + 2 + 8 * p;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint16_t two = ld16(q + 2 * i);
            w[2 * i] = __fmul_rn((float)(int8_t)(two & 0xff), d);
            w[2 * i + 1] = __fmul_rn((float)(int8_t)(two >> 8), d);
        }
    }
};

// block_q4_0: f16 d, qs[16]; byte j holds value j (low nibble) and j+16
// (high); y = (q-8)*d.
struct FmtQ4_0 {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 18; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 18;
        float d = half_to_float(ld16(b));
        uint32_t q = (uint32_t)ld16(b + 2 + 4 * p) | (uint32_t)ld16(b + 4 + 4 * p) << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v = q >> (8 * i) & 0xff;
            w[i] = __fmul_rn((float)((int)(v & 15) - 8), d);
            w[4 + i] = __fmul_rn((float)((int)(v >> 4) - 8), d);
        }
    }
};

// block_q5_0: f16 d, u32 qh (the fifth bits), qs[16] as Q4_0; y = (q-16)*d.
struct FmtQ5_0 {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 22; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 22;
        float d = half_to_float(ld16(b));
        uint32_t qh = (uint32_t)ld16(b + 2) | (uint32_t)ld16(b + 4) << 16;
        uint32_t q = (uint32_t)ld16(b + 6 + 4 * p) | (uint32_t)ld16(b + 8 + 4 * p) << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int j = 4 * p + i;
            uint32_t v = q >> (8 * i) & 0xff;
            uint32_t h0 = (qh >> j) << 4 & 0x10;
            uint32_t h1 = qh >> (j + 12) & 0x10;
            w[i] = __fmul_rn((float)((int)((v & 15) | h0) - 16), d);
            w[4 + i] = __fmul_rn((float)((int)((v >> 4) | h1) - 16), d);
        }
    }
};

// k4ScaleMin gives sub-block s's d*sc and dmin*m (each rounded) of a
// Q4_K or Q5_K block: f16 d and dmin, then 12 bytes of 6-bit scales and
// mins (ggml's get_scale_min_k4).
__device__ __forceinline__ void k4ScaleMin(const uint8_t *b, int s, float &d1, float &m1) {
    float d = half_to_float(ld16(b)), dmin = half_to_float(ld16(b + 2));
    const uint8_t *sc = b + 4;
    int scv, mv;
    if (s < 4) {
        scv = __ldg(sc + s) & 63;
        mv = __ldg(sc + s + 4) & 63;
    } else {
        scv = (__ldg(sc + s + 4) & 15) | (__ldg(sc + s - 4) >> 6) << 4;
        mv = (__ldg(sc + s + 4) >> 4) | (__ldg(sc + s) >> 6) << 4;
    }
    d1 = __fmul_rn(d, (float)scv), m1 = __fmul_rn(dmin, (float)mv);
}

// block_q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, qs[128].
// Sub-block s (32 values) is the low (s even) or high (s odd) nibbles of
// qs[32*(s/2) ...]; y = d*sc*q - dmin*m, each product rounded.
struct FmtQ4_K {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 144; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 144;
        int s = c & 7;
        float d1, m1;
        k4ScaleMin(b, s, d1, m1);
        // 16 + 32*(s/2) + 8*p is 8-byte aligned in a 144-byte block.
        uint2 q = __ldg((const uint2 *)(b + 16 + 32 * (s >> 1) + 8 * p));
        int shift = (s & 1) * 4;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            w[i] = __fsub_rn(__fmul_rn(d1, (float)(q.x >> (8 * i + shift) & 15)), m1);
            w[4 + i] = __fsub_rn(__fmul_rn(d1, (float)(q.y >> (8 * i + shift) & 15)), m1);
        }
    }
};

// block_q6_K: ql[128], qh[64], int8 scales[16], f16 d. Half h (128
// values), quarter j (32 values), position l: the low nibble (j < 2) or
// high (j >= 2) of ql[64h + 32(j&1) + l], bits 2j..2j+1 of qh[32h + l] on
// top, minus 32, times d*scales[8h + l/16 + 2j].
struct FmtQ6_K {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 210; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 210;
        int r = c & 7, h = r >> 2, j = r & 3, l = 8 * p;
        float d = half_to_float(ld16(b + 208));
        float d1 = __fmul_rn(d, (float)(int8_t)__ldg(b + 192 + 8 * h + (l >> 4) + 2 * j));
        const uint8_t *ql = b + 64 * h + 32 * (j & 1) + l;
        const uint8_t *qh = b + 128 + 32 * h + l;
        int nshift = j < 2 ? 0 : 4;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int nib = __ldg(ql + i) >> nshift & 15;
            int hb = __ldg(qh + i) >> (2 * j) & 3;
            w[i] = __fmul_rn(d1, (float)((nib | hb << 4) - 32));
        }
    }
};

// block_q4_1: f16 d, f16 m, qs[16] as Q4_0; y = q*d + m, two roundings.
struct FmtQ4_1 {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 20; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 20;
        float d = half_to_float(ld16(b)), m = half_to_float(ld16(b + 2));
        uint32_t q = (uint32_t)ld16(b + 4 + 4 * p) | (uint32_t)ld16(b + 6 + 4 * p) << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v = q >> (8 * i) & 0xff;
            w[i] = __fadd_rn(__fmul_rn((float)(v & 15), d), m);
            w[4 + i] = __fadd_rn(__fmul_rn((float)(v >> 4), d), m);
        }
    }
};

// block_q5_1: f16 d, f16 m, u32 qh, qs[16] as Q5_0; y = q*d + m.
struct FmtQ5_1 {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 24; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 24;
        float d = half_to_float(ld16(b)), m = half_to_float(ld16(b + 2));
        uint32_t qh = (uint32_t)ld16(b + 4) | (uint32_t)ld16(b + 6) << 16;
        uint32_t q = (uint32_t)ld16(b + 8 + 4 * p) | (uint32_t)ld16(b + 10 + 4 * p) << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int j = 4 * p + i;
            uint32_t v = q >> (8 * i) & 0xff;
            uint32_t h0 = (qh >> j) << 4 & 0x10;
            uint32_t h1 = qh >> (j + 12) & 0x10;
            w[i] = __fadd_rn(__fmul_rn((float)((v & 15) | h0), d), m);
            w[4 + i] = __fadd_rn(__fmul_rn((float)((v >> 4) | h1), d), m);
        }
    }
};

// iq4_value is kvalues_iq4nl[q] (q 0..15), the IQ4_NL and IQ4_XS levels,
// from two immediates rather than a table in memory.
__device__ __forceinline__ float iq4_value(uint32_t q) {
    const unsigned long long k0 = 0xF6EADDCFBFAD9881ull; // -127 -104 -83 -65 -49 -35 -22 -10
    const unsigned long long k1 = 0x7159453526190D01ull; //    1   13  25  38  53  69  89 113
    unsigned long long k = q < 8 ? k0 : k1;
    return (float)(int8_t)(uint8_t)(k >> (8 * (q & 7)));
}

// block_iq4_nl: f16 d, qs[16] as Q4_0, each nibble indexing the levels;
// y = d*K[q].
struct FmtIQ4_NL {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 32) * 18; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)c * 18;
        float d = half_to_float(ld16(b));
        uint32_t q = (uint32_t)ld16(b + 2 + 4 * p) | (uint32_t)ld16(b + 4 + 4 * p) << 16;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v = q >> (8 * i) & 0xff;
            w[i] = __fmul_rn(d, iq4_value(v & 15));
            w[4 + i] = __fmul_rn(d, iq4_value(v >> 4));
        }
    }
};

// block_q2_K: scales[16] (4-bit scale | 4-bit min << 4), qs[64], f16 d,
// f16 dmin (last). Half h (128 values), quarter j (32 values), position
// l: bits 2j..2j+1 of qs[32h + l], sub-block 8h + 2j + l/16;
// y = (d*sc)*q - dmin*m, each product rounded.
struct FmtQ2_K {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 84; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 84;
        int r = c & 7, h = r >> 2, j = r & 3, l = 8 * p;
        float d = half_to_float(ld16(b + 80)), dmin = half_to_float(ld16(b + 82));
        int s = __ldg(b + 8 * h + 2 * j + (l >> 4));
        float dl = __fmul_rn(d, (float)(s & 15)), ml = __fmul_rn(dmin, (float)(s >> 4));
        const uint8_t *q = b + 16 + 32 * h + l;
#pragma unroll
        for (int i = 0; i < 8; i++) w[i] = __fsub_rn(__fmul_rn(dl, (float)(__ldg(q + i) >> (2 * j) & 3)), ml);
    }
};

// block_q3_K: hmask[32], qs[64], 12 bytes of 6-bit scales (offset by
// -32), f16 d (last); 110 bytes, so only 2-byte aligned. As Q2_K, with
// bit 4h + j of hmask[l]: clear, the value is lowered by 4; y = (d*sc)*q.
struct FmtQ3_K {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 110; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 110;
        int r = c & 7, h = r >> 2, j = r & 3, l = 8 * p;
        float d = half_to_float(ld16(b + 108));
        int is = 8 * h + 2 * j + (l >> 4);
        int lo = __ldg(b + 96 + (is & 7)) >> (4 * (is >> 3)) & 15;
        int hi = __ldg(b + 104 + (is & 3)) >> (2 * (is >> 2)) & 3;
        float dl = __fmul_rn(d, (float)((lo | hi << 4) - 32));
        const uint8_t *q = b + 32 + 32 * h + l;
        const uint8_t *hm = b + l;
        int bit = 1 << (4 * h + j);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int v = __ldg(q + i) >> (2 * j) & 3;
            if (!(__ldg(hm + i) & bit)) v -= 4;
            w[i] = __fmul_rn(dl, (float)v);
        }
    }
};

// block_q5_K: f16 d, f16 dmin, Q4_K's 12 scale bytes, qh[32], qs[128].
// Sub-block s (32 values) is the low (s even) or high (s odd) nibbles of
// qs[32*(s/2) ...] with bit s of qh[l] on top; y = d*sc*q - dmin*m, as
// Q4_K.
struct FmtQ5_K {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 176; }
    __device__ static int off0(int p) { return 8 * p; }
    __device__ static int off1(int p) { return 8 * p + 4; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 176;
        int s = c & 7;
        float d1, m1;
        k4ScaleMin(b, s, d1, m1);
        // 16 + 8*p and 48 + 32*(s/2) + 8*p are 8-byte aligned in a
        // 176-byte block.
        uint2 h = __ldg((const uint2 *)(b + 16 + 8 * p));
        uint2 q = __ldg((const uint2 *)(b + 48 + 32 * (s >> 1) + 8 * p));
        int shift = (s & 1) * 4;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v0 = (q.x >> (8 * i + shift) & 15) | (h.x >> (8 * i + s) & 1) << 4;
            uint32_t v1 = (q.y >> (8 * i + shift) & 15) | (h.y >> (8 * i + s) & 1) << 4;
            w[i] = __fsub_rn(__fmul_rn(d1, (float)v0), m1);
            w[4 + i] = __fsub_rn(__fmul_rn(d1, (float)v1), m1);
        }
    }
};

// block_iq4_xs: f16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block b
// (32 values) is IQ4_NL's layout over qs[16b ...] with the 6-bit scale
// (low 4 bits a nibble of scales_l, high 2 bits of scales_h, less 32);
// y = (d*sc)*K[q].
struct FmtIQ4_XS {
    static constexpr bool FLOAT = false;
    __device__ static size_t rowBytes(int K) { return (size_t)(K / 256) * 136; }
    __device__ static int off0(int p) { return 4 * p; }
    __device__ static int off1(int p) { return 16 + 4 * p; }
    __device__ static void dec(const uint8_t *row, int c, int p, float w[8]) {
        const uint8_t *b = row + (size_t)(c >> 3) * 136;
        int s = c & 7;
        float d = half_to_float(ld16(b));
        int lo = __ldg(b + 4 + (s >> 1)) >> (4 * (s & 1)) & 15;
        int hi = ld16(b + 2) >> (2 * s) & 3;
        float dl = __fmul_rn(d, (float)((lo | hi << 4) - 32));
        // 8 + 16*s + 4*p is 4-byte aligned in a 136-byte block.
        uint32_t q = __ldg((const unsigned int *)(b + 8 + 16 * s + 4 * p));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t v = q >> (8 * i) & 0xff;
            w[i] = __fmul_rn(dl, iq4_value(v & 15));
            w[4 + i] = __fmul_rn(dl, iq4_value(v >> 4));
        }
    }
};
