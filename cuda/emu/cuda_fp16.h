// Host shim of the CUDA builtins attention.cu uses: every CUDA thread is a
// fiber, blocks run one at a time, warps and blocks synchronize through the
// scheduler (emu.cc). Named so that attention.cu's #include finds it.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static

struct __half { uint16_t bits; };
static inline float __half2float(__half h) { _Float16 f; memcpy(&f, &h.bits, 2); return (float)f; }
static inline __half __float2half_rn(float x) { _Float16 f = (_Float16)x; __half h; memcpy(&h.bits, &f, 2); return h; }

struct Dim { unsigned x, y, z; };
extern Dim blockIdx, blockDim;
struct Fiber;
extern Fiber *cur;
unsigned cur_tid();
#define threadIdx (Dim{cur_tid(), 0, 0})

void emu_syncthreads();
void emu_syncwarp();
// A warp op: op 0 shfl_xor(param), 1 shfl(src lane), 2 ballot, 3 all.
uint64_t emu_warp(int op, uint64_t v, int param);

static inline void __syncthreads() { emu_syncthreads(); }
static inline void __syncwarp() { emu_syncwarp(); }
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int o) {
    static_assert(sizeof(T) <= 8, "");
    uint64_t u = 0; memcpy(&u, &v, sizeof(T));
    u = emu_warp(0, u, o);
    T r; memcpy(&r, &u, sizeof(T)); return r;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src) {
    uint64_t u = 0; memcpy(&u, &v, sizeof(T));
    u = emu_warp(1, u, src);
    T r; memcpy(&r, &u, sizeof(T)); return r;
}
static inline unsigned __ballot_sync(unsigned mask, int p) { return (unsigned)emu_warp(2, p != 0, 0); }
static inline int __all_sync(unsigned mask, int p) { return (int)emu_warp(3, p != 0, 0); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
