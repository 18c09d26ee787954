//! The C calls Rust cannot check: NVRTC programs, `dlopen`, driver probes and raw memsets.
//!
//! Every `unsafe` block of this crate is in this module or in [`crate::launch`]. Each wrapper here is a safe
//! function whose soundness argument is written next to its `unsafe` block (`// SAFETY:`); the rest of the crate
//! calls only the safe wrappers.

use cudarc::driver::{sys as cu, CudaSlice, CudaStream, DevicePtrMut, DriverError};
use cudarc::nvrtc::{result as nvrtc, result::NvrtcError, sys as nvrtc_sys};
use std::ffi::{c_char, CStr, CString};
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------------------------
// Library probes
// ---------------------------------------------------------------------------------------------------------------

/// Whether cudarc finds an NVRTC library under one of its candidate names (see `nvrtc::library_names`).
pub(crate) fn nvrtc_present() -> bool {
    // SAFETY: `is_culib_present` only `dlopen`s candidate file names and drops the handles again. Loading a shared
    // library runs its initialisers; the libraries tried are NVIDIA's NVRTC, whose initialisers have no
    // preconditions on the caller.
    unsafe { nvrtc_sys::is_culib_present() }
}

/// Whether cudarc finds the CUDA driver library (`libcuda.so`, `libcuda.so.1`, ...).
pub(crate) fn driver_present() -> bool {
    // SAFETY: as for `nvrtc_present`, with the driver library.
    unsafe { cu::is_culib_present() }
}

/// `dlopen(path, RTLD_NOW | RTLD_GLOBAL)` and never close it. Once a library with soname `libnvrtc.so.13` is in
/// the process, a later `dlopen("libnvrtc.so.13")` by cudarc resolves to it (glibc matches loaded sonames), so
/// this lets NVRTC be found at a known path when it is not on `LD_LIBRARY_PATH`.
#[cfg(target_os = "linux")]
pub(crate) fn preload_library(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    extern "C" {
        fn dlopen(filename: *const c_char, flags: i32) -> *mut std::ffi::c_void;
        fn dlerror() -> *mut c_char;
    }
    const RTLD_NOW: i32 = 2;
    const RTLD_GLOBAL: i32 = 0x100;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("path {path:?} contains a NUL byte"))?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call. The handle is deliberately leaked: the
    // library stays loaded for the life of the process, as cudarc's own `OnceLock` handle does. `dlerror` returns
    // NULL or a NUL-terminated thread-local string, copied out before any other dl* call.
    unsafe {
        if dlopen(c.as_ptr(), RTLD_NOW | RTLD_GLOBAL).is_null() {
            let e = dlerror();
            let msg = if e.is_null() {
                "unknown dlopen error".to_string()
            } else {
                CStr::from_ptr(e).to_string_lossy().into_owned()
            };
            return Err(msg);
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn preload_library(path: &std::path::Path) -> Result<(), String> {
    Err(format!("preloading {path:?} is only implemented on Linux"))
}

/// `nvrtcVersion()`. Call only after [`nvrtc_present`] returned true (cudarc panics otherwise).
pub(crate) fn nvrtc_version() -> Result<(i32, i32), NvrtcError> {
    let (mut major, mut minor) = (0i32, 0i32);
    // SAFETY: both out-pointers point to live, writable `i32`s for the duration of the call.
    unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) }.result()?;
    Ok((major, minor))
}

/// `cuDriverGetVersion()` (e.g. 13000 for CUDA 13.0). Call only after [`driver_present`] returned true.
pub(crate) fn driver_version() -> Result<i32, DriverError> {
    let mut v = 0i32;
    // SAFETY: the out-pointer points to a live, writable `i32`; the call needs no initialised context.
    unsafe { cu::cuDriverGetVersion(&mut v) }.result()?;
    Ok(v)
}

// ---------------------------------------------------------------------------------------------------------------
// NVRTC program
// ---------------------------------------------------------------------------------------------------------------

/// An `nvrtcProgram` with its source; destroyed on drop. Not `Send` (NVRTC programs are used on one thread).
pub(crate) struct Program {
    prog: nvrtc_sys::nvrtcProgram,
    // NVRTC may keep pointers into these until the program is destroyed.
    _src: CString,
    _name: CString,
}

impl Program {
    /// `nvrtcCreateProgram(src, name)` with no headers. Errors on interior NUL bytes.
    pub(crate) fn new(src: &str, name: &str) -> Result<Self, String> {
        let src = CString::new(src).map_err(|_| "CUDA source contains a NUL byte".to_string())?;
        let name = CString::new(format!("{name}.cu"))
            .map_err(|_| "kernel name contains a NUL byte".to_string())?;
        let prog = nvrtc::create_program(&src, Some(&name))
            .map_err(|e| format!("nvrtcCreateProgram failed: {e:?}"))?;
        Ok(Program {
            prog,
            _src: src,
            _name: name,
        })
    }

    /// `nvrtcCompileProgram(options)`.
    pub(crate) fn compile(&self, options: &[String]) -> Result<(), NvrtcError> {
        // SAFETY: `self.prog` was created by `create_program` and is destroyed only in `Drop`.
        unsafe { nvrtc::compile_program(self.prog, options) }
    }

    /// The compile log (warnings, errors, and ptxas's report with `-Xptxas -v`); empty if NVRTC has none.
    pub(crate) fn log(&self) -> String {
        // SAFETY: as in `compile`. The returned buffer is NUL-terminated by NVRTC (its size includes the NUL).
        match unsafe { nvrtc::get_program_log(self.prog) } {
            Ok(buf) => {
                let bytes: Vec<u8> = buf
                    .iter()
                    .map(|&c| c as u8)
                    .take_while(|&b| b != 0)
                    .collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            Err(e) => format!("<nvrtcGetProgramLog failed: {e:?}>"),
        }
    }

    /// `nvrtcGetCUBINSize` + `nvrtcGetCUBIN`: the cubin of a program compiled for a real architecture (`sm_XX`).
    pub(crate) fn cubin(&self) -> Result<Vec<u8>, NvrtcError> {
        let mut size = 0usize;
        // SAFETY: as in `compile`; `size` is a live, writable usize.
        unsafe { nvrtc_sys::nvrtcGetCUBINSize(self.prog, &mut size) }.result()?;
        let mut buf = vec![0u8; size];
        if size > 0 {
            // SAFETY: `buf` has exactly the `size` bytes NVRTC reported and is not aliased during the call.
            unsafe { nvrtc_sys::nvrtcGetCUBIN(self.prog, buf.as_mut_ptr().cast::<c_char>()) }
                .result()?;
        }
        Ok(buf)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: `self.prog` came from `create_program` and is destroyed exactly once, here. An error cannot be
        // reported from `drop` and leaves nothing to clean up, so it is ignored (Drop never panics).
        let _ = unsafe { nvrtc::destroy_program(self.prog) };
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Device memory
// ---------------------------------------------------------------------------------------------------------------

/// Encode a 3-d TMA descriptor (`cuTensorMapEncodeTiled`) over the row-major `[dims[2]][dims[1]][dims[0]]` tensor
/// of 2-byte elements at device address `ptr`: boxes of `box_dims` elements, 128-byte swizzle, zero fill out of
/// bounds. `strides` are the byte strides of dims 1 and 2. The driver checks the constraints (16-byte aligned address
/// and strides, box ≤ 256 a dim, inner box ≤ 128 bytes) and returns an error for any it cannot meet.
pub(crate) fn encode_tensor_map_3d(
    ptr: u64,
    f16: bool,
    dims: [u64; 3],
    strides: [u64; 2],
    box_dims: [u32; 3],
) -> Result<[u64; 16], DriverError> {
    let mut map = cu::CUtensorMap { opaque: [0u64; 16] };
    let elem_strides = [1u32; 3];
    let ty = if f16 {
        cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    } else {
        cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    };
    // SAFETY: the call writes only the 128-byte `map` and reads the five arrays (3, 2, 3, 3 entries as the rank-3
    // signature requires), all live locals for its duration. `ptr` is recorded in the descriptor, not dereferenced:
    // the kernels that use the map read through it within `dims` (TMA bounds every box by the tensor's dims), and the
    // caller makes `ptr` the start of a live allocation of at least those dims.
    unsafe {
        cu::cuTensorMapEncodeTiled(
            &mut map,
            ty,
            3,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            elem_strides.as_ptr(),
            cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()?;
    Ok(map.opaque)
}

/// A device allocation of `bytes` bytes on `stream`, contents unspecified (no memset).
pub(crate) fn alloc_uninit(
    stream: &Arc<CudaStream>,
    bytes: usize,
) -> Result<CudaSlice<u8>, DriverError> {
    // SAFETY: cudarc marks `alloc` unsafe only because the memory is not initialised. Every bit pattern is a valid
    // `u8`, and device bytes are only ever copied (never referenced) by host code, so unspecified contents are no
    // memory-safety hazard; kernels that read them before writing would compute garbage, not UB on the host.
    unsafe { stream.alloc::<u8>(bytes) }
}

/// Set every byte of `buf` to `byte`, stream-ordered on `stream`.
pub(crate) fn memset_d8(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<u8>,
    byte: u8,
) -> Result<(), DriverError> {
    stream.context().bind_to_thread()?;
    let n = buf.num_bytes();
    let (ptr, _record) = buf.device_ptr_mut(stream);
    // SAFETY: `ptr` is the start of the live allocation `buf` of `n` bytes (held by `&mut`, so neither freed nor
    // aliased while the memset is enqueued); frees of `buf` are stream-ordered after this memset.
    unsafe { cu::cuMemsetD8Async(ptr, byte, n, stream.cu_stream()) }.result()
}

/// Set every 32-bit word of `buf` to `word` (`buf.len()` must be a multiple of 4), stream-ordered on `stream`.
pub(crate) fn memset_d32(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<u8>,
    word: u32,
) -> Result<(), DriverError> {
    let n = buf.num_bytes();
    #[allow(clippy::manual_is_multiple_of)]
    // is_multiple_of needs Rust 1.87; the workspace supports 1.85
    if n % 4 != 0 {
        return Err(DriverError(cu::CUresult::CUDA_ERROR_INVALID_VALUE));
    }
    stream.context().bind_to_thread()?;
    let (ptr, _record) = buf.device_ptr_mut(stream);
    // SAFETY: as in `memset_d8`; `n / 4` words fit in the allocation, whose start is 256-byte aligned (cuMemAlloc).
    unsafe { cu::cuMemsetD32Async(ptr, word, n / 4, stream.cu_stream()) }.result()
}
