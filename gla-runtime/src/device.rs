//! The GPU: driver probe, context and stream, device facts, and a cache of loaded cubin modules.

use crate::ffi;
use crate::nvrtc::{self, CompileOptions, Compiled, KernelResources};
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use gla_core::error::Result;
use gla_core::GlaError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Dynamic shared memory a kernel may use without opting in (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
pub const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;

/// The compute capability the sm_90a cubins run on (arch-specific `a` code runs on exactly 9.0).
pub const REQUIRED_CC: (i32, i32) = (9, 0);

/// Wrap a driver error with the operation that failed.
pub(crate) fn cuda_err(op: &'static str) -> impl FnOnce(DriverError) -> GlaError {
    move |e| GlaError::Cuda {
        op,
        msg: format!("{e:?}"),
    }
}

/// Facts about the device, read once when the [`Gpu`] is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    /// e.g. 13000 for a CUDA 13.0 driver (580).
    pub driver_version: i32,
    pub total_mem_bytes: usize,
    pub l2_bytes: u32,
    /// Largest dynamic + static shared memory one block may opt in to (227 KB on sm_90).
    pub max_smem_per_block_optin: u32,
}

/// Check that a device of compute capability `cc` can run sm_90a cubins.
pub fn check_compute_capability(name: &str, cc: (i32, i32)) -> Result<()> {
    if cc == REQUIRED_CC {
        Ok(())
    } else {
        Err(GlaError::NoDevice(format!(
            "{name} has compute capability {}.{}, but gla's kernels are sm_90a cubins, which run only on compute \
             capability {}.{} (H100/H200)",
            cc.0, cc.1, REQUIRED_CC.0, REQUIRED_CC.1
        )))
    }
}

/// A handle to one GPU: its primary context, the stream every gla call is ordered on (the default stream), and
/// a cache of loaded modules. Cheap to clone.
#[derive(Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: Arc<DeviceInfo>,
    modules: Arc<ModuleCache>,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// The number of CUDA devices the driver reports. Errors: [`GlaError::NoDriver`] without `libcuda.so`,
/// [`GlaError::NoDevice`] when the driver cannot be initialised.
pub fn device_count() -> Result<usize> {
    if !ffi::driver_present() {
        return Err(GlaError::NoDriver("libcuda could not be loaded".into()));
    }
    let count = CudaContext::device_count()
        .map_err(|e| GlaError::NoDevice(format!("cuInit/cuDeviceGetCount failed: {e:?}")))?;
    Ok(count.max(0) as usize)
}

impl Gpu {
    /// Open device `ordinal`. Errors: [`GlaError::NoDriver`] without `libcuda.so`, [`GlaError::NoDevice`] with no
    /// (or no such, or no compute capability 9.0) device. Never panics.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        if !ffi::driver_present() {
            let names = cudarc::get_lib_name_candidates("cuda");
            return Err(GlaError::NoDriver(format!(
                "libcuda could not be loaded (cudarc tried {} names: {}, ..., {})",
                names.len(),
                names[0],
                names[names.len() - 1]
            )));
        }
        let count = CudaContext::device_count()
            .map_err(|e| GlaError::NoDevice(format!("cuInit/cuDeviceGetCount failed: {e:?}")))?;
        if count <= 0 {
            return Err(GlaError::NoDevice(
                "the driver reports no CUDA devices".into(),
            ));
        }
        if ordinal >= count as usize {
            return Err(GlaError::NoDevice(format!(
                "device {ordinal} requested, but only {count} present"
            )));
        }
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| GlaError::NoDevice(format!("cannot open device {ordinal}: {e:?}")))?;
        let attr =
            |a: CUdevice_attribute| ctx.attribute(a).map_err(cuda_err("cuDeviceGetAttribute"));
        let name = ctx.name().map_err(cuda_err("cuDeviceGetName"))?;
        let compute_capability = ctx
            .compute_capability()
            .map_err(cuda_err("cuDeviceGetAttribute"))?;
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability,
            sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            driver_version: ffi::driver_version().map_err(cuda_err("cuDriverGetVersion"))?,
            total_mem_bytes: ctx.total_mem().map_err(cuda_err("cuDeviceTotalMem"))?,
            l2_bytes: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32,
            max_smem_per_block_optin: attr(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )? as u32,
        };
        check_compute_capability(&info.name, info.compute_capability)?;
        let stream = ctx.default_stream();
        Ok(Gpu {
            ctx,
            stream,
            info: Arc::new(info),
            modules: Arc::new(ModuleCache::default()),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The stream all of gla's copies and launches are ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Wait for all work on the stream; also reports errors recorded by asynchronous frees.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(cuda_err("cuStreamSynchronize"))?;
        self.ctx
            .check_err()
            .map_err(cuda_err("an earlier asynchronous call"))
    }

    /// Load a cubin image into this context (no cache).
    pub fn load_cubin(&self, cubin: &[u8]) -> Result<Arc<CudaModule>> {
        if !nvrtc::is_elf(cubin) {
            return Err(GlaError::invalid(
                "cubin",
                "not an ELF image (gla never loads PTX)",
            ));
        }
        self.ctx.load_module(Ptx::from_binary(cubin.to_vec())).map_err(|e| GlaError::Cuda {
            op: "cuModuleLoadData",
            msg: format!(
                "{e:?} (driver {}.{}; cubins from NVRTC 13.0 need a CUDA 13.0 driver, 580 or newer)",
                self.info.driver_version / 1000,
                self.info.driver_version % 1000 / 10
            ),
        })
    }

    /// Compile `source` (NVRTC, `opts`) and load it, through the module cache keyed by the hash of source and
    /// options: a source compiled once is never compiled or loaded again by this `Gpu` (or its clones).
    pub fn load_source(
        &self,
        kernel: &str,
        source: &str,
        opts: &CompileOptions,
    ) -> Result<Arc<LoadedModule>> {
        let key = source_key(source, &opts.build());
        if let Some(m) = self.modules.get(key) {
            return Ok(m);
        }
        // Compile outside the lock: compiles take 0.2–1 s and may run on several threads.
        let compiled = nvrtc::compile_with(source, kernel, opts)?;
        let module = self.load_cubin(&compiled.cubin)?;
        let Compiled {
            log,
            resources,
            compile_ms,
            cubin,
        } = compiled;
        let loaded = Arc::new(LoadedModule {
            key,
            module,
            log,
            resources,
            compile_ms,
            cubin_bytes: cubin.len(),
        });
        Ok(self.modules.insert(key, loaded))
    }

    /// Load a cubin built ahead of time (a tuning cache's) for `source`, through the module cache: no NVRTC. Keyed
    /// apart from compiles of the same source (whose options may differ).
    pub fn load_prebuilt(&self, source: &str, cubin: &[u8]) -> Result<Arc<LoadedModule>> {
        let key = fnv1a64(&[source.as_bytes(), b"prebuilt sm_90a cubin"]);
        if let Some(m) = self.modules.get(key) {
            return Ok(m);
        }
        let module = self.load_cubin(cubin)?;
        let loaded = Arc::new(LoadedModule {
            key,
            module,
            log: String::new(),
            resources: Vec::new(),
            compile_ms: 0.0,
            cubin_bytes: cubin.len(),
        });
        Ok(self.modules.insert(key, loaded))
    }

    /// Look up an entry function and allow it `smem_bytes` of dynamic shared memory (opting in above 48 KB).
    pub fn function(
        &self,
        module: &LoadedModule,
        name: &str,
        smem_bytes: u32,
    ) -> Result<CudaFunction> {
        let f = module
            .module
            .load_function(name)
            .map_err(|e| GlaError::Cuda {
                op: "cuModuleGetFunction",
                msg: format!("no entry function `{name}` in the module: {e:?}"),
            })?;
        let static_smem = module
            .resources
            .iter()
            .find(|r| r.name == name)
            .map_or(0, |r| r.static_smem_bytes);
        check_smem(
            name,
            smem_bytes,
            static_smem,
            self.info.max_smem_per_block_optin,
        )?;
        if smem_bytes > DEFAULT_DYNAMIC_SMEM_LIMIT {
            self.ctx
                .bind_to_thread()
                .map_err(cuda_err("cuCtxSetCurrent"))?;
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem_bytes as i32,
            )
            .map_err(cuda_err(
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
            ))?;
        }
        Ok(f)
    }

    /// Number of modules in the cache.
    pub fn cached_modules(&self) -> usize {
        self.modules.len()
    }
}

/// A kernel's resources as the driver reports them for a loaded function (registers, static shared memory, local
/// memory per thread as `stack_bytes`); spill sizes and wgmma serialisation are not available this way and read 0 /
/// None. The fallback when the NVRTC log has no ptxas report (a driver compute-cache hit).
pub fn function_resources(name: &str, f: &CudaFunction) -> Result<KernelResources> {
    let get = |r: std::result::Result<i32, DriverError>| {
        r.map(|v| v.max(0) as u32)
            .map_err(cuda_err("cuFuncGetAttribute"))
    };
    Ok(KernelResources {
        name: name.to_string(),
        registers: get(f.num_regs())?,
        spill_stores_bytes: 0,
        spill_loads_bytes: 0,
        static_smem_bytes: get(f.shared_size_bytes())?,
        stack_bytes: get(f.local_size_bytes())?,
        wgmma_serialized: None,
    })
}

/// Check a kernel's shared memory against the device's per-block opt-in limit.
pub fn check_smem(kernel: &str, dynamic: u32, static_smem: u32, limit: u32) -> Result<()> {
    if dynamic as u64 + static_smem as u64 > limit as u64 {
        return Err(GlaError::Unsupported {
            variant: kernel.to_string(),
            msg: format!(
                "needs {dynamic} B dynamic + {static_smem} B static shared memory, over the device's {limit} B per block"
            ),
        });
    }
    Ok(())
}

/// A compiled and loaded module with its compile report.
#[derive(Debug)]
pub struct LoadedModule {
    /// [`source_key`] of the source and options.
    pub key: u64,
    pub module: Arc<CudaModule>,
    pub log: String,
    pub resources: Vec<KernelResources>,
    pub compile_ms: f64,
    pub cubin_bytes: usize,
}

/// Loaded modules keyed by [`source_key`].
#[derive(Default)]
pub struct ModuleCache {
    map: Mutex<HashMap<u64, Arc<LoadedModule>>>,
}

impl ModuleCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<LoadedModule>>> {
        // A panic while holding the lock cannot leave the map inconsistent (single inserts), so recover it.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn get(&self, key: u64) -> Option<Arc<LoadedModule>> {
        self.lock().get(&key).cloned()
    }
    /// Insert unless another thread got there first; returns the cached entry.
    pub fn insert(&self, key: u64, m: Arc<LoadedModule>) -> Arc<LoadedModule> {
        self.lock().entry(key).or_insert(m).clone()
    }
    pub fn len(&self) -> usize {
        self.lock().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// 64-bit FNV-1a: a stable (cross-run, cross-platform) hash, so cache keys can be stored in files.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The module-cache key of `source` compiled with `options`.
pub fn source_key(source: &str, options: &[String]) -> u64 {
    let mut parts: Vec<&[u8]> = vec![source.as_bytes()];
    parts.extend(options.iter().map(|o| o.as_bytes()));
    fnv1a64(&parts)
}
