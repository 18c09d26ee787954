// ---------------------------------------------------------------------------------------------------------------
// Entry points. Each is a short tile program over the stages above.
// ---------------------------------------------------------------------------------------------------------------

// The chunk's scores A and decayed operands. Per-key gates take the one-matmul factorised form on mild chunks
// (decay span <= SPAN_MAX: intra_scores_factored) and the exact sub-chunk form (§4.3) otherwise.
template <class G = CTA>
__device__ __forceinline__ void intra_and_operands(const Tiles& s, int b, bool mild) {
#if KEY_GATE == GATE_PER_KEY
    if (mild) {
        decay_operands<G>(s, b, true, true);                 // Q̃ = Q ⊙ exp(Γ), K̃ = K ⊙ exp(−Γ), K̂
        G::sync();
        intra_scores_factored<G>(s, b);                      // A = (Q̃ K̃^T) ⊙ M
        return;
    }
#endif
    (void)mild;
    intra_scores<G>(s, b);                                   // A = (Q K^T) ⊙ D  (decay-masked, §4.3)
    decay_operands<G>(s, b, true, false);                    // Q̃ = Q ⊙ exp(Γ), K̂ = K ⊙ exp(Γ_L − Γ)
}
