//! `detllm-web`: the audit verifier of `detllm verify`, built for
//! `wasm32-unknown-unknown` so a web page (`web/`, docs/BROWSER.md) can
//! re-execute a transcript with no server trusted.
//!
//! * [`job`] — the transcript's fields as the page passes them (numbers
//!   and bytes; the page parses the JSON);
//! * [`mod@verify`] — the re-execution: the model's SHA-256 first, then every
//!   step's token and digest, the first divergence reported;
//! * `wasm` (on wasm32 only) — the C-ABI exports the page calls, the one
//!   module with `unsafe` (raw pointers from the page; reviewed in its header
//!   and in docs/UNSAFE.md).
//!
//! The library is used unchanged; this crate has std (the wasm32 target's
//! allocator backs the arena, requested once with `try_reserve`, so a
//! browser that cannot give the memory is a typed error, not an abort).

#![deny(unsafe_code)]

pub mod job;
pub mod verify;

#[cfg(target_arch = "wasm32")]
mod wasm;

pub use job::{Job, JobError, Step};
pub use verify::{
    Divergence, Observer, Verdict, VerifyError, arena_bytes, sha256, verify, verify_hashed,
};
