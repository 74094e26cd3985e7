//! The x86-64 builds of the fast kernels (feature `std`), hand-written in
//! AVX2 and AVX-512 VNNI intrinsics, as ggml keeps `arch/x86/` beside its
//! portable kernels:
//!
//! * [`blocked`] — the fused Q4_1 / Q5_0 / Q8_0 chunk kernels, and the
//!   instruction sets' builds of the blocked drivers that inline them;
//! * [`batch`] — the AVX2 batched Q4_1 / Q5_0 / Q8_0 kernel: sixteen weight
//!   rows, eight per pass in 32-bit lanes, against 2–32 input rows, each
//!   block's weights decoded once for all of them;
//! * [`kquant`] — the Q4_K / Q6_K row and tile kernels, and their AVX-512
//!   VNNI tile;
//! * [`kdecode`] — the Q4_K / Q5_K / Q6_K decode kernels: every weight row against
//!   one input row, the input's terms taken once, `i64` chunk sums (and,
//!   in `kdecode/vnni.rs`, their AVX-512 VNNI build for one input row).
//!
//! These are leaves: they import only the portable drivers, kernel types
//! and bounds of [`super`] and crate-level leaf modules (`quant::act`,
//! `quant::fixed`, `simd`, `F32`), never the other way round, and only
//! [`super::dispatch`] names them. Each hands out a build only where
//! [`crate::simd::level`] says the CPU runs it (its safety precondition);
//! which of the builds a matrix gets is [`super::dispatch`]'s choice. An
//! `aarch64/` or `wasm/` folder would sit beside this one.
//!
//! Contract: every kernel here computes the same integers as its portable
//! counterpart, so the cells are the same bits; the proptests of
//! `tests/kernels/matmul.rs` check that on every path this CPU runs (and
//! that the build asked for ran), `tests/kernels_guarded.rs` that the
//! kernels read only their inputs. With `crate::pool` and the expansion of
//! `crate::simd::multiversion!`, the files here are the only code of
//! the crate allowed `unsafe` (each carries its review); this file has
//! none.

pub(super) mod batch;
pub(super) mod blocked;
pub(super) mod kdecode;
pub(super) mod kquant;
