//! Device tensors: a shape, a dtype and a byte buffer on the GPU's stream.
//!
//! q, k, v, o and the gate logits are in the problem's dtype (f32 / bf16 / f16); gate parameters and states are
//! f32.
//! Transfers go through little-endian bytes, so no `DeviceRepr` impls for `half` types are needed.

use crate::device::{cuda_err, Gpu};
use crate::ffi;
use cudarc::driver::{CudaSlice, DevicePtr};
use gla_core::error::Result;
use gla_core::tensor::HostData;
use gla_core::{DType, GlaError, HostTensor};
use half::{bf16, f16};

/// The 32-bit pattern [`DeviceTensor::poison`] writes: a NaN as f32, and two NaNs as bf16 or f16 (0xFFFF is NaN in
/// both half formats), so a test can tell an output element that a kernel never wrote.
pub const POISON_WORD: u32 = 0xFFFF_FFFF;

/// A dense row-major tensor on the GPU.
pub struct DeviceTensor {
    shape: Vec<usize>,
    dtype: DType,
    /// At least 4 bytes (CUDA cannot allocate 0); [`DeviceTensor::num_bytes`] is the logical size.
    buf: CudaSlice<u8>,
}

impl std::fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceTensor({} {:?} @ {:#x})",
            self.dtype,
            self.shape,
            self.device_ptr()
        )
    }
}

fn num_elems(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .ok_or_else(|| {
            GlaError::invalid(
                "shape",
                format!("{shape:?} has more elements than fit in usize"),
            )
        })
}

/// Host data → little-endian bytes.
pub fn host_bytes(data: &HostData) -> Vec<u8> {
    match data {
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Little-endian bytes → host data of `dtype` (`bytes.len()` must be a multiple of the element size).
pub fn host_data(dtype: DType, bytes: &[u8]) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::BF16 => HostData::BF16(
            bytes
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        DType::F16 => HostData::F16(
            bytes
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
    }
}

impl DeviceTensor {
    /// A tensor with unspecified contents (no memset): for outputs that a kernel overwrites.
    pub fn empty(gpu: &Gpu, dtype: DType, shape: &[usize]) -> Result<Self> {
        let bytes = num_elems(shape)?
            .checked_mul(dtype.size_bytes())
            .ok_or_else(|| GlaError::invalid("shape", "too large"))?;
        let buf = ffi::alloc_uninit(gpu.stream(), bytes.max(4)).map_err(cuda_err("cuMemAlloc"))?;
        Ok(DeviceTensor {
            shape: shape.to_vec(),
            dtype,
            buf,
        })
    }

    /// A tensor of zeros.
    pub fn zeros(gpu: &Gpu, dtype: DType, shape: &[usize]) -> Result<Self> {
        let mut t = Self::empty(gpu, dtype, shape)?;
        t.fill_bytes(0)?;
        Ok(t)
    }

    /// A tensor whose every element is NaN (see [`POISON_WORD`]).
    pub fn poisoned(gpu: &Gpu, dtype: DType, shape: &[usize]) -> Result<Self> {
        let mut t = Self::empty(gpu, dtype, shape)?;
        t.poison()?;
        Ok(t)
    }

    /// Copy a host tensor to the GPU.
    pub fn upload(gpu: &Gpu, host: &HostTensor) -> Result<Self> {
        let n = num_elems(&host.shape)?;
        let bytes = host_bytes(&host.data);
        if bytes.len() != n * host.dtype().size_bytes() {
            return Err(GlaError::shape(
                "host tensor",
                format!("{n} elements"),
                &[bytes.len() / host.dtype().size_bytes()],
            ));
        }
        let mut t = Self::empty(gpu, host.dtype(), &host.shape)?;
        if !bytes.is_empty() {
            gpu.stream()
                .memcpy_htod(&bytes, &mut t.buf)
                .map_err(cuda_err("cuMemcpyHtoD"))?;
        }
        Ok(t)
    }

    /// A tensor of `shape` whose element i is `pool[(i + offset) % pool.len()]` (`pool`'s dtype), built on the device:
    /// the rotated pool is uploaded once, then doubled by device-to-device copies (⌈log2(n / pool)⌉ of them), so a
    /// large timing input costs neither host memory nor a host-to-device copy of its size. Errors: an empty pool.
    pub fn tiled(gpu: &Gpu, shape: &[usize], pool: &HostTensor, offset: usize) -> Result<Self> {
        let dtype = pool.dtype();
        let es = dtype.size_bytes();
        let p = num_elems(&pool.shape)?;
        if p == 0 {
            return Err(GlaError::invalid("pool", "an empty pool tiles nothing"));
        }
        let n = num_elems(shape)?;
        let mut t = Self::empty(gpu, dtype, shape)?;
        if n == 0 {
            return Ok(t);
        }
        let bytes = host_bytes(&pool.data);
        let first = n.min(p);
        let rotated: Vec<u8> = (0..first)
            .flat_map(|i| {
                let j = (i + offset) % p;
                bytes[j * es..(j + 1) * es].iter().copied()
            })
            .collect();
        let stream = gpu.stream();
        stream
            .memcpy_htod(&rotated, &mut t.buf.slice_mut(0..first * es))
            .map_err(cuda_err("cuMemcpyHtoD"))?;
        // Invariant: elements [0, filled) are right and `filled` is a multiple of p (or n < p), so copying
        // [0, m) to [filled, filled + m) continues the cycle.
        let mut filled = first;
        while filled < n {
            let m = filled.min(n - filled);
            let (done, mut rest) = t.buf.split_at_mut(filled * es);
            stream
                .memcpy_dtod(&done.slice(0..m * es), &mut rest.slice_mut(0..m * es))
                .map_err(cuda_err("cuMemcpyDtoD"))?;
            filled += m;
        }
        Ok(t)
    }

    /// An f32 tensor from values (gate parameters, states).
    pub fn from_f32(gpu: &Gpu, shape: &[usize], values: &[f32]) -> Result<Self> {
        Self::upload(gpu, &HostTensor::from_f32(DType::F32, shape, values)?)
    }

    /// Copy to the host (waits for the stream).
    pub fn download(&self) -> Result<HostTensor> {
        let n = self.num_bytes();
        let mut bytes = vec![0u8; self.buf.len()];
        self.buf
            .stream()
            .memcpy_dtoh(&self.buf, &mut bytes)
            .map_err(cuda_err("cuMemcpyDtoH"))?;
        self.buf
            .stream()
            .synchronize()
            .map_err(cuda_err("cuStreamSynchronize"))?;
        bytes.truncate(n);
        Ok(HostTensor {
            shape: self.shape.clone(),
            data: host_data(self.dtype, &bytes),
        })
    }

    /// Copy to the host as f32 values.
    pub fn to_f32(&self) -> Result<Vec<f32>> {
        Ok(self.download()?.to_f32())
    }

    /// Set every byte to `byte` (stream-ordered).
    pub fn fill_bytes(&mut self, byte: u8) -> Result<()> {
        let stream = self.buf.stream().clone();
        ffi::memset_d8(&stream, &mut self.buf, byte).map_err(cuda_err("cuMemsetD8"))
    }

    /// Fill with NaN (see [`POISON_WORD`]), so elements a kernel fails to write show up in comparisons.
    pub fn poison(&mut self) -> Result<()> {
        let stream = self.buf.stream().clone();
        #[allow(clippy::manual_is_multiple_of)]
        // is_multiple_of needs Rust 1.87; the workspace supports 1.85
        if self.buf.len() % 4 == 0 {
            ffi::memset_d32(&stream, &mut self.buf, POISON_WORD).map_err(cuda_err("cuMemsetD32"))
        } else {
            ffi::memset_d8(&stream, &mut self.buf, 0xFF).map_err(cuda_err("cuMemsetD8"))
        }
    }

    /// Copy `src`'s contents into `self` (same shape and dtype), device to device.
    pub fn copy_from(&mut self, src: &DeviceTensor) -> Result<()> {
        src.expect("copy source", &self.shape, self.dtype)?;
        let stream = self.buf.stream().clone();
        stream
            .memcpy_dtod(&src.buf, &mut self.buf)
            .map_err(cuda_err("cuMemcpyDtoD"))
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Logical size in bytes (`len() * dtype.size_bytes()`).
    pub fn num_bytes(&self) -> usize {
        self.len() * self.dtype.size_bytes()
    }

    /// The device address (what goes into a kernel's argument struct).
    pub fn device_ptr(&self) -> u64 {
        let (ptr, _sync) = self.buf.device_ptr(self.buf.stream());
        ptr
    }

    /// Whether this tensor lives in `gpu`'s context.
    pub fn is_on(&self, gpu: &Gpu) -> bool {
        self.buf.context() == gpu.context()
    }

    /// Check shape and dtype; errors name `what` and say what was expected.
    pub fn expect(&self, what: &'static str, shape: &[usize], dtype: DType) -> Result<()> {
        check_tensor(what, &self.shape, self.dtype, shape, dtype)
    }

    /// Replace the shape by another of the same number of elements (no copy).
    pub fn reshape(mut self, shape: &[usize]) -> Result<Self> {
        if num_elems(shape)? != self.len() {
            return Err(GlaError::shape(
                "reshape",
                format!("{} elements", self.len()),
                shape,
            ));
        }
        self.shape = shape.to_vec();
        Ok(self)
    }
}

/// Shape/dtype check shared by device tensors and the pure validation (`forward::validate_forward`).
pub fn check_tensor(
    what: &'static str,
    shape: &[usize],
    dtype: DType,
    want_shape: &[usize],
    want_dtype: DType,
) -> Result<()> {
    if shape != want_shape {
        return Err(GlaError::shape(what, format!("{want_shape:?}"), shape));
    }
    if dtype != want_dtype {
        return Err(GlaError::DType {
            what,
            expected: want_dtype.to_string(),
            got: dtype.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_every_dtype() {
        let vals = [0.0f32, -1.5, 3.25, 1e-3, -65504.0];
        for dt in DType::ALL {
            let h = HostTensor::from_f32(dt, &[5], &vals).unwrap();
            let b = host_bytes(&h.data);
            assert_eq!(b.len(), 5 * dt.size_bytes());
            assert_eq!(host_data(dt, &b), h.data, "{dt}");
        }
    }

    #[test]
    fn poison_word_is_nan_in_every_dtype() {
        let b = POISON_WORD.to_le_bytes();
        for dt in DType::ALL {
            let d = host_data(dt, &b);
            let h = HostTensor {
                shape: vec![4 / dt.size_bytes()],
                data: d,
            };
            assert!(h.to_f32().iter().all(|x| x.is_nan()), "{dt}");
        }
    }

    #[test]
    fn check_tensor_messages() {
        let e = check_tensor("q", &[1, 2, 3], DType::BF16, &[1, 2, 4], DType::BF16)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`q`") && e.contains("[1, 2, 3]") && e.contains("[1, 2, 4]"),
            "{e}"
        );
        let e = check_tensor("g", &[2], DType::BF16, &[2], DType::F32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bf16") && e.contains("f32"), "{e}");
    }
}
