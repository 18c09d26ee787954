//! Typed errors. Each says what is wrong and what would be right.

/// Every error gla returns to a user.
#[derive(Debug, thiserror::Error)]
pub enum GlaError {
    /// A tensor has the wrong shape.
    #[error("`{what}` has shape {got:?}, expected {expected}")]
    Shape {
        what: &'static str,
        expected: String,
        got: Vec<usize>,
    },
    /// A tensor has the wrong dtype.
    #[error("`{what}` has dtype {got}, expected {expected}")]
    DType {
        what: &'static str,
        expected: String,
        got: String,
    },
    /// An argument is out of its domain (a wrong `cu_seqlens`, a missing gate tensor, ...).
    #[error("invalid `{what}`: {msg}")]
    InvalidArgument { what: &'static str, msg: String },
    /// The requested kernel variant does not exist (e.g. sub-chunk does not divide chunk).
    #[error("unsupported variant {variant}: {msg}")]
    Unsupported { variant: String, msg: String },
    /// No CUDA driver library (libcuda.so) could be loaded.
    #[error("no CUDA driver: {0}. A GPU with an NVIDIA driver (libcuda.so.1 on the library path) is needed for this call")]
    NoDriver(String),
    /// The driver loaded but found no usable device.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// NVRTC (libnvrtc.so.13) could not be loaded.
    #[error("NVRTC 13 not found: {0}. Install it (e.g. `bash .ci/install-nvrtc.sh`) and put its lib folder on LD_LIBRARY_PATH")]
    NoNvrtc(String),
    /// NVRTC rejected a generated kernel.
    #[error("NVRTC failed to compile `{kernel}` with options {options:?}:\n{log}")]
    Compile {
        kernel: String,
        options: Vec<String>,
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA error during {op}: {msg}")]
    Cuda { op: &'static str, msg: String },
    /// The tuning cache is missing, corrupt or stale.
    #[error("tuning cache {path}: {msg}")]
    Cache { path: String, msg: String },
}

impl GlaError {
    /// Shorthand for [`GlaError::InvalidArgument`].
    pub fn invalid(what: &'static str, msg: impl Into<String>) -> Self {
        GlaError::InvalidArgument {
            what,
            msg: msg.into(),
        }
    }
    /// Shorthand for [`GlaError::Shape`].
    pub fn shape(what: &'static str, expected: impl Into<String>, got: &[usize]) -> Self {
        GlaError::Shape {
            what,
            expected: expected.into(),
            got: got.to_vec(),
        }
    }
}

/// `Result` with [`GlaError`].
pub type Result<T, E = GlaError> = std::result::Result<T, E>;
