//! proc macro (issue 3)
