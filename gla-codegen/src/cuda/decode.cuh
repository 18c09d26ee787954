// The decode step (one new token a sequence: the recurrent form, f32 state in HBM, read and written once), per
// (sequence n, head): log α = gate(x) of the token, then
//   S ← diag(α) S + k vᵀ        (per key, per head, fixed gates: α scales the state's rows, d_k)
//   S ← S diag(β) + k vᵀ        (per-value gates: β scales its columns, d_v)
//   o = scale · Sᵀ q            (the output sees the token itself, as the chunkwise forward's o_t = q_t S_t)
// A CTA per (64 value columns, head, sequence): thread (column e, quarter r of the rows) walks rows d ≡ r (mod 4)
// — a warp reads 32 consecutive columns of a row, one 128-byte line, eight rows' lines before it writes any —
// updating S in place and summing q_d S_de; the four quarters' sums meet in shared memory. Every decay is e^{log α} with log α ≤ 0: no overflow at any strength.

struct DecArgs {         // mirrors gla_codegen::DecodeArgs (#[repr(C)])
    const elem_t* q;     // [N, H, dk]
    const elem_t* k;     // [N, H, dk]
    const elem_t* v;     // [N, H, dv]
    const elem_t* g;     // logits: per key [N, H, dk], per head [N, H], per value [N, H, dv]; null for fixed gates
    const float* params; // [H, P], or null
    float* state;        // [N, H, dk, dv], updated in place
    elem_t* o;           // [N, H, dv]
    int n, h, dk, dv;
    float scale;
    int pad;
};

constexpr int DCOLS = 64, DPARTS = NT / DCOLS, DROWS = 8;  // value columns a CTA, row quarters, rows in flight a thread
static_assert(DPARTS * DCOLS == NT, "whole columns of threads");

extern "C" __global__ void __launch_bounds__(NT) gla_decode(const __grid_constant__ DecArgs a) {
    extern __shared__ __align__(16) float sm[];
    float* QS = sm;             // [dk] q
    float* KS = QS + a.dk;      // [dk] k
    float* AS = KS + a.dk;      // [dk] α (key gates)
    float* OP = AS + a.dk;      // [DPARTS][DCOLS] the quarters' sums
    const int e0 = blockIdx.x * DCOLS, head = blockIdx.y, n = blockIdx.z;
    const i64 row = (i64)n * a.h + head;  // this (sequence, head)'s token
    const float* p = a.params ? a.params + (i64)head * NPARAM : nullptr;

    // 1. q, k and the key decays of the token.
    for (int d = threadIdx.x; d < a.dk; d += NT) {
        QS[d] = to_f32(a.q[row * a.dk + d]);
        KS[d] = to_f32(a.k[row * a.dk + d]);
#if KEY_GATE == GATE_PER_KEY
        AS[d] = gla_exp(gate_log_alpha(to_f32(a.g[row * a.dk + d]), p));
#elif KEY_GATE == GATE_PER_HEAD
        AS[d] = gla_exp(gate_log_alpha(to_f32(a.g[row]), p));
#elif KEY_GATE == GATE_FIXED
        AS[d] = gla_exp(gate_log_alpha((float)head, p));  // a fixed gate's input is the head index
#else
        AS[d] = 1.f;
#endif
    }
    __syncthreads();

    // 2. The state's update and the output's partial sums, a column and a quarter of the rows a thread.
    const int e = threadIdx.x % DCOLS, part = threadIdx.x / DCOLS, col = e0 + e;
    float acc = 0.f;
    if (col < a.dv) {
        const float vv = to_f32(a.v[row * a.dv + col]);
#if KEY_GATE == GATE_PER_VALUE
        const float beta = gla_exp(gate_log_alpha(to_f32(a.g[row * a.dv + col]), p));
#endif
        float* S = a.state + row * (i64)a.dk * a.dv + col;
        // DROWS of this thread's rows loaded at once, then updated and stored: many lines in flight a warp.
        for (int d0 = part; d0 < a.dk; d0 += DROWS * DPARTS) {
            float s[DROWS];
#pragma unroll
            for (int u = 0; u < DROWS; ++u) {
                const int d = d0 + u * DPARTS;
                s[u] = d < a.dk ? S[(i64)d * a.dv] : 0.f;
            }
#pragma unroll
            for (int u = 0; u < DROWS; ++u) {
                const int d = d0 + u * DPARTS;
                if (d < a.dk) {
#if KEY_GATE == GATE_PER_VALUE
                    const float x = fmaf(beta, s[u], KS[d] * vv);
#else
                    const float x = fmaf(AS[d], s[u], KS[d] * vv);
#endif
                    S[(i64)d * a.dv] = x;
                    acc = fmaf(QS[d], x, acc);
                }
            }
        }
    }
    OP[part * DCOLS + e] = acc;
    __syncthreads();

    // 3. o = scale · Sᵀ q.
    if (part == 0 && col < a.dv) {
        float s = 0.f;
#pragma unroll
        for (int r = 0; r < DPARTS; ++r) s += OP[r * DCOLS + e];
        a.o[row * a.dv + col] = to_elem(a.scale * s);
    }
}
