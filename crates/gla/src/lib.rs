//! gla: facade crate.
extern crate self as gla;
pub use gla_core as core;
