//! [`SpecRecord`]: a [`KernelSpec`] as plain serialisable data (the gate and dtype left out), for the tuning cache's
//! index. [`SpecRecord::spec`] turns it back into a validated spec for a gate and dtype. [`BackwardRecord`]: the same
//! for a backward kernel set ([`BackwardSpec`]) and its walk segments.

use crate::backward::{BackwardForm, BackwardSpec};
use crate::spec::{specialised_dim, KernelSpec, Pass, Tiles};
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

/// A backward kernel set's choices as plain data (the gate and dtype left out, as in [`SpecRecord`]): its form, its
/// specialised head dims and, for the walk form, the chunks a segment it was chosen with (`None`: the runtime's
/// [`BackwardSpec::walk_segment_chunks`]) and whether dq and dk run as passes of the forward kernel (`None`: the
/// runtime's default, [`crate::per_key_passes_default`] for per-key gates).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BackwardRecord {
    pub form: BackwardForm,
    /// [`BackwardSpec::dk`].
    pub dk: u32,
    /// [`BackwardSpec::dv`].
    pub dv: u32,
    /// Chunks a walk segment (`Some(0)`: sequences walk whole).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seg_chunks: Option<u32>,
    /// dq and dk as passes of the forward kernel (`Some(true)`), from the walks (`Some(false)`), or as the runtime
    /// decides (`None`; entries written before the tuner chose it have none). The chunk form has no passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dq_dk_passes: Option<bool>,
}

impl BackwardRecord {
    /// The record of `s` with walk segments of `seg_chunks` and dq / dk passes as `dq_dk_passes` says.
    pub fn of(
        s: &BackwardSpec,
        seg_chunks: Option<u32>,
        dq_dk_passes: Option<bool>,
    ) -> BackwardRecord {
        BackwardRecord {
            form: s.form,
            dk: s.dk,
            dv: s.dv,
            seg_chunks,
            dq_dk_passes,
        }
    }

    /// The kernel set for `gate` and `dtype`: [`BackwardSpec::for_problem`] at the record's head dims (which must be
    /// specialised ones), then [`BackwardSpec::with_form`]. A record that is none (hand-edited, or from another
    /// codegen) is an error naming the bad field.
    pub fn spec(&self, gate: &'static dyn Gate, dtype: DType) -> Result<BackwardSpec, GlaError> {
        for (what, d) in [("d_k", self.dk), ("d_v", self.dv)] {
            if specialised_dim(d as usize) != Some(d) {
                return Err(GlaError::invalid(
                    "backward record",
                    format!("{what} = {d} is not a specialised head dim (64, 128, 256, 512)"),
                ));
            }
        }
        if self.form == BackwardForm::Chunks && self.seg_chunks.is_some_and(|k| k > 0) {
            return Err(GlaError::invalid(
                "backward record",
                "walk segments on the chunk form",
            ));
        }
        if self.form == BackwardForm::Chunks && self.dq_dk_passes == Some(true) {
            return Err(GlaError::invalid(
                "backward record",
                "dq / dk passes on the chunk form (they run beside the walk form's dv pass)",
            ));
        }
        BackwardSpec::for_problem(gate, dtype, self.dk as usize, self.dv as usize)?
            .with_form(self.form)
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

    #[test]
    fn backward_records_round_trip_and_refuse_what_is_none() {
        for form in [BackwardForm::Chunks, BackwardForm::Walks] {
            for d in [64usize, 128, 256] {
                let s = BackwardSpec::for_problem(&PER_KEY, DType::BF16, d, d)
                    .unwrap()
                    .with_form(form)
                    .unwrap();
                let walks = form == BackwardForm::Walks;
                for passes in [None, Some(false)]
                    .into_iter()
                    .chain(walks.then_some(Some(true)))
                {
                    let r = BackwardRecord::of(&s, walks.then_some(16), passes);
                    let back = r.spec(&PER_KEY, DType::BF16).unwrap();
                    assert_eq!(back.id(), s.id());
                    let json = serde_json::to_string(&r).unwrap();
                    assert_eq!(json.contains("dq_dk_passes"), passes.is_some(), "{json}");
                    assert_eq!(serde_json::from_str::<BackwardRecord>(&json).unwrap(), r);
                }
            }
        }
        let r = BackwardRecord {
            form: BackwardForm::Walks,
            dk: 128,
            dv: 128,
            seg_chunks: None,
            dq_dk_passes: None,
        };
        // (a record written before the tuner chose dq / dk passes reads as the runtime's default)
        let old = r#"{"form":"walks","dk":128,"dv":128,"seg_chunks":8}"#;
        assert_eq!(
            serde_json::from_str::<BackwardRecord>(old).unwrap(),
            BackwardRecord {
                seg_chunks: Some(8),
                ..r
            }
        );
        assert!(BackwardRecord { dk: 100, ..r }
            .spec(&PER_KEY, DType::BF16)
            .is_err());
        assert!(r.spec(&PER_KEY, DType::F32).is_err(), "no walk form in f32");
        assert!(
            r.spec(&PER_VALUE, DType::BF16).is_err(),
            "nor for per-value gates"
        );
        assert!(BackwardRecord {
            form: BackwardForm::Chunks,
            seg_chunks: Some(4),
            ..r
        }
        .spec(&PER_KEY, DType::BF16)
        .is_err());
        let e = BackwardRecord {
            form: BackwardForm::Chunks,
            dq_dk_passes: Some(true),
            ..r
        }
        .spec(&PER_KEY, DType::BF16)
        .unwrap_err();
        assert!(e.to_string().contains("passes on the chunk form"), "{e}");
    }
}
