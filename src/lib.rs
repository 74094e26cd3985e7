//! # detllm — deterministic LLaMA-family inference
//!
//! `detllm` runs LLaMA-family language models stored as GGUF files with
//! **software floating point** over a **caller-provided arena**, so every
//! output is a pure function of (model bytes, input tokens, sampling
//! parameters, seed): the same bits on every target, for every batch
//! composition, prefill chunking and thread count.
//!
//! * [`F32`] — IEEE-754 binary32 in a `u32`, every operation in integer code.
//! * [`Arena`] — all memory comes from one buffer the caller owns.
//! * [`Parallel`] — hosts may split independent output rows across threads;
//!   results never depend on it.
//!
//! The arithmetic profile is named by [`PROFILE`]; any change to numerics is a
//! new profile name. See `docs/ARITHMETIC.md`.
#![no_std]
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod arena;
pub mod audit;
pub mod error;
pub mod float;
pub mod gguf;
pub mod kernels;
pub mod kv;
pub mod math;
pub mod model;
pub mod parallel;
pub mod quant;
pub mod sample;
pub mod selftest;
pub mod tokenizer;

pub use arena::Arena;
pub use error::{Error, Result};
pub use float::F32;
pub use parallel::{Parallel, Serial};

/// Name of the arithmetic profile implemented by this crate version.
///
/// Golden digests are valid for one profile; a change to any numeric
/// result gets a new profile name.
pub const PROFILE: &str = "detllm-v1";
