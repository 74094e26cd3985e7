//! The block formats and kernels: dequantization and exact dot products against independent references, every matmul path (portable, AVX2, AVX-512) equal to the per-cell reference, attention and the element-wise kernels.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod attention_group;
mod matmul;
mod ops;
mod quant_dequant;
mod quant_exact;
mod simd128;
