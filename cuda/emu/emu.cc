// A host emulator of the attention kernels (README.md): every CUDA thread a
// fiber, one block at a time, warps and blocks synchronized by run_block's
// scheduler.
#include "cuda_fp16.h"
#include <ucontext.h>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <string>
#include <map>
#include <functional>
#include <fstream>
#include <sstream>

Dim blockIdx, blockDim;

enum State { READY, WAIT_WARP, WAIT_BLOCK, DONE };
struct Fiber {
    ucontext_t ctx;
    char *stack;
    unsigned tid;
    State st;
    int op, param;
    uint64_t val, res;
    int syncwarp;
};
Fiber *cur;
static ucontext_t sched;
static std::vector<Fiber> fibers;
static std::function<void()> body;
static long long switches;

unsigned cur_tid() { return cur->tid; }

static void yield(State s) {
    cur->st = s;
    switches++;
    swapcontext(&cur->ctx, &sched);
}

void emu_syncthreads() { yield(WAIT_BLOCK); }
void emu_syncwarp() { cur->op = 4; cur->param = 0; yield(WAIT_WARP); }
uint64_t emu_warp(int op, uint64_t v, int param) {
    cur->op = op; cur->param = param; cur->val = v;
    yield(WAIT_WARP);
    return cur->res;
}

static void entry() {
    body();
    cur->st = DONE;
    swapcontext(&cur->ctx, &sched);
}

static void fail(const char *msg) {
    fprintf(stderr, "emu: block (%u,%u,%u): %s\n", blockIdx.x, blockIdx.y, blockIdx.z, msg);
    exit(2);
}

static void run_block(int n) {
    const size_t SZ = 512 << 10;
    if (fibers.size() < (size_t)n) {
        size_t old = fibers.size();
        fibers.resize(n);
        for (size_t i = old; i < (size_t)n; i++) fibers[i].stack = (char *)malloc(SZ);
    }
    for (int i = 0; i < n; i++) {
        Fiber &f = fibers[i];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = SZ;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, entry, 0);
        f.tid = i;
        f.st = READY;
    }
    if (n % 32) fail("block size not a whole number of warps");
    static int reverse = getenv("EMU_REVERSE") != nullptr;
    for (;;) {
        bool ran = false;
        for (int k = 0; k < n; k++) {
            int i = reverse ? n - 1 - k : k;
            if (fibers[i].st == READY) {
                cur = &fibers[i];
                swapcontext(&sched, &cur->ctx);
                ran = true;
            }
        }
        bool released = false;
        // warps
        for (int w = 0; w < n / 32; w++) {
            Fiber *l = &fibers[w * 32];
            int waiting = 0, done = 0;
            for (int i = 0; i < 32; i++) {
                if (l[i].st == WAIT_WARP) waiting++;
                else if (l[i].st == DONE) done++;
            }
            if (waiting == 0 || waiting + done < 32) continue;
            if (done) fail("warp op with exited lanes");
            int op = l[0].op, param = l[0].param;
            for (int i = 0; i < 32; i++) {
                if (l[i].op != op) fail("divergent warp ops");
                if (op == 0 && l[i].param != param) fail("shfl_xor offsets differ");
            }
            uint64_t ballot = 0;
            bool all = true;
            for (int i = 0; i < 32; i++) { if (l[i].val) ballot |= 1ull << i; else all = false; }
            for (int i = 0; i < 32; i++) {
                switch (op) {
                case 0: l[i].res = l[i ^ param].val; break;
                case 1: if (l[i].param < 0 || l[i].param > 31) fail("shfl lane"); l[i].res = l[l[i].param].val; break;
                case 2: l[i].res = ballot; break;
                case 3: l[i].res = all; break;
                }
                l[i].st = READY;
            }
            released = true;
        }
        // block
        int waitb = 0, done = 0, other = 0;
        for (int i = 0; i < n; i++) {
            if (fibers[i].st == WAIT_BLOCK) waitb++;
            else if (fibers[i].st == DONE) done++;
            else other++;
        }
        if (done == n) return;
        if (other == 0 && waitb > 0) {
            for (int i = 0; i < n; i++) if (fibers[i].st == WAIT_BLOCK) fibers[i].st = READY;
            released = true;
        }
        if (!ran && !released) fail("deadlock (divergent barrier)");
    }
}

#include "attention.cu"

double smem[1 << 15];
float tsm[1 << 16];
float bsm[1 << 16];

typedef std::vector<uint64_t> A;
static void *P(uint64_t x) { return (void *)x; }
static int I(uint64_t x) { return (int)(int32_t)(uint32_t)x; }
static float F(uint64_t x) { uint32_t u = (uint32_t)x; float f; memcpy(&f, &u, 4); return f; }

static std::map<std::string, std::function<void(const A &)>> kernels = {
    {"kv_store", [](const A &a) { kv_store((const u64 *)P(a[0]), (const u64 *)P(a[1]), (const int *)P(a[2]), (const int *)P(a[3]), (const float *)P(a[4]), (const float *)P(a[5]), I(a[6]), I(a[7]), I(a[8]), I(a[9]), I(a[10]), I(a[11])); }},
    {"attn_rows", [](const A &a) { attn_rows((float *)P(a[0]), (const float *)P(a[1]), (const u64 *)P(a[2]), (const u64 *)P(a[3]), (const int *)P(a[4]), (const int *)P(a[5]), (float *)P(a[6]), (double *)P(a[7]), (float *)P(a[8]), (double *)P(a[9]), I(a[10]), I(a[11]), I(a[12]), I(a[13]), I(a[14]), I(a[15]), I(a[16]), I(a[17]), I(a[18]), I(a[19]), I(a[20]), I(a[21]), I(a[22]), F(a[23])); }},
    {"attn_tile", [](const A &a) { attn_tile((float *)P(a[0]), (const float *)P(a[1]), (const u64 *)P(a[2]), (const u64 *)P(a[3]), (const int *)P(a[4]), (const int *)P(a[5]), (float *)P(a[6]), (double *)P(a[7]), I(a[8]), I(a[9]), I(a[10]), I(a[11]), I(a[12]), I(a[13]), I(a[14]), I(a[15]), I(a[16]), I(a[17]), I(a[18]), F(a[19])); }},
    {"attn_combine", [](const A &a) { attn_combine((float *)P(a[0]), (const float *)P(a[1]), (const double *)P(a[2]), (double *)P(a[3]), (const int *)P(a[4]), I(a[5]), I(a[6]), I(a[7]), I(a[8]), I(a[9])); }},
    {"attn_probs", [](const A &a) { attn_probs((float *)P(a[0]), (const double *)P(a[1]), (const int *)P(a[2]), I(a[3]), I(a[4]), I(a[5])); }},
    {"block_attn", [](const A &a) { block_attn((float *)P(a[0]), (const float *)P(a[1]), (const float *)P(a[2]), (const float *)P(a[3]), I(a[4]), I(a[5]), I(a[6]), I(a[7]), F(a[8])); }},
};

// usage: emu BASE arena.bin calls.txt — maps the arena at BASE, runs the
// calls, writes the arena back.
int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: emu BASE arena calls\n"); return 1; }
    uint64_t base = strtoull(argv[1], nullptr, 0);
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror("arena"); return 1; }
    fseek(f, 0, SEEK_END);
    size_t n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *m = mmap((void *)base, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m != (void *)base) { perror("mmap"); return 1; }
    if (fread(m, 1, n, f) != n) { perror("read"); return 1; }
    fclose(f);
    std::ifstream calls(argv[3]);
    std::string line;
    while (std::getline(calls, line)) {
        std::istringstream in(line);
        std::string name;
        unsigned gx, gy, gz, bx, by, bz, shared, na;
        in >> name >> gx >> gy >> gz >> bx >> by >> bz >> shared >> na;
        A a(na);
        for (auto &x : a) in >> std::hex >> x;
        auto k = kernels.find(name);
        if (k == kernels.end()) { fprintf(stderr, "emu: no kernel %s\n", name.c_str()); return 1; }
        if (by != 1 || bz != 1) { fprintf(stderr, "emu: %s: 1-D blocks only\n", name.c_str()); return 1; }
        size_t limit = name == "attn_rows" ? sizeof smem : name == "attn_tile" ? sizeof tsm : sizeof bsm;
        if (shared > limit) { fprintf(stderr, "emu: %s: %u bytes of shared memory\n", name.c_str(), shared); return 1; }
        // Poison shared memory so that reads of unwritten values show.
        memset(smem, 0xff, sizeof smem); memset(tsm, 0xff, sizeof tsm); memset(bsm, 0xff, sizeof bsm);
        blockDim = {bx, 1, 1};
        const A args = a;
        for (unsigned z = 0; z < gz; z++)
            for (unsigned y = 0; y < gy; y++)
                for (unsigned x = 0; x < gx; x++) {
                    blockIdx = {x, y, z};
                    body = [&]() { k->second(args); };
                    run_block(bx);
                }
        fprintf(stderr, "emu: %s grid (%u,%u,%u): %lld switches so far\n", name.c_str(), gx, gy, gz, switches);
    }
    f = fopen(argv[2], "wb");
    fwrite(m, 1, n, f);
    fclose(f);
    return 0;
}
