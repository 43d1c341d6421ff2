// The emulator's runtime and its server: `emu BASE SIZE` maps the arena
// (file descriptor 3, SIZE bytes) at device address BASE, so that device
// pointers, also those stored in device memory (the KV pool's slab
// tables), are host pointers; then it runs the jobs it reads on stdin,
// answering each on stdout. See emu.h and cudaemu.go.
#include "emu.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <chrono>
#include <memory>

namespace emu {

unsigned char dynamic_shared[256 << 10] __attribute__((aligned(16)));

std::map<std::string, Invoke> &registry() {
    static std::map<std::string, Invoke> r;
    return r;
}

dim3 gridDim_, blockDim_, blockIdx_;

// A fiber switch. On x86-64, a few instructions that save the callee-saved
// registers on the stack and swap stacks (swapcontext's signal-mask system
// call would be most of the emulator's time), then jump to the other
// side's return address (an indirect jump: a ret to another stack than
// the call's would miss the return predictor every time); elsewhere,
// ucontext.
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
    popq %rax
    jmp *%rax
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

// What a fiber waits for.
enum Wait { RUNNING, AT_WARP, AT_BLOCK, DONE };

struct Thread {
    uint3v idx;
    Wait wait = DONE;
    int op, param; // the warp operation it waits at
    unsigned long long val, res;
    Context ctx;
    std::unique_ptr<char[]> stack;
};

Thread *cur;
static Context sched;
static std::vector<Thread> threads;
static const Invoke *kernel;
static const unsigned long long *kargs;
static const char *kernelName = "";
static const size_t stackSize = 256 << 10;

const uint3v &thread_idx() { return cur->idx; }

static void switch_to(Context &save, Context &to) {
#if defined(__x86_64__)
    emu_switch(&save.sp, to.sp);
#else
    swapcontext(&save.uc, &to.uc);
#endif
}

[[noreturn]] static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
    fprintf(stderr, "emu: %s block (%u,%u,%u): ", kernelName, blockIdx_.x, blockIdx_.y, blockIdx_.z);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(3);
}

void sync_block() {
    cur->wait = AT_BLOCK;
    switch_to(cur->ctx, sched);
}

unsigned long long warp_op(int op, unsigned long long v, int param) {
    cur->wait = AT_WARP;
    cur->op = op;
    cur->param = param;
    cur->val = v;
    switch_to(cur->ctx, sched);
    return cur->res;
}

static void entry() {
    (*kernel)(kargs);
    cur->wait = DONE;
    switch_to(cur->ctx, sched); // never resumed
    abort();
}

// start readies thread i to run the kernel from the top of its stack.
// The tops are staggered (i's cache line in a page, and its page in 16):
// stacks a power of two apart would put every thread's hot frames in the
// same cache sets, and each switch would miss.
static void start(Thread &t, int i) {
    size_t color = (size_t)(i % 64) * 64 + (size_t)(i / 64 % 16) * 4096;
#if defined(__x86_64__)
    // The stack emu_switch pops: six registers, then entry as the return
    // address, above it a dummy return address of entry's own, so entry
    // starts with the stack aligned as after a call.
    uintptr_t top = ((uintptr_t)t.stack.get() + stackSize - color) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = nullptr;
    *--sp = (void *)entry;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    t.ctx.sp = sp;
#else
    getcontext(&t.ctx.uc);
    t.ctx.uc.uc_stack.ss_sp = t.stack.get();
    t.ctx.uc.uc_stack.ss_size = stackSize - color;
    t.ctx.uc.uc_link = nullptr;
    makecontext(&t.ctx.uc, entry, 0);
#endif
}

static const char *opName(int op) {
    static const char *names[] = {"__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__ballot_sync",
                                  "__all_sync",  "__any_sync",      "__syncwarp"};
    return op >= 0 && op < 7 ? names[op] : "?";
}

// The block running, counted from 1.
static unsigned long long blockSerial;

void shared(void *p, size_t n, unsigned long long *stamp) {
    if (*stamp == blockSerial) return;
    *stamp = blockSerial;
    memset(p, 0xff, n);
}

static const bool reverse = getenv("CUDAEMU_REVERSE") && *getenv("CUDAEMU_REVERSE") == '1';

// complete finishes the warp operation every lane of a warp waits at.
static void complete(Thread *l, int w, int lanes) {
    int op = l[0].op;
    unsigned long long ballot = 0;
    for (int i = 0; i < lanes; i++) {
        if (l[i].op != op) fail("warp %d: lane 0 at %s, lane %d at %s", w, opName(op), i, opName(l[i].op));
        if (l[i].val) ballot |= 1ull << i;
    }
    bool all = ballot == (lanes == 32 ? 0xffffffffull : (1ull << lanes) - 1);
    for (int i = 0; i < lanes; i++) {
        int src = i;
        switch (op) {
        case SHFL_IDX:
            src = l[i].param & 31;
            break;
        case SHFL_XOR:
            src = i ^ (l[i].param & 31);
            break;
        case SHFL_DOWN:
            src = i + l[i].param < 32 ? i + l[i].param : i;
            break;
        }
        if (src >= lanes) fail("warp %d: lane %d shuffles from lane %d of %d", w, i, src, lanes);
        switch (op) {
        case BALLOT:
            l[i].res = ballot;
            break;
        case ALL:
            l[i].res = all;
            break;
        case ANY:
            l[i].res = ballot != 0;
            break;
        default:
            l[i].res = l[src].val;
        }
    }
    for (int i = 0; i < lanes; i++) l[i].wait = RUNNING;
}

// run_warp runs warp w's lanes, completing their warp operations, until
// each waits at __syncthreads or has returned. Warps meet only at
// __syncthreads (the kernels share memory between warps across it), so a
// block runs warp by warp between its barriers.
static void run_warp(int w, int n) {
    Thread *l = &threads[w * 32];
    int lanes = std::min(32, n - w * 32);
    for (;;) {
        for (int k = 0; k < lanes; k++) {
            Thread &t = l[reverse ? lanes - 1 - k : k];
            if (t.wait != RUNNING) continue;
            cur = &t;
            switch_to(sched, t.ctx);
        }
        int at = 0, block = 0;
        for (int i = 0; i < lanes; i++) {
            at += l[i].wait == AT_WARP;
            block += l[i].wait == AT_BLOCK;
        }
        if (at == 0) return;
        if (at == lanes) {
            complete(l, w, lanes);
            continue;
        }
        int i = 0;
        while (l[i].wait != AT_WARP) i++;
        if (block > 0)
            fail("warp %d: %d lanes wait at %s, %d at __syncthreads", w, at, opName(l[i].op), block);
        fail("warp %d: %s with %d of its %d lanes exited", w, opName(l[i].op), lanes - at, lanes);
    }
}

static void run_block() {
    blockSerial++;
    int n = blockDim_.x * blockDim_.y * blockDim_.z;
    int warps = (n + 31) / 32;
    if ((int)threads.size() < n) threads.resize(n);
    uint3v idx{0, 0, 0};
    for (int i = 0; i < n; i++) {
        Thread &t = threads[i];
        t.idx = idx;
        if (++idx.x == blockDim_.x) {
            idx.x = 0;
            if (++idx.y == blockDim_.y) idx.y = 0, idx.z++;
        }
        t.wait = RUNNING;
        if (!t.stack) t.stack.reset(new char[stackSize]);
        start(t, i);
    }
    for (;;) {
        for (int k = 0; k < warps; k++) run_warp(reverse ? warps - 1 - k : k, n);
        // Every thread waits at __syncthreads or has returned.
        bool live = false;
        for (int i = 0; i < n; i++)
            if (threads[i].wait == AT_BLOCK) {
                threads[i].wait = RUNNING;
                live = true;
            }
        if (!live) return;
    }
}

static void launch(const Invoke &k, dim3 grid, dim3 block, const unsigned long long *args) {
    kernel = &k;
    kargs = args;
    gridDim_ = grid;
    blockDim_ = block;
    // Blocks in order, or in reverse: a kernel must not depend on it.
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx_ = reverse ? dim3{grid.x - 1 - x, grid.y - 1 - y, grid.z - 1 - z} : dim3{x, y, z};
                run_block();
            }
}

// A fault in a kernel names it, its block and thread, and the address.
static void segv(int sig, siginfo_t *si, void *) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, "emu: %s in %s block (%u,%u,%u) thread (%u,%u,%u), address %p\n",
                     sig == SIGSEGV ? "segmentation fault" : "bus error", kernelName, blockIdx_.x, blockIdx_.y,
                     blockIdx_.z, cur ? cur->idx.x : 0, cur ? cur->idx.y : 0, cur ? cur->idx.z : 0, si->si_addr);
    if (write(2, msg, n) < 0) _exit(5);
    _exit(5);
}

void set_kernel_name(const char *name) { kernelName = name; }
void launch_named(const char *name, const Invoke &k, dim3 grid, dim3 block, const unsigned long long *args) {
    kernelName = name;
    cur = nullptr;
    launch(k, grid, block, args);
    kernelName = "";
}

} // namespace emu

// A job on stdin, all little-endian u64s: the number of calls; per call
// the name's length and the name ("gemm" for a cuBLAS product), then for a
// kernel grid x y z, block x y z, shared bytes, the number of parameters,
// their kinds (one byte each) and their slots; for gemm y x w T N K half.
// The answer on stdout is a u64 0 once the calls have run. A kernel's
// failure ends the process with a message on stderr.

static bool rd(unsigned long long *v) { return fread(v, 8, 1, stdin) == 1; }
static unsigned long long must() {
    unsigned long long v;
    if (!rd(&v)) {
        fprintf(stderr, "emu: short job\n");
        exit(2);
    }
    return v;
}

static float widen16(unsigned short h, int half) {
    if (half == 14) return __uint_as_float((unsigned)h << 16);
    return __half2float(__ushort_as_half(h));
}

static void gemm(float *y, const void *x, const void *w, long T, long N, long K, int half) {
    for (long t = 0; t < T; t++)
        for (long n = 0; n < N; n++) {
            float s = 0;
            for (long k = 0; k < K; k++) {
                float a, b;
                if (half == 0) {
                    a = ((const float *)x)[t * K + k];
                    b = ((const float *)w)[n * K + k];
                } else {
                    a = widen16(((const unsigned short *)x)[t * K + k], half);
                    b = widen16(((const unsigned short *)w)[n * K + k], half);
                }
                s = std::fma(a, b, s);
            }
            y[t * N + n] = s;
        }
}

// CUDAEMU_PROFILE=FILE appends each kernel's calls, blocks and seconds to
// FILE when the process ends.
struct Prof {
    long calls = 0, blocks = 0;
    double secs = 0;
};
static std::map<std::string, Prof> prof;
static void dump_prof() {
    const char *path = getenv("CUDAEMU_PROFILE");
    FILE *f = path ? fopen(path, "a") : nullptr;
    if (!f) return;
    for (auto &[name, p] : prof) fprintf(f, "%s %ld %ld %.6f\n", name.c_str(), p.calls, p.blocks, p.secs);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: emu BASE SIZE (the arena on fd 3)\n");
        return 2;
    }
    unsigned long long base = strtoull(argv[1], nullptr, 0), size = strtoull(argv[2], nullptr, 0);
    void *m = mmap((void *)base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, 3, 0);
    if (m == MAP_FAILED || m != (void *)base) {
        fprintf(stderr, "emu: mapping the %llu-byte arena at %#llx: %s\n", size, base,
                m == MAP_FAILED ? strerror(errno) : "the kernel placed it elsewhere (no MAP_FIXED_NOREPLACE)");
        return 2;
    }
    static char altstack[64 << 10];
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = emu::segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    std::vector<unsigned long long> args;
    std::string name, kinds;
    const bool profile = getenv("CUDAEMU_PROFILE") != nullptr;
    for (;;) {
        unsigned long long ncalls;
        if (!rd(&ncalls)) { // the test process has gone
            dump_prof();
            return 0;
        }
        for (unsigned long long c = 0; c < ncalls; c++) {
            name.assign(must(), '\0');
            if (fread(&name[0], 1, name.size(), stdin) != name.size()) return 2;
            if (name == "gemm") {
                unsigned long long v[7];
                for (auto &x : v) x = must();
                emu::set_kernel_name("gemm");
                auto t0 = std::chrono::steady_clock::now();
                gemm((float *)v[0], (const void *)v[1], (const void *)v[2], (long)v[3], (long)v[4], (long)v[5],
                     (int)v[6]);
                if (profile) {
                    Prof &p = prof["gemm"];
                    p.calls++;
                    p.secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                }
                continue;
            }
            dim3 grid, block;
            grid.x = must(), grid.y = must(), grid.z = must();
            block.x = must(), block.y = must(), block.z = must();
            unsigned long long shared = must();
            args.resize(must());
            kinds.assign(args.size(), '\0');
            if (fread(&kinds[0], 1, kinds.size(), stdin) != kinds.size()) return 2;
            for (auto &a : args) a = must();
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
            auto t0 = std::chrono::steady_clock::now();
            emu::launch_named(name.c_str(), it->second, grid, block, args.data());
            if (profile) {
                Prof &p = prof[name];
                p.calls++;
                p.blocks += (long)grid.x * grid.y * grid.z;
                p.secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            }
        }
        unsigned long long ok = 0;
        fwrite(&ok, 8, 1, stdout);
        fflush(stdout);
    }
}
