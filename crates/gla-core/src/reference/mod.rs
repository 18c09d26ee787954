//! CPU reference (issue 2).
