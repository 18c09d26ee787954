//! GPU timing with CUDA events, an L2 flush, and the device-to-device copy bandwidth (the memory floor benchmarks
//! compare against).
//!
//! Events are created WITH timing (`CU_EVENT_DEFAULT`): cudarc's `new_event(None)` disables timing and
//! `elapsed_ms` then fails with `CUDA_ERROR_INVALID_HANDLE` (see gpu.md).

use crate::device::{cuda_err, Gpu};
use crate::ffi;
use crate::launch::alloc_workspace;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice};
use gla_core::error::Result;

/// An event that records timestamps.
pub fn timing_event(gpu: &Gpu) -> Result<CudaEvent> {
    gpu.context()
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(cuda_err("cuEventCreate"))
}

/// GPU time of the work `f` enqueues on the stream, in milliseconds (waits for it).
pub fn time_ms(gpu: &Gpu, f: impl FnOnce() -> Result<()>) -> Result<f32> {
    let (start, end) = (timing_event(gpu)?, timing_event(gpu)?);
    start
        .record(gpu.stream())
        .map_err(cuda_err("cuEventRecord"))?;
    f()?;
    end.record(gpu.stream())
        .map_err(cuda_err("cuEventRecord"))?;
    start
        .elapsed_ms(&end)
        .map_err(cuda_err("cuEventElapsedTime"))
}

/// Evicts the L2 cache (60 MB on the H200) by writing a 256 MB scratch buffer.
pub struct L2Flush {
    buf: CudaSlice<u8>,
    gpu: Gpu,
    byte: u8,
}

/// Size of the flush buffer: over 4× the H200's L2.
pub const L2_FLUSH_BYTES: usize = 256 << 20;

impl L2Flush {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        Ok(L2Flush {
            buf: alloc_workspace(gpu, L2_FLUSH_BYTES)?,
            gpu: gpu.clone(),
            byte: 0,
        })
    }
    /// Enqueue the flush (a memset with a changing value) on the stream.
    pub fn flush(&mut self) -> Result<()> {
        self.byte = self.byte.wrapping_add(1);
        ffi::memset_d8(self.gpu.stream(), &mut self.buf, self.byte).map_err(cuda_err("cuMemsetD8"))
    }
}

/// Statistics of repeated timings, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchStats {
    pub samples_ms: Vec<f32>,
    pub median_ms: f32,
    pub min_ms: f32,
    pub mean_ms: f32,
}

impl BenchStats {
    pub fn from_samples(mut samples_ms: Vec<f32>) -> Self {
        assert!(!samples_ms.is_empty(), "no samples");
        let mean_ms = samples_ms.iter().sum::<f32>() / samples_ms.len() as f32;
        let mut s = samples_ms.clone();
        s.sort_by(f32::total_cmp);
        let n = s.len();
        let median_ms = if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        };
        samples_ms.shrink_to_fit();
        BenchStats {
            min_ms: s[0],
            median_ms,
            mean_ms,
            samples_ms,
        }
    }
}

/// Run `f` `warmup` times, then time `reps` runs one by one (each between its own pair of events, optionally
/// after an L2 flush that is not timed). Synchronises once at the end, not per run.
pub fn bench(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    mut flush: Option<&mut L2Flush>,
    mut f: impl FnMut() -> Result<()>,
) -> Result<BenchStats> {
    for _ in 0..warmup {
        f()?;
    }
    let reps = reps.max(1);
    let mut events = Vec::with_capacity(reps);
    for _ in 0..reps {
        if let Some(fl) = flush.as_deref_mut() {
            fl.flush()?;
        }
        let (a, b) = (timing_event(gpu)?, timing_event(gpu)?);
        a.record(gpu.stream()).map_err(cuda_err("cuEventRecord"))?;
        f()?;
        b.record(gpu.stream()).map_err(cuda_err("cuEventRecord"))?;
        events.push((a, b));
    }
    let samples = events
        .iter()
        .map(|(a, b)| a.elapsed_ms(b).map_err(cuda_err("cuEventElapsedTime")))
        .collect::<Result<Vec<_>>>()?;
    Ok(BenchStats::from_samples(samples))
}

/// Result of [`copy_bandwidth`].
#[derive(Clone, Debug, PartialEq)]
pub struct Bandwidth {
    /// Bytes copied per run (each is read once and written once).
    pub bytes: usize,
    pub stats: BenchStats,
    /// `2 · bytes / median time`, in TB/s (10¹² B/s): the read+write bandwidth, as fla and gpu.md count it.
    pub tb_per_s: f64,
}

/// Device-to-device copy bandwidth (`cuMemcpyDtoDAsync` of `bytes`, 1 GiB for the benchmark floor), counting
/// bytes read plus bytes written.
pub fn copy_bandwidth(gpu: &Gpu, bytes: usize, reps: usize) -> Result<Bandwidth> {
    let mut src = alloc_workspace(gpu, bytes)?;
    ffi::memset_d8(gpu.stream(), &mut src, 0x3c).map_err(cuda_err("cuMemsetD8"))?;
    let mut dst = alloc_workspace(gpu, bytes)?;
    let stream = gpu.stream().clone();
    let stats = bench(gpu, 2, reps, None, || {
        stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(cuda_err("cuMemcpyDtoD"))
    })?;
    let tb_per_s = 2.0 * bytes as f64 / (stats.median_ms as f64 * 1e-3) / 1e12;
    Ok(Bandwidth {
        bytes,
        stats,
        tb_per_s,
    })
}

/// The benchmark floor's default copy size.
pub const COPY_BYTES: usize = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let s = BenchStats::from_samples(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.min_ms, s.median_ms, s.mean_ms), (1.0, 2.5, 4.0));
        let s = BenchStats::from_samples(vec![5.0, 1.0, 2.0]);
        assert_eq!(s.median_ms, 2.0);
    }
}
