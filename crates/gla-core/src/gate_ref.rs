//! CPU reference driven by a [`crate::Gate`] and raw logits (owned by the gate/macro work; see issue 3).
