//! runtime (issue 4)
