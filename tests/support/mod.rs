//! Helpers shared by the integration tests. A test that needs any of them
//! declares `mod support;` and names what it uses (`support::model::path()`,
//! `support::quant::Rng`, …); there is no other helper module under `tests/`.
//!
//! * [`model`]: where the real model and the generated fixtures are, and
//!   what a test does when one is missing (skip with a notice, or fail when
//!   the run requires them: `scripts/test.sh`, CI);
//! * [`gguf`]: gguf-py fixtures and manifests, a GGUF byte builder;
//! * [`quant`]: independent references for the quant and kernel tests;
//! * [`math`]: sample inputs and the exhaustive driver of the `math_*` oracle tests;
//! * [`kv`]: the reference model and harness of the KV cache tests;
//! * [`sample_ref`]: the sampler before its top-k selection, the reference of `tests/engine/sample.rs`.
#![allow(dead_code)] // each test binary uses a different part

pub mod gguf;
pub mod kv;
pub mod math;
pub mod model;
pub mod quant;
pub mod sample_ref;
