// host_cuda.h: runs gla's generated CUDA kernels on the CPU, for tests on machines without a GPU.  What it emulates:
// a kernel launch as the blocks of its grid one after another; a block as NT cooperative fibers (ucontext) on one OS
// thread, each fiber a CUDA thread with its own stack; __syncthreads as a barrier that every live thread of the
// block must reach (a barrier reached by some threads while others exited is reported as an error, not papered
// over); warp shuffles, __syncwarp and __ballot_sync as collectives of the warp's 32 lanes (full masks only), and
// ldmatrix and mma.sync m16n8k16 as collectives with the PTX fragment layouts (ldmatrix rows checked 16-byte
// aligned; the products exact in f32, summed in another order); dynamic shared memory as one buffer, poisoned with
// NaN bytes before each block (bytes past the launch's size must stay untouched); atomicAdd as a plain add (one OS
// thread); cp.async as a synchronous copy; named barriers (bar.sync / bar.arrive / bar.red.and.pred with an id and a
// thread count); wgmma over descriptors; CTA-scope mbarriers and 3-d TMA loads over tensor maps the tests encode
// (EmuTensorMap), completed at issue. What it does not: clusters (DSMEM, cluster barriers), memory-model races (the
// interleaving is one legal schedule, switched only at barriers and collectives — threads in index order in even
// blocks, in reverse order in odd ones, so a missing barrier between two warps shows in one or the other), occupancy
// or timing. Functions
// that the generated source writes in inline PTX are replaced, by name, with host forms (tests/src/emu.rs) before
// this header meets them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <csetjmp>
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
// CUDA's vector types (the alignment CUDA gives them: 16-byte loads and stores of them stay 16-byte accesses).
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) int2 {
    int x, y;
};
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(8) uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
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
// Bit scans as CUDA defines them: __ffs(0) = 0, else the 1-based index of the lowest set bit; __clz(0) = 32.
inline int __ffs(int x) { return x == 0 ? 0 : __builtin_ctz((unsigned)x) + 1; }
inline int __ffs(unsigned x) { return __ffs((int)x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clz(unsigned x) { return __clz((int)x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float atomicAdd(float* p, float v) {
    const float old = *p;
    *p = old + v;
    return old;
}

// The dynamic shared memory every kernel names `sm` (extern __shared__ float sm[] binds to it).
alignas(1024) static float sm[232448 / 4];  // (1024: wgmma's 128-byte swizzle works on address bits)

namespace emu {

constexpr size_t STACK = 256 * 1024;

// A fiber starts once through its ucontext (makecontext gives it its stack) and from then on switches with
// _setjmp / _longjmp, which unlike swapcontext save no signal mask: no system call a switch (the library is built
// without _FORTIFY_SOURCE, whose longjmp check rejects jumps between stacks).
struct Fiber {
    ucontext_t ctx;
    jmp_buf jb;
    bool started = false;
    std::vector<char> stack;
    unsigned tid = 0;
    bool done = false, at_barrier = false, at_warp = false;
    int named_wait = -1;  // the named barrier this fiber waits at (bar.sync), or -1
};

// A named barrier (bar.sync / bar.arrive id, count; ids 1..15, 0 is __syncthreads): arrivals of the current phase,
// the count it completes at, its waiters, and for bar.red.and.pred the AND of the phase's predicates.
struct Named {
    unsigned arrived = 0, expected = 0;
    std::vector<Fiber*> waiting;
    bool and_acc = true, and_result = true;
};

// A warp's collective in flight: each lane deposits its value in slot[gen & 1] and waits until every live lane of
// the warp has; then all read the same generation (double-buffered: a lane can only deposit into it again after the
// next collective has gathered every lane, so after every lane has read).
struct Warp {
    unsigned long long slot[2][32];
    unsigned gen = 0;
};

// An mbarrier (shared::cta): arrivals still expected in the current phase, transaction bytes outstanding, the
// current phase's parity. The phase completes when both reach zero.
struct MBar {
    unsigned count = 0, pending = 0, phase = 0;
    long long tx = 0;
};

struct Block {
    ucontext_t sched;
    jmp_buf sched_jb;
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    Named named[16];
    Named wg_wait[8];  // wgmma.wait_group's rendezvous, one a warpgroup
    Fiber* cur = nullptr;
    std::function<void()> body;
    bool and_acc = true, and_result = true;  // __syncthreads_and: the predicates of this barrier, the last result
    std::string fault;                       // set by fault(): the launch stops with it
    std::map<unsigned, struct MBar> mbars;   // mbarriers by shared address
};

// Per library (static; the library is built with hidden visibility): libraries loaded side by side on several
// threads share nothing.
static Block* g_block = nullptr;
static Dim3 g_block_idx{0, 0, 0}, g_grid_dim{1, 1, 1}, g_block_dim{1, 1, 1};

static void trampoline() {
    g_block->body();
    g_block->cur->done = true;
    _longjmp(g_block->sched_jb, 1);  // back to the scheduler, never to return here
}

// This fiber waits: back to the scheduler until it resumes it.
inline void yield() {
    Fiber* f = g_block->cur;
    if (!_setjmp(f->jb)) _longjmp(g_block->sched_jb, 1);
}

// Something the emulator cannot or will not run (unmodelled PTX, a misaligned ldmatrix row, ...): the launch
// stops and reports it. This fiber never resumes.
[[noreturn]] inline void fault(const std::string& what) {
    g_block->fault = what;
    g_block->cur->done = true;
    _longjmp(g_block->sched_jb, 1);
}

inline void syncthreads() {
    Block* b = g_block;
    b->cur->at_barrier = true;
    yield();
}

inline int syncthreads_and(bool p) {
    g_block->and_acc = g_block->and_acc && p;
    syncthreads();
    return g_block->and_result ? 1 : 0;
}

// Deposits v for this lane's warp and waits for the whole warp; returns the 32 deposits of this collective.
inline const unsigned long long* warp_exchange(unsigned long long v) {
    Block* b = g_block;
    Fiber* f = b->cur;
    Warp& w = b->warps[f->tid / 32];
    const unsigned g = w.gen;
    w.slot[g & 1][f->tid & 31] = v;
    f->at_warp = true;
    yield();
    return w.slot[g & 1];
}

inline void check_full_mask(unsigned mask) {
    if (mask != 0xffffffffu) fault("a warp collective with a partial mask (not emulated)");
}

template <class T>
inline T from_bits(unsigned long long u) {
    T x;
    std::memcpy(&x, &u, sizeof(T));
    return x;
}
template <class T>
inline unsigned long long to_bits(T x) {
    unsigned long long u = 0;
    std::memcpy(&u, &x, sizeof(T));
    return u;
}
inline unsigned lane_id() { return g_block->cur->tid & 31; }

template <class T>
inline T shfl(unsigned mask, T v, int src, int width) {
    check_full_mask(mask);
    const unsigned lane = lane_id(), base = lane & ~(unsigned)(width - 1);
    const unsigned long long* all = warp_exchange(to_bits(v));
    return from_bits<T>(all[base + ((unsigned)src & (unsigned)(width - 1))]);
}
template <class T>
inline T shfl_up(unsigned mask, T v, unsigned delta, int width) {
    check_full_mask(mask);
    const unsigned lane = lane_id(), in = lane & (unsigned)(width - 1);
    const unsigned long long* all = warp_exchange(to_bits(v));
    return in >= delta ? from_bits<T>(all[lane - delta]) : v;
}
template <class T>
inline T shfl_down(unsigned mask, T v, unsigned delta, int width) {
    check_full_mask(mask);
    const unsigned lane = lane_id(), in = lane & (unsigned)(width - 1);
    const unsigned long long* all = warp_exchange(to_bits(v));
    return in + delta < (unsigned)width ? from_bits<T>(all[lane + delta]) : v;
}
template <class T>
inline T shfl_xor(unsigned mask, T v, int m, int width) {
    check_full_mask(mask);
    const unsigned lane = lane_id(), src = lane ^ (unsigned)m;
    const unsigned long long* all = warp_exchange(to_bits(v));
    return (src & ~(unsigned)(width - 1)) == (lane & ~(unsigned)(width - 1)) ? from_bits<T>(all[src]) : v;
}
inline unsigned ballot(unsigned mask, bool p) {
    check_full_mask(mask);
    const unsigned long long* all = warp_exchange(p ? 1 : 0);
    unsigned r = 0;
    for (unsigned l = 0; l < 32; ++l) r |= all[l] ? (1u << l) : 0u;
    return r;
}

// ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16: lanes 8i .. 8i+7 give the 16-byte rows of 8 × 8 matrix i (a
// shared-window address, here an offset into `sm`, 16-byte aligned); lane l receives of matrix i the 32-bit word of
// row l/4, elements 2(l%4), 2(l%4)+1 — or, transposed, elements (2(l%4), l/4) and (2(l%4)+1, l/4).
inline void ldmatrix(int n, bool trans, unsigned* d, unsigned addr) {
    const unsigned long long* all = warp_exchange(addr);
    const unsigned lane = lane_id();
    for (int i = 0; i < n; ++i) {
        unsigned short h[2];
        for (int u = 0; u < 2; ++u) {
            const unsigned row = trans ? 2 * (lane % 4) + u : lane / 4;
            const unsigned col = trans ? lane / 4 : 2 * (lane % 4) + u;
            const unsigned a = (unsigned)all[8 * i + row];
            if (a % 16 != 0 || a + 16 > sizeof(sm)) fault("ldmatrix: a row address that is not a 16-byte aligned shared row: " + std::to_string(a));
            std::memcpy(&h[u], reinterpret_cast<const char*>(sm) + a + 2 * col, 2);
        }
        d[i] = (unsigned)h[0] | ((unsigned)h[1] << 16);
    }
}

inline float half_bits_to_f32(unsigned short b, bool bf16) {
    if (bf16) return __uint_as_float((unsigned)b << 16);
    _Float16 x;
    std::memcpy(&x, &b, 2);
    return (float)x;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: the warp's fragments gathered, each lane's four accumulators
// computed in f32 (exact products of the 16-bit operands; the sum in another order than the tensor cores').
// Lane l, g = l/4, t = l%4: a0 (row g, k 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..); b0 (k 2t.., n g),
// b1 (k 2t+8.., n g); c0, c1 (row g, n 2t, 2t+1), c2, c3 (row g+8, ...).
inline void mma_16816(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1, bool bf16) {
    const unsigned long long* x = warp_exchange(((unsigned long long)a1 << 32) | a0);
    unsigned A01[32][2], A23[32][2], B[32][2];
    for (int l = 0; l < 32; ++l) { A01[l][0] = (unsigned)x[l]; A01[l][1] = (unsigned)(x[l] >> 32); }
    x = warp_exchange(((unsigned long long)a3 << 32) | a2);
    for (int l = 0; l < 32; ++l) { A23[l][0] = (unsigned)x[l]; A23[l][1] = (unsigned)(x[l] >> 32); }
    x = warp_exchange(((unsigned long long)b1 << 32) | b0);
    for (int l = 0; l < 32; ++l) { B[l][0] = (unsigned)x[l]; B[l][1] = (unsigned)(x[l] >> 32); }
    float Am[16][16], Bm[16][8];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int u = 0; u < 2; ++u) {
            const int sh = 16 * u;
            Am[g][2 * t + u] = half_bits_to_f32((unsigned short)(A01[l][0] >> sh), bf16);
            Am[g + 8][2 * t + u] = half_bits_to_f32((unsigned short)(A01[l][1] >> sh), bf16);
            Am[g][2 * t + 8 + u] = half_bits_to_f32((unsigned short)(A23[l][0] >> sh), bf16);
            Am[g + 8][2 * t + 8 + u] = half_bits_to_f32((unsigned short)(A23[l][1] >> sh), bf16);
            Bm[2 * t + u][g] = half_bits_to_f32((unsigned short)(B[l][0] >> sh), bf16);
            Bm[2 * t + 8 + u][g] = half_bits_to_f32((unsigned short)(B[l][1] >> sh), bf16);
        }
    }
    const int lane = (int)lane_id(), g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
        const int row = g + (r >> 1) * 8, col = 2 * t + (r & 1);
        float s = c[r];
        for (int k = 0; k < 16; ++k) s = std::fma(Am[row][k], Bm[k][col], s);
        c[r] = s;
    }
}

// bar.sync (wait) / bar.arrive id, count: this thread arrives; the count-th arrival of the phase releases its waiters.
inline void bar_named(unsigned id, unsigned count, bool wait) {
    Block* b = g_block;
    if (id == 0 || id >= 16 || count == 0 || count % 32 != 0) fault("a named barrier id or thread count that is not modelled");
    Named& n = b->named[id];
    if (n.arrived == 0) n.expected = count;
    if (n.expected != count) fault("named barrier " + std::to_string(id) + ": arrivals for two thread counts in one phase");
    if (++n.arrived == count) {
        for (Fiber* f : n.waiting) f->named_wait = -1;
        n.waiting.clear();
        n.arrived = 0;
        n.and_result = n.and_acc;
        n.and_acc = true;
        return;
    }
    if (wait) {
        b->cur->named_wait = (int)id;
        n.waiting.push_back(b->cur);
        yield();
    }
}

// wgmma.wait_group: a warpgroup's product is one collective operation, so no warp's wait ends before every warp of
// its warpgroup has issued the product (and the product has read its operands). Each wgmma here runs at its warp's
// issue; the wait is then a rendezvous of the warpgroup's 128 threads — the one ordering a kernel may rely on
// (without it a fast warp could rewrite an operand a slow warp has yet to read).
inline void wg_wait_group() {
    Block* b = g_block;
    const unsigned id = b->cur->tid / 128;
    if (id >= 8) fault("a warpgroup beyond the eighth");
    Named& n = b->wg_wait[id];
    if (n.arrived == 0) n.expected = 128;
    if (++n.arrived == 128) {
        for (Fiber* f : n.waiting) f->named_wait = -1;
        n.waiting.clear();
        n.arrived = 0;
        return;
    }
    b->cur->named_wait = 16 + (int)id;
    n.waiting.push_back(b->cur);
    yield();
}

// bar.red.and.pred: bar.sync that returns whether p held on every arriving thread.
inline unsigned bar_red_and(unsigned p, unsigned id, unsigned count) {
    Named& n = g_block->named[id % 16];
    n.and_acc = n.and_acc && p != 0;
    bar_named(id, count, true);
    return n.and_result ? 1u : 0u;
}

// Inline PTX the emulator does not model, reached by a kernel: stop with its name.
inline void unmodelled(const char* what) { fault(std::string("the kernel reached PTX the emulator does not model: ") + what); }

// stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16 [addr], {r..}: ldmatrix's inverse (lanes 8i .. 8i+7 give the rows
// of matrix i; lane l holds of matrix i row l/4, elements 2(l%4), +1 — transposed: (2(l%4), l/4), (2(l%4)+1, l/4)).
inline void stmatrix(int n, bool trans, unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    const unsigned long long* all = warp_exchange(addr);
    const unsigned lane = lane_id(), r[4] = {r0, r1, r2, r3};
    for (int i = 0; i < n; ++i)
        for (int u = 0; u < 2; ++u) {
            const unsigned row = trans ? 2 * (lane % 4) + u : lane / 4;
            const unsigned col = trans ? lane / 4 : 2 * (lane % 4) + u;
            const unsigned a = (unsigned)all[8 * i + row];
            if (a % 16 != 0 || a + 16 > sizeof(sm)) fault("stmatrix: a row address that is not a 16-byte aligned shared row: " + std::to_string(a));
            const unsigned short h = (unsigned short)(r[i] >> (16 * u));
            std::memcpy(reinterpret_cast<char*>(sm) + a + 2 * col, &h, 2);
        }
    (void)warp_exchange(0);  // every lane's stores land before any lane goes on
}

// The byte offset of element (mn, k) of a wgmma shared-memory operand: descriptor fields start (bits 0-13), leading
// byte offset (16-29) and stride byte offset (32-45), all in 16-byte units, and the 128-byte swizzle (bits 62-63 =
// 1: the 16-byte chunk index XOR the 128-byte row index mod 8, on the address). K-major: 8-row groups SBO apart,
// 128-byte rows; MN-major: rows of 128 bytes along MN, 8-row groups of k SBO apart, 128-byte panels of MN LBO apart.
inline unsigned wg_elem(unsigned long long desc, int mn, int k, bool mn_major, int esize) {
    if ((desc >> 62) != 1) fault("a wgmma descriptor without the 128-byte swizzle (not emulated)");
    const unsigned start = (unsigned)(desc & 0x3fff) << 4, lbo = (unsigned)((desc >> 16) & 0x3fff) << 4,
                   sbo = (unsigned)((desc >> 32) & 0x3fff) << 4;
    const int per = 128 / esize;
    const unsigned a = mn_major ? start + (unsigned)(mn / per) * lbo + (unsigned)(k / 8) * sbo + (unsigned)(k % 8) * 128 + (unsigned)(mn % per) * esize
                                : start + (unsigned)(mn / 8) * sbo + (unsigned)(mn % 8) * 128 + (unsigned)k * esize;
    return a ^ (((a >> 7) & 7) << 4);
}

// One operand element as f32: bf16 (kind 0), f16 (1), or tf32 (2: an f32 truncated to 10 mantissa bits, as the
// tensor cores read it).
inline float wg_load(unsigned off, int kind) {
    const char* p = reinterpret_cast<const char*>(sm) + off;
    if (kind == 2) {
        unsigned u;
        std::memcpy(&u, p, 4);
        return __uint_as_float(u & 0xffffe000u);
    }
    unsigned short h;
    std::memcpy(&h, p, 2);
    return half_bits_to_f32(h, kind == 0);
}

// This thread's accumulators of a warpgroup D (64 x n) += A (64 x k) B (k x n): element i is row 16 w + g + 8 ((i/2)%2),
// column 8 (i/4) + 2 t + i%2 (w the warp of the warpgroup, g = lane/4, t = lane%4).
template <class AF>
inline void wg_accumulate(float* d, int n, int k, AF a_elem, unsigned long long db, bool tb, int kind) {
    const int esize = kind == 2 ? 4 : 2;
    const unsigned lane = lane_id(), w = (g_block->cur->tid / 32) % 4, g = lane / 4, t = lane % 4;
    for (int i = 0; i < n / 2; ++i) {
        const int row = 16 * w + g + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + 2 * t + (i & 1);
        float s = d[i];
        for (int kk = 0; kk < k; ++kk) s = std::fma(a_elem(row, kk), wg_load(wg_elem(db, col, kk, tb, esize), kind), s);
        d[i] = s;
    }
}

// wgmma.mma_async with A and B in shared memory (descriptors; ta / tb: MN-major), run to completion at issue.
inline void wgmma_ss(float* d, int n, int k, int kind, int ta, int tb, unsigned long long da, unsigned long long db) {
    const int esize = kind == 2 ? 4 : 2;
    wg_accumulate(d, n, k, [&](int m, int kk) { return wg_load(wg_elem(da, m, kk, ta != 0, esize), kind); }, db, tb != 0, kind);
}

// wgmma.mma_async with A in registers (m64k16: each warp its 16 rows in the mma.sync A-fragment layout).
inline void wgmma_rs(float* d, int n, int kind, int tb, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long db) {
    const unsigned long long* x = warp_exchange(((unsigned long long)a1 << 32) | a0);
    unsigned A01[32][2], A23[32][2];
    for (int l = 0; l < 32; ++l) { A01[l][0] = (unsigned)x[l]; A01[l][1] = (unsigned)(x[l] >> 32); }
    x = warp_exchange(((unsigned long long)a3 << 32) | a2);
    for (int l = 0; l < 32; ++l) { A23[l][0] = (unsigned)x[l]; A23[l][1] = (unsigned)(x[l] >> 32); }
    float Am[16][16];
    for (int l = 0; l < 32; ++l) {
        const int g = l / 4, t = l % 4;
        for (int u = 0; u < 2; ++u) {
            const int sh = 16 * u;
            Am[g][2 * t + u] = half_bits_to_f32((unsigned short)(A01[l][0] >> sh), kind == 0);
            Am[g + 8][2 * t + u] = half_bits_to_f32((unsigned short)(A01[l][1] >> sh), kind == 0);
            Am[g][2 * t + 8 + u] = half_bits_to_f32((unsigned short)(A23[l][0] >> sh), kind == 0);
            Am[g + 8][2 * t + 8 + u] = half_bits_to_f32((unsigned short)(A23[l][1] >> sh), kind == 0);
        }
    }
    wg_accumulate(d, n, 16, [&](int m, int kk) { return Am[m % 16][kk]; }, db, tb != 0, kind);
}

// Yield without waiting on anything: the fiber stays runnable (a spin loop's turn).
inline void spin_yield() { yield(); }

inline MBar& mbar(unsigned bar) {
    auto it = g_block->mbars.find(bar);
    if (it == g_block->mbars.end()) fault("an mbarrier used before mbarrier.init: " + std::to_string(bar));
    return it->second;
}
inline void mbar_settle(MBar& m) {
    if (m.pending == 0 && m.tx == 0) {
        m.phase ^= 1;
        m.pending = m.count;
    }
}
inline void mbar_init(unsigned bar, unsigned count) { g_block->mbars[bar] = MBar{count, count, 0, 0}; }
inline void mbar_arrive_tx(unsigned bar, unsigned bytes) {
    MBar& m = mbar(bar);
    m.tx += bytes;
    if (m.pending == 0) fault("an mbarrier arrival beyond its count");
    --m.pending;
    mbar_settle(m);
}
// try_wait.parity in a loop: until the phase of parity `parity` has completed.
inline void mbar_wait(unsigned bar, unsigned parity) {
    for (long spins = 0; mbar(bar).phase == (parity & 1); ++spins) {
        if (spins > 1000000) fault("an mbarrier phase that never completes: " + std::to_string(bar));
        spin_yield();
    }
}

// The emulator's tensor map (what the tests put in the 128 bytes a CUtensorMap has): the global base, three dims
// (innermost first), the byte strides of dims 1 and 2, the box, the element size; 128-byte swizzle.
struct EmuTensorMap {
    unsigned long long base, dim[3], stride[2], box[3], esize, magic;
};
constexpr unsigned long long EMU_MAP_MAGIC = 0x656d75746d617021ull;

// cp.async.bulk.tensor.3d ... mbarrier::complete_tx::bytes: the box at (c0, c1, c2) into shared memory at dst
// (rows of box[0] elements, 128 bytes each, 128-byte swizzled; out-of-bounds elements zero), completed at issue.
inline void tma_load_3d(unsigned dst, unsigned long long map_addr, int c0, int c1, int c2, unsigned bar) {
    EmuTensorMap m;
    std::memcpy(&m, reinterpret_cast<const void*>(map_addr), sizeof m);
    if (m.magic != EMU_MAP_MAGIC || m.esize * m.box[0] != 128 || m.box[1] != 1) fault("a tensor map the emulator did not encode");
    const char* g = reinterpret_cast<const char*>(m.base);
    for (unsigned long long r = 0; r < m.box[2]; ++r)
        for (unsigned long long c = 0; c < m.box[0]; ++c) {
            const long long x = c0 + (long long)c, y = c1, z = c2 + (long long)r;
            unsigned a = dst + (unsigned)(r * 128 + c * m.esize);
            a ^= ((a >> 7) & 7) << 4;
            char* d = reinterpret_cast<char*>(sm) + a;
            if (x < (long long)m.dim[0] && y < (long long)m.dim[1] && z < (long long)m.dim[2] && x >= 0 && z >= 0)
                std::memcpy(d, g + z * m.stride[1] + y * m.stride[0] + x * m.esize, m.esize);
            else
                std::memset(d, 0, m.esize);
        }
    MBar& b = mbar(bar);
    b.tx -= (long long)(m.box[0] * m.box[2] * m.esize);
    mbar_settle(b);
}

// Runs one block of nt threads; returns an empty string or what went wrong.
inline std::string run_block(unsigned nt, const std::function<void()>& body) {
    Block b;
    b.body = body;
    b.fibers.resize(nt);
    b.warps.resize((nt + 31) / 32);
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
    auto fail = [&](const char* what, unsigned x, unsigned y) {
        char m[400];
        std::snprintf(m, sizeof m, "block (%u,%u,%u): %s (%u, %u)", g_block_idx.x, g_block_idx.y, g_block_idx.z, what, x, y);
        g_block = nullptr;
        return std::string(m);
    };
    // Blocks of odd index sum run their threads in reverse order between switches: a value one warp writes and
    // another reads with no barrier between shows as wrong in one of the two orders (every launch has both kinds
    // of blocks when it has more than one).
    const bool reverse = (g_block_idx.x + g_block_idx.y + g_block_idx.z) & 1;
    for (;;) {
        bool ran = false;
        for (unsigned i = 0; i < nt; ++i) {
            Fiber& f = b.fibers[reverse ? nt - 1 - i : i];
            if (f.done || f.at_barrier || f.at_warp || f.named_wait >= 0) continue;
            ran = true;
            b.cur = &f;
            if (!_setjmp(b.sched_jb)) {
                if (f.started) _longjmp(f.jb, 1);
                f.started = true;
                swapcontext(&b.sched, &f.ctx);  // first entry: onto the fiber's own stack
            }
            if (!b.fault.empty()) return fail(b.fault.c_str(), f.tid, 0);
        }
        // Release every warp whose live lanes all wait at a collective.
        bool released = false;
        for (unsigned w = 0; w < b.warps.size(); ++w) {
            const unsigned lo = w * 32, hi = std::min(nt, lo + 32);
            unsigned live = 0, waiting = 0;
            for (unsigned t = lo; t < hi; ++t) {
                live += !b.fibers[t].done;
                waiting += b.fibers[t].at_warp;
            }
            if (waiting == 0 || waiting != live) continue;
            if (live != hi - lo) return fail("a warp collective after lanes exited: waiting, exited", waiting, hi - lo - live);
            for (unsigned t = lo; t < hi; ++t) b.fibers[t].at_warp = false;
            ++b.warps[w].gen;
            released = true;
        }
        if (released) continue;
        unsigned waiting = 0, done = 0, blocked = 0;
        for (Fiber& f : b.fibers) {
            waiting += f.at_barrier;
            done += f.done;
            blocked += f.at_warp || f.named_wait >= 0;
        }
        if (done == nt) break;
        if (blocked == 0 && waiting + done == nt) {
            if (done > 0) return fail("threads wait at __syncthreads while others have exited: waiting, exited", waiting, done);
            for (Fiber& f : b.fibers) f.at_barrier = false;  // every thread arrived: release the barrier
            b.and_result = b.and_acc;
            b.and_acc = true;
            continue;
        }
        // Named barriers release inside bar_named; a pass in which nothing could run is a deadlock.
        if (!ran) return fail("deadlock: threads at warp collectives or named barriers, at __syncthreads", blocked, waiting);
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
                // Shared memory past what the launch asked for must be untouched (reads of it see NaN).
                const unsigned char* raw = reinterpret_cast<const unsigned char*>(sm);
                for (size_t i = smem; i < sizeof(sm); ++i)
                    if (raw[i] != 0xff) {
                        std::fprintf(stderr, "emu: block (%u,%u,%u) wrote shared byte %zu, past the %u bytes of its launch\n", x, y, z, i, smem);
                        return 3;
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
template <class T>
inline T __shfl_sync(unsigned m, T v, int src, int width = 32) { return ::emu::shfl(m, v, src, width); }
template <class T>
inline T __shfl_up_sync(unsigned m, T v, unsigned d, int width = 32) { return ::emu::shfl_up(m, v, d, width); }
template <class T>
inline T __shfl_down_sync(unsigned m, T v, unsigned d, int width = 32) { return ::emu::shfl_down(m, v, d, width); }
template <class T>
inline T __shfl_xor_sync(unsigned m, T v, int x, int width = 32) { return ::emu::shfl_xor(m, v, x, width); }
inline void __syncwarp(unsigned m = 0xffffffffu) {
    ::emu::check_full_mask(m);
    (void)::emu::warp_exchange(0);
}
inline unsigned __ballot_sync(unsigned m, int p) { return ::emu::ballot(m, p != 0); }
