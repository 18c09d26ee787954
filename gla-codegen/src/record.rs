//! [`SpecRecord`]: a [`KernelSpec`] as plain serialisable data (the gate and dtype left out), for the tuning cache's
//! index. [`SpecRecord::spec`] turns it back into a validated spec for a gate and dtype.

use crate::spec::{KernelSpec, Pass, Tiles};
use gla_core::{DType, Gate, GlaError};
use serde::{Deserialize, Serialize};

/// A [`KernelSpec`]'s choices as plain data: every field but the gate, the pass (forward) and the dtype, which the
/// tuning cache keys on. Field meanings are [`KernelSpec`]'s and [`Tiles`]'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpecRecord {
    /// [`KernelSpec::chunk`].
    pub chunk: u32,
    /// [`KernelSpec::sub_chunk`].
    pub sub_chunk: u32,
    /// [`KernelSpec::dk`] (the specialised key dim of one key slice).
    pub dk: u32,
    /// [`KernelSpec::dv`].
    pub dv: u32,
    /// [`KernelSpec::materialize`].
    pub materialize: bool,
    /// [`Tiles::block_v`].
    pub block_v: u32,
    /// [`Tiles::warps`].
    pub warps: u32,
    /// [`Tiles::producer_warps`].
    pub producer_warps: u32,
    /// [`Tiles::producer_groups`].
    pub producer_groups: u32,
    /// [`Tiles::wgmma`].
    pub wgmma: bool,
    /// [`Tiles::ctas_per_sm`].
    pub ctas_per_sm: u32,
    /// [`KernelSpec::key_split`].
    pub key_split: u32,
    /// [`KernelSpec::cluster`].
    pub cluster: bool,
}

impl SpecRecord {
    /// The record of `s`.
    pub fn of(s: &KernelSpec) -> SpecRecord {
        let t = &s.tiles;
        SpecRecord {
            chunk: s.chunk,
            sub_chunk: s.sub_chunk,
            dk: s.dk,
            dv: s.dv,
            materialize: s.materialize,
            block_v: t.block_v,
            warps: t.warps,
            producer_warps: t.producer_warps,
            producer_groups: t.producer_groups,
            wgmma: t.wgmma,
            ctas_per_sm: t.ctas_per_sm,
            key_split: s.key_split,
            cluster: s.cluster,
        }
    }

    /// The record's [`Tiles`].
    pub fn tiles(&self) -> Tiles {
        Tiles {
            block_v: self.block_v,
            warps: self.warps,
            producer_warps: self.producer_warps,
            producer_groups: self.producer_groups,
            wgmma: self.wgmma,
            ctas_per_sm: self.ctas_per_sm,
        }
    }

    /// The validated spec for `gate` and `dtype`: the spec [`KernelSpec::new`] then [`KernelSpec::with_key_split`] /
    /// [`KernelSpec::with_cluster_key_split`] build from these fields, checked by [`KernelSpec::validate`] as a
    /// whole. A record that is no valid variant for this gate and dtype (e.g. read from a hand-edited cache, or a
    /// cache written by another codegen version) is [`GlaError::Unsupported`] naming the bad field.
    pub fn spec(&self, gate: &'static dyn Gate, dtype: DType) -> Result<KernelSpec, GlaError> {
        let s = KernelSpec {
            gate,
            pass: Pass::Forward,
            chunk: self.chunk,
            sub_chunk: self.sub_chunk,
            dk: self.dk,
            dv: self.dv,
            materialize: self.materialize,
            dtype,
            tiles: self.tiles(),
            key_split: self.key_split,
            cluster: self.cluster,
        };
        s.validate()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{FIXED, PER_HEAD, PER_KEY, PER_VALUE};

    #[test]
    fn every_variant_round_trips() {
        let mut n = 0;
        let mut split = 0;
        for gate in [&PER_KEY as &'static dyn Gate, &PER_HEAD, &FIXED, &PER_VALUE] {
            for s in crate::all_variants(gate) {
                let r = SpecRecord::of(&s);
                let back = r
                    .spec(gate, s.dtype)
                    .unwrap_or_else(|e| panic!("{}: {e}", s.id()));
                assert_eq!(back.id(), s.id());
                assert_eq!(SpecRecord::of(&back), r);
                n += 1;
                split += (s.key_split > 1) as usize;
            }
        }
        assert!(n > 0 && split > 0, "{n} variants, {split} key-split");
    }

    #[test]
    fn invalid_records_are_errors() {
        let s = KernelSpec::default_for(&PER_KEY, DType::BF16, 128, 128).unwrap();
        let r = SpecRecord::of(&s);
        assert!(matches!(
            SpecRecord { chunk: 48, ..r }.spec(&PER_KEY, DType::BF16),
            Err(GlaError::Unsupported { .. })
        ));
        assert!(SpecRecord { key_split: 3, ..r }
            .spec(&PER_KEY, DType::BF16)
            .is_err());
        assert!(SpecRecord {
            key_split: 1,
            cluster: true,
            ..r
        }
        .spec(&PER_KEY, DType::BF16)
        .is_err());
        // Warp specialisation is not an f32 variant.
        assert!(r.spec(&PER_KEY, DType::F32).is_err());
    }
}
