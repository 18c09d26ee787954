//! codegen (issue 4)
