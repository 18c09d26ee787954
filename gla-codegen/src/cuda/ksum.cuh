// Key split: O = Σ_s O_s over the KSPLIT key slices (the chunkwise form is linear in d_k: each slice's CTAs computed
// Q̃_s S_s + ((Q̃_s K̃_sᵀ) ⊙ M) V from their d_k / KSPLIT key columns), summed in f32 and rounded once. 4 outputs a
// thread, grid x = ceil(tokens · H · d_v / (4 · 256)).
extern "C" __global__ void __launch_bounds__(256) gla_fwd_ksum(const __grid_constant__ FwdArgs a) {
    const i64 n = a.cu_seqlens[a.n_seqs] * (i64)(a.h / KSPLIT) * a.dv;
    const i64 i = 4 * ((i64)blockIdx.x * 256 + threadIdx.x);
    if (i >= n) return;
    const float* part = ks_partial(a);
    if (n % 4 == 0) {
        float4 acc = *reinterpret_cast<const float4*>(part + i);
#pragma unroll
        for (int sl = 1; sl < KSPLIT; ++sl) {
            const float4 p = *reinterpret_cast<const float4*>(part + sl * n + i);
            acc.x += p.x; acc.y += p.y; acc.z += p.z; acc.w += p.w;
        }
        a.o[i] = to_elem(acc.x); a.o[i + 1] = to_elem(acc.y); a.o[i + 2] = to_elem(acc.z); a.o[i + 3] = to_elem(acc.w);
    } else {
        for (i64 j = i; j < min(n, i + 4); ++j) {
            float acc = 0.f;
#pragma unroll
            for (int sl = 0; sl < KSPLIT; ++sl) acc += part[sl * n + j];
            a.o[j] = to_elem(acc);
        }
    }
}
