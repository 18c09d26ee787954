//! Element types, problem dimensions and a small host tensor with shape/dtype validation.
//!
//! Layout everywhere is fla's: `[B, T, H, D]`, row-major, D fastest.

use crate::error::{GlaError, Result};
use half::{bf16, f16};
use std::fmt;

/// Element type of q, k, v, o (gate logits and states are always f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    BF16,
    F16,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::BF16, DType::F16, DType::F32];
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::BF16 | DType::F16 => 2,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
        }
    }
    /// Round an f32 to this dtype and back (what storing in this dtype does to a value).
    pub fn round(self, x: f32) -> f32 {
        match self {
            DType::F32 => x,
            DType::BF16 => bf16::from_f32(x).to_f32(),
            DType::F16 => f16::from_f32(x).to_f32(),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Dimensions of one problem. With `cu_seqlens`, `b == 1` and `t` is the total packed length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dims {
    pub b: usize,
    pub t: usize,
    pub h: usize,
    pub dk: usize,
    pub dv: usize,
}

impl Dims {
    pub fn new(b: usize, t: usize, h: usize, dk: usize, dv: usize) -> Self {
        Dims { b, t, h, dk, dv }
    }
    pub fn q_shape(&self) -> [usize; 4] {
        [self.b, self.t, self.h, self.dk]
    }
    pub fn v_shape(&self) -> [usize; 4] {
        [self.b, self.t, self.h, self.dv]
    }
    /// Validate `cu_seqlens` (if any) against these dims and return the sequences as `(start, len)` pairs in
    /// token units of the flattened `[B*T]` axis.
    pub fn sequences(&self, cu_seqlens: Option<&[usize]>) -> Result<Vec<(usize, usize)>> {
        if self.h == 0 || self.dk == 0 || self.dv == 0 {
            return Err(GlaError::invalid(
                "dims",
                format!("H, d_k and d_v must be positive, got {self:?}"),
            ));
        }
        match cu_seqlens {
            None => Ok((0..self.b).map(|b| (b * self.t, self.t)).collect()),
            Some(cu) => {
                if self.b != 1 {
                    return Err(GlaError::invalid(
                        "cu_seqlens",
                        format!("variable-length batches need B = 1 (sequences packed along T), got B = {}", self.b),
                    ));
                }
                if cu.len() < 2 {
                    return Err(GlaError::invalid(
                        "cu_seqlens",
                        format!("needs N+1 >= 2 offsets, got {}", cu.len()),
                    ));
                }
                if cu[0] != 0 || *cu.last().unwrap() != self.t {
                    return Err(GlaError::invalid(
                        "cu_seqlens",
                        format!(
                            "must start at 0 and end at T = {}, got {:?}..{:?}",
                            self.t,
                            cu.first(),
                            cu.last()
                        ),
                    ));
                }
                if let Some(w) = cu.windows(2).position(|w| w[1] < w[0]) {
                    return Err(GlaError::invalid(
                        "cu_seqlens",
                        format!(
                            "must be non-decreasing, but cu_seqlens[{}] = {} > cu_seqlens[{}] = {}",
                            w,
                            cu[w],
                            w + 1,
                            cu[w + 1]
                        ),
                    ));
                }
                Ok(cu.windows(2).map(|w| (w[0], w[1] - w[0])).collect())
            }
        }
    }
}

/// Host-side tensor data in one of the supported dtypes.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

/// A host tensor: shape + data; the unit of transfer to and from the GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: HostData,
}

impl HostTensor {
    /// Build from f32 values, rounding to `dtype`. Errors if `values.len()` does not match `shape`.
    pub fn from_f32(dtype: DType, shape: &[usize], values: &[f32]) -> Result<Self> {
        let n: usize = shape.iter().product();
        if n != values.len() {
            return Err(GlaError::invalid(
                "values",
                format!("shape {shape:?} holds {n} elements, got {}", values.len()),
            ));
        }
        let data = match dtype {
            DType::F32 => HostData::F32(values.to_vec()),
            DType::BF16 => HostData::BF16(values.iter().map(|&x| bf16::from_f32(x)).collect()),
            DType::F16 => HostData::F16(values.iter().map(|&x| f16::from_f32(x)).collect()),
        };
        Ok(HostTensor {
            shape: shape.to_vec(),
            data,
        })
    }
    pub fn dtype(&self) -> DType {
        match self.data {
            HostData::F32(_) => DType::F32,
            HostData::BF16(_) => DType::BF16,
            HostData::F16(_) => DType::F16,
        }
    }
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            HostData::F32(v) => v.clone(),
            HostData::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
            HostData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        }
    }
    pub fn to_f64(&self) -> Vec<f64> {
        self.to_f32().into_iter().map(f64::from).collect()
    }
    /// Check shape and dtype; the error names `what`.
    pub fn expect(&self, what: &'static str, shape: &[usize], dtype: DType) -> Result<()> {
        if self.shape != shape {
            return Err(GlaError::shape(what, format!("{shape:?}"), &self.shape));
        }
        if self.dtype() != dtype {
            return Err(GlaError::DType {
                what,
                expected: dtype.to_string(),
                got: self.dtype().to_string(),
            });
        }
        Ok(())
    }
}
