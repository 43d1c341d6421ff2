// A host emulation of the CUDA C that gozoo's kernels use, so that a
// kernel's source can run on a machine without a GPU: every thread of a
// block is a fiber on one OS thread, scheduled round robin (in reverse
// with CUDAEMU_REVERSE=1, an adversarial order that shows a missing
// barrier); __syncthreads is a barrier among the block's live fibers, a
// warp operation one among all of the warp's lanes. Blocks run one after
// another, so __shared__ arrays are plain statics, poisoned (0xff) for
// every block as a GPU's shared memory holds garbage (cudaemu.go adds the
// calls that do it to their declarations). Slow (a context switch per thread per barrier) and meant for
// small shapes.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct uint3v {
    unsigned x, y, z;
};

namespace emu {
struct Thread;
extern Thread *cur;
extern dim3 gridDim_, blockDim_, blockIdx_;
const uint3v &thread_idx();
void sync_block();
} // namespace emu

#define threadIdx (emu::thread_idx())
#define blockIdx (emu::blockIdx_)
#define blockDim (emu::blockDim_)
#define gridDim (emu::gridDim_)

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};

template <class T>
inline T __ldg(const T *p) {
    return *p;
}

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __longlong_as_double(long long v) {
    double d;
    memcpy(&d, &v, 8);
    return d;
}
inline float __int_as_float(int v) {
    float f;
    memcpy(&f, &v, 4);
    return f;
}
inline int __float2int_rz(float f) { return (int)f; }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }

// IEEE half, converted in software (round to nearest even).
struct __half {
    unsigned short x;
};
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline float __half2float(__half h) {
    unsigned s = (h.x >> 15) & 1, e = (h.x >> 10) & 31, m = h.x & 1023;
    float v;
    if (e == 0)
        v = std::ldexp((float)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = std::ldexp((float)(m | 1024), (int)e - 25);
    return s ? -v : v;
}
inline __half __float2half_rn(float f) {
    unsigned u = __float_as_uint(f);
    unsigned s = (u >> 16) & 0x8000;
    unsigned a = u & 0x7fffffff;
    if (a > 0x7f800000) return __half{(unsigned short)(s | 0x7e00 | ((a >> 13) & 0x3ff))};
    if (a >= 0x477ff000) return __half{(unsigned short)(s | 0x7c00)}; // rounds to inf
    if (a < 0x38800000) {                                             // subnormal or zero
        // value = a as float; half subnormal unit 2^-24.
        float v = __uint_as_float(a);
        float q = std::nearbyint(v * 16777216.0f); // exact scaling, ties to even
        return __half{(unsigned short)(s | (unsigned)q)};
    }
    unsigned e = (a >> 23) - 127 + 15, m = a & 0x7fffff;
    unsigned h = (e << 10) | (m >> 13);
    unsigned rest = m & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return __half{(unsigned short)(s | h)};
}

// Warp operations: every existing lane of the warp must reach the same
// operation (the kernels pass full masks), or the emulator stops with an
// error (a lane that has exited, lanes at different operations), as on a
// GPU they would hang or be undefined. warp_op posts the lane's value and
// parameter and returns the operation's result for it.
namespace emu {
enum WarpOp { SHFL_IDX, SHFL_XOR, SHFL_DOWN, BALLOT, ALL, ANY, SYNCWARP };
unsigned long long warp_op(int op, unsigned long long v, int param);
} // namespace emu

template <class T>
inline T shfl_bits(int op, T v, int param) {
    static_assert(sizeof(T) <= 8, "shuffle of a wide type");
    unsigned long long b = 0;
    memcpy(&b, &v, sizeof(T));
    unsigned long long r = emu::warp_op(op, b, param);
    T out;
    memcpy(&out, &r, sizeof(T));
    return out;
}
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int m) {
    return shfl_bits(emu::SHFL_XOR, v, m);
}
template <class T>
inline T __shfl_down_sync(unsigned, T v, int d) {
    return shfl_bits(emu::SHFL_DOWN, v, d);
}
template <class T>
inline T __shfl_sync(unsigned, T v, int s) {
    return shfl_bits(emu::SHFL_IDX, v, s);
}
inline unsigned __ballot_sync(unsigned, int pred) { return (unsigned)emu::warp_op(emu::BALLOT, pred != 0, 0); }
inline int __all_sync(unsigned, int pred) { return (int)emu::warp_op(emu::ALL, pred != 0, 0); }
inline int __any_sync(unsigned, int pred) { return (int)emu::warp_op(emu::ANY, pred != 0, 0); }
inline void __syncthreads() { emu::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_op(emu::SYNCWARP, 0, 0); }

namespace emu {
// A kernel as the registry holds it: a call that unpacks its parameters'
// 8-byte slots (device pointers are host pointers: the arena is mapped at
// the devices' addresses).
using Invoke = std::function<void(const unsigned long long *)>;

template <class T>
T unpack(unsigned long long s) {
    if constexpr (std::is_pointer_v<T>)
        return (T)(uintptr_t)s;
    else if constexpr (std::is_same_v<T, float>)
        return __uint_as_float((unsigned)s);
    else if constexpr (sizeof(T) == 8)
        return (T)s;
    else
        return (T)(int)(unsigned)s;
}
template <class... A, size_t... I>
void call_slots(void (*f)(A...), const unsigned long long *s, std::index_sequence<I...>) {
    f(unpack<A>(s[I])...);
}
template <class... A>
Invoke invoker(void (*f)(A...)) {
    return [f](const unsigned long long *s) { call_slots(f, s, std::index_sequence_for<A...>{}); };
}
std::map<std::string, Invoke> &registry();
struct Reg {
    template <class F>
    Reg(const char *name, F f) {
        registry()[name] = invoker(f);
    }
};
// shared poisons a __shared__ variable when the first thread of a block
// reaches its declaration, before any thread of the block can use it
// (stamp: the block it was last poisoned for).
void shared(void *p, size_t n, unsigned long long *stamp);
// dynamic shared memory (extern __shared__ arrays are defined on it).
extern unsigned char dynamic_shared[];
} // namespace emu
