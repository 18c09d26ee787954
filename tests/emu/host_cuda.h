// host_cuda.h: runs gla's generated CUDA kernels on the CPU, for tests on machines without a GPU.
//
// What it emulates: a kernel launch as the blocks of its grid one after another; a block as NT cooperative fibers
// (ucontext) on one OS thread, each fiber a CUDA thread with its own stack; __syncthreads as a barrier that every
// live thread of the block must reach (a barrier reached by some threads while others exited is reported as an
// error, not papered over); dynamic shared memory as one buffer, poisoned with NaN bytes before each block;
// atomicAdd as a plain add (one OS thread). What it does not: warps (no shuffles, no tensor-core fragments, no
// cp.async / TMA / mbarrier), memory-model races (the interleaving is one legal schedule, switched only at
// barriers), occupancy or timing. Functions that the generated source writes in inline PTX are replaced, by name,
// with host forms (tests/src/emu.rs) before this header meets them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <ucontext.h>
#include <vector>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __shared__

using std::max;
using std::min;

struct Dim3 {
    unsigned x, y, z;
};
struct float2 {
    float x, y;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float atomicAdd(float* p, float v) {
    const float old = *p;
    *p = old + v;
    return old;
}

// The dynamic shared memory every kernel names `sm` (extern __shared__ float sm[] binds to it).
alignas(128) static float sm[232448 / 4];

namespace emu {

constexpr size_t STACK = 256 * 1024;

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    unsigned tid = 0;
    bool done = false, at_barrier = false;
};

struct Block {
    ucontext_t sched;
    std::vector<Fiber> fibers;
    Fiber* cur = nullptr;
    std::function<void()> body;
    bool and_acc = true, and_result = true;  // __syncthreads_and: the predicates of this barrier, the last result
};

// Per library (static; the library is built with hidden visibility): libraries loaded side by side on several
// threads share nothing.
static Block* g_block = nullptr;
static Dim3 g_block_idx{0, 0, 0}, g_grid_dim{1, 1, 1}, g_block_dim{1, 1, 1};

static void trampoline() {
    g_block->body();
    g_block->cur->done = true;
    // returning resumes uc_link = the scheduler
}

inline void syncthreads() {
    Block* b = g_block;
    b->cur->at_barrier = true;
    swapcontext(&b->cur->ctx, &b->sched);
}

inline int syncthreads_and(bool p) {
    g_block->and_acc = g_block->and_acc && p;
    syncthreads();
    return g_block->and_result ? 1 : 0;
}

// Runs one block of nt threads; returns an empty string or what went wrong.
inline std::string run_block(unsigned nt, const std::function<void()>& body) {
    Block b;
    b.body = body;
    b.fibers.resize(nt);
    for (unsigned t = 0; t < nt; ++t) {
        Fiber& f = b.fibers[t];
        f.tid = t;
        f.stack.resize(STACK);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = STACK;
        f.ctx.uc_link = &b.sched;
        makecontext(&f.ctx, trampoline, 0);
    }
    g_block = &b;
    for (;;) {
        unsigned waiting = 0, done = 0;
        for (Fiber& f : b.fibers) {
            if (f.done || f.at_barrier) continue;
            b.cur = &f;
            swapcontext(&b.sched, &f.ctx);
        }
        for (Fiber& f : b.fibers) {
            waiting += f.at_barrier;
            done += f.done;
        }
        if (done == nt) break;
        if (done > 0) {
            char m[160];
            std::snprintf(m, sizeof m, "block (%u,%u,%u): %u threads wait at __syncthreads while %u have exited",
                          g_block_idx.x, g_block_idx.y, g_block_idx.z, waiting, done);
            g_block = nullptr;
            return m;
        }
        for (Fiber& f : b.fibers) f.at_barrier = false;  // every thread arrived: release the barrier
        b.and_result = b.and_acc;
        b.and_acc = true;
    }
    g_block = nullptr;
    return "";
}

// Launches kernel(args) over grid (gx, gy, gz) x nt threads; the blocks run in order. 0 or an error (printed).
template <class A>
int launch(void (*kernel)(A), unsigned gx, unsigned gy, unsigned gz, unsigned nt, unsigned smem, const void* args) {
    if (smem > sizeof(sm)) {
        std::fprintf(stderr, "emu: %u B of dynamic shared memory, at most %zu\n", smem, sizeof(sm));
        return 1;
    }
    A a;
    std::memcpy(static_cast<void*>(&a), args, sizeof(A));
    g_grid_dim = Dim3{gx, gy, gz};
    g_block_dim = Dim3{nt, 1, 1};
    for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) {
                g_block_idx = Dim3{x, y, z};
                std::memset(sm, 0xff, sizeof(sm));  // NaN in every f32 slot: reads before writes show
                const std::string e = run_block(nt, [&] { kernel(a); });
                if (!e.empty()) {
                    std::fprintf(stderr, "emu: %s\n", e.c_str());
                    return 2;
                }
            }
    return 0;
}

}  // namespace emu

#define threadIdx (::emu::Dim3Tid())
namespace emu {
inline Dim3 Dim3Tid() { return Dim3{g_block->cur->tid, 0, 0}; }
}  // namespace emu
#define blockIdx (::emu::g_block_idx)
#define gridDim (::emu::g_grid_dim)
#define blockDim (::emu::g_block_dim)
#define __syncthreads() ::emu::syncthreads()
#define __syncthreads_and(p) ::emu::syncthreads_and(p)
