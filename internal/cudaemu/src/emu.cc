// The emulator's runtime and its job runner: it reads a job (device
// buffers and calls) from argv[1], runs the calls in order, and writes the
// buffers back to argv[2]. See emu.h and cudaemu.go.
#include "emu.h"

#include <ucontext.h>

#include <memory>

namespace emu {

unsigned char dynamic_shared[256 << 10] __attribute__((aligned(16)));

std::map<std::string, Invoke> &registry() {
    static std::map<std::string, Invoke> r;
    return r;
}

dim3 gridDim_, blockDim_, blockIdx_;

struct Barrier {
    int members = 0, arrived = 0;
    unsigned gen = 0;
};

// A fiber switch. On x86-64, a few instructions that save the callee-saved
// registers on the stack and swap stacks (swapcontext's signal-mask system
// call would be most of the emulator's time); elsewhere, ucontext.
#if defined(__x86_64__)
extern "C" void emu_switch(void **save, void *to);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch, .-emu_switch
)");
struct Context {
    void *sp = nullptr;
};
#else
struct Context {
    ucontext_t uc;
};
#endif

struct Thread {
    uint3v idx;
    int lane, warp;
    bool done = false;
    Context ctx;
    std::unique_ptr<char[]> stack;
};

Thread *cur;
static Context sched;
static std::vector<Thread> threads;
static Barrier blockBar;
static std::vector<Barrier> warpBars;
static std::vector<std::vector<unsigned long long>> warpSlots;
static const Invoke *kernel;
static const unsigned long long *kargs;
static const size_t stackSize = 256 << 10;

const uint3v &thread_idx() { return cur->idx; }
int lane() { return cur->lane; }
unsigned long long *warp_slots() { return warpSlots[cur->warp].data(); }

static void switch_to(Context &save, Context &to) {
#if defined(__x86_64__)
    emu_switch(&save.sp, to.sp);
#else
    swapcontext(&save.uc, &to.uc);
#endif
}

static void yield() { switch_to(cur->ctx, sched); }

static void wait(Barrier &b) {
    unsigned g = b.gen;
    b.arrived++;
    while (b.gen == g) yield();
}
void sync_block() { wait(blockBar); }
void sync_warp() { wait(warpBars[cur->warp]); }

static void entry() {
    (*kernel)(kargs);
    cur->done = true;
    blockBar.members--;
    warpBars[cur->warp].members--;
#if defined(__x86_64__)
    switch_to(cur->ctx, sched); // never resumed
    abort();
#endif
    // with ucontext, returning resumes uc_link, the scheduler
}

static void start(Thread &t) {
#if defined(__x86_64__)
    // The stack emu_switch pops: six registers, then entry as the return
    // address, above it a dummy return address of entry's own, so entry
    // starts with the stack aligned as after a call.
    uintptr_t top = ((uintptr_t)t.stack.get() + stackSize) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    t.ctx.sp = sp;
#else
    getcontext(&t.ctx.uc);
    t.ctx.uc.uc_stack.ss_sp = t.stack.get();
    t.ctx.uc.uc_stack.ss_size = stackSize;
    t.ctx.uc.uc_link = &sched.uc;
    makecontext(&t.ctx.uc, entry, 0);
#endif
}

// release opens every barrier whose live members have all arrived.
static bool release(Barrier &b) {
    if (b.arrived > 0 && b.arrived >= b.members) {
        b.arrived = 0;
        b.gen++;
        return true;
    }
    return false;
}

static void run_block() {
    int n = blockDim_.x * blockDim_.y * blockDim_.z;
    int warps = (n + 31) / 32;
    threads.resize(n);
    blockBar = Barrier{n, 0, 0};
    warpBars.assign(warps, Barrier{});
    warpSlots.assign(warps, std::vector<unsigned long long>(32));
    for (int i = 0; i < n; i++) {
        Thread &t = threads[i];
        t.idx = uint3v{i % blockDim_.x, i / blockDim_.x % blockDim_.y, i / (blockDim_.x * blockDim_.y)};
        t.lane = i % 32;
        t.warp = i / 32;
        t.done = false;
        warpBars[t.warp].members++;
        if (!t.stack) t.stack.reset(new char[stackSize]);
        start(t);
    }
    for (;;) {
        int live = 0, finished = 0;
        for (int i = 0; i < n; i++) {
            if (threads[i].done) continue;
            cur = &threads[i];
            switch_to(sched, threads[i].ctx);
            if (threads[i].done)
                finished++;
            else
                live++;
        }
        if (live == 0) break;
        bool progress = finished > 0;
        progress |= release(blockBar);
        for (auto &b : warpBars) progress |= release(b);
        if (!progress) {
            // Every live thread waits at a barrier that cannot open: a
            // kernel bug (a barrier not every thread reaches).
            int waiting = 0;
            for (auto &t : threads) waiting += !t.done;
            fprintf(stderr, "emu: deadlock in block (%u,%u,%u): %d threads wait\n", blockIdx_.x, blockIdx_.y,
                    blockIdx_.z, waiting);
            exit(3);
        }
    }
}

static void launch(const Invoke &k, dim3 grid, dim3 block, const unsigned long long *args) {
    kernel = &k;
    kargs = args;
    gridDim_ = grid;
    blockDim_ = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx_ = dim3{x, y, z};
                run_block();
            }
}

} // namespace emu

// The job format, all little-endian: u64 buffers; per buffer u64 device
// address, u64 bytes, the bytes. u64 calls; per call u64 name length, the
// name ("gemm" for a cuBLAS product), then for a kernel u64 grid x y z,
// block x y z, shared, u64 args, the args' slots; for gemm u64 y x w T N K
// half. The output is the buffers again, in the same order.

struct Buf {
    unsigned long long addr, size;
    std::vector<unsigned char> data;
};
static std::vector<Buf> bufs;

static unsigned long long rd(FILE *f) {
    unsigned long long v;
    if (fread(&v, 8, 1, f) != 1) {
        fprintf(stderr, "emu: short job file\n");
        exit(2);
    }
    return v;
}

// host translates a device address into the buffer that holds it.
static void *host(unsigned long long a, bool *ok) {
    for (auto &b : bufs)
        if (a >= b.addr && a < b.addr + b.size) {
            *ok = true;
            return b.data.data() + (a - b.addr);
        }
    *ok = false;
    return nullptr;
}

static float widen16(unsigned short h, int half) {
    if (half == 14) return __uint_as_float((unsigned)h << 16);
    return __half2float(__ushort_as_half(h));
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: emu job out\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    bufs.resize(rd(f));
    for (auto &b : bufs) {
        b.addr = rd(f);
        b.size = rd(f);
        b.data.resize(b.size);
        if (b.size && fread(b.data.data(), 1, b.size, f) != b.size) {
            fprintf(stderr, "emu: short buffer\n");
            return 2;
        }
    }
    unsigned long long ncalls = rd(f);
    for (unsigned long long c = 0; c < ncalls; c++) {
        std::string name(rd(f), '\0');
        if (fread(&name[0], 1, name.size(), f) != name.size()) return 2;
        if (name == "gemm") {
            unsigned long long v[7];
            for (auto &x : v) x = rd(f);
            bool ok1, ok2, ok3;
            float *y = (float *)host(v[0], &ok1);
            void *x = host(v[1], &ok2), *w = host(v[2], &ok3);
            if (!ok1 || !ok2 || !ok3) {
                fprintf(stderr, "emu: gemm on an address outside every buffer\n");
                return 4;
            }
            long T = v[3], N = v[4], K = v[5];
            int half = (int)v[6];
            for (long t = 0; t < T; t++)
                for (long n = 0; n < N; n++) {
                    float s = 0;
                    for (long k = 0; k < K; k++) {
                        float a, b;
                        if (half == 0) {
                            a = ((float *)x)[t * K + k];
                            b = ((float *)w)[n * K + k];
                        } else {
                            a = widen16(((unsigned short *)x)[t * K + k], half);
                            b = widen16(((unsigned short *)w)[n * K + k], half);
                        }
                        s = std::fma(a, b, s);
                    }
                    y[t * N + n] = s;
                }
            continue;
        }
        dim3 grid, block;
        grid.x = rd(f), grid.y = rd(f), grid.z = rd(f);
        block.x = rd(f), block.y = rd(f), block.z = rd(f);
        unsigned long long shared = rd(f);
        std::vector<unsigned long long> args(rd(f));
        std::string kinds(args.size(), '\0');
        if (fread(&kinds[0], 1, kinds.size(), f) != kinds.size()) return 2;
        for (auto &a : args) a = rd(f);
        for (size_t i = 0; i < args.size(); i++) {
            if (kinds[i] != 'p' || args[i] == 0) continue;
            bool ok;
            void *p = host(args[i], &ok);
            if (!ok) {
                fprintf(stderr, "emu: %s argument %zu: address %#llx is outside every buffer\n", name.c_str(), i,
                        args[i]);
                return 4;
            }
            args[i] = (unsigned long long)(uintptr_t)p;
        }
        auto it = emu::registry().find(name);
        if (it == emu::registry().end()) {
            fprintf(stderr, "emu: no kernel %s\n", name.c_str());
            return 4;
        }
        if (shared > sizeof(emu::dynamic_shared)) {
            fprintf(stderr, "emu: %s: %llu bytes of dynamic shared memory\n", name.c_str(), shared);
            return 4;
        }
        memset(emu::dynamic_shared, 0xff, shared); // garbage, as on a device
        emu::launch(it->second, grid, block, args.data());
    }
    fclose(f);
    FILE *o = fopen(argv[2], "wb");
    if (!o) {
        perror(argv[2]);
        return 2;
    }
    for (auto &b : bufs) fwrite(b.data.data(), 1, b.size, o);
    fclose(o);
    return 0;
}
