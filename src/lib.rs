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
//!
//! ## Unsafe code
//!
//! The crate denies `unsafe_code`; four places allow it, each with its
//! review in its header:
//! * [`simd`] — the expansion of its `multiversion!` macro (calls of the
//!   `#[target_feature]` builds of a kernel body after the CPU level was
//!   checked), invoked beside each kernel that has SIMD builds;
//! * `quant::fast::x86::blocked` — hand-written AVX2 / AVX-512 VNNI
//!   intrinsics of the Q4_1, Q5_0 and Q8_0 kernels (x86-64 with `std`);
//! * `quant::fast::x86::kquant` — likewise, the Q4_K and Q6_K kernels;
//! * `pool` — the `std` thread pool's region hand-off.
//!
//! `docs/UNSAFE.md` lists every `unsafe`, its invariant and the check that
//! verifies it.
//!
//! ## Example: load a GGUF model into an arena and generate
//!
//! The model here is the crate's seeded synthetic model (real GGUF bytes, so
//! the loader runs as it does for a downloaded file); the same code runs
//! SmolLM2-135M from its `.gguf` bytes with a larger arena.
//!
//! ```
//! use detllm::gguf::File;
//! use detllm::kv::{KvType, PagedCache};
//! use detllm::model::synth::{SynthSpec, synth_sizes, write_synth};
//! use detllm::model::{Engine, Entry, Limits, Model, generate};
//! use detllm::sample::{Sampler, SamplingParams};
//! use detllm::{Arena, Error, Serial};
//!
//! # fn main() -> Result<(), Error> {
//! // Model bytes (in a real program: a memory-mapped or embedded .gguf file).
//! let (scratch_len, out_len) = synth_sizes(&SynthSpec::TINY)?;
//! let (mut scratch, mut bytes) = (vec![0u8; scratch_len], vec![0u8; out_len]);
//! let n = write_synth(&SynthSpec::TINY, &mut scratch, &mut bytes)?;
//! let bytes = &bytes[..n];
//!
//! // All memory comes from one buffer the caller owns.
//! let mut buf = vec![0u8; 1 << 20];
//! let mut arena = Arena::new(&mut buf);
//! let file = File::parse(bytes)?;
//! let model = Model::from_gguf(&file, bytes, &mut arena)?;
//! let vocab = model.cfg.vocab_size;
//! let limits = Limits {
//!     max_seqs: 2,
//!     max_seq_len: 32,
//!     max_step_tokens: 8,
//!     max_logit_rows: 8,
//!     kv_type: KvType::F16,
//!     page_size: 4,
//!     n_pages: 16,
//! };
//! let mut engine = Engine::<PagedCache>::new(model, limits, &mut arena)?;
//!
//! // One step can mix sequences: a 3-token prefill and a 1-token decode.
//! let (a, b) = (engine.new_seq()?, engine.new_seq()?);
//! let logits = engine.step(&Serial, &[
//!     Entry { seq: a, tokens: &[1, 2, 3], all_logits: false },
//!     Entry { seq: b, tokens: &[7], all_logits: false },
//! ])?;
//! assert_eq!(logits.len(), 2 * vocab); // the last row of each entry
//!
//! // Bad input is a typed error and changes nothing.
//! assert!(engine.step(&Serial, &[Entry { seq: a, tokens: &[vocab as u32], all_logits: false }]).is_err());
//! assert_eq!(engine.seq_len(a)?, 3);
//!
//! // Sampled generation with an audit digest chain.
//! let mut sampler = Sampler::new(&mut arena, vocab)?;
//! let params = SamplingParams { seed: 42, ..SamplingParams::GREEDY };
//! let mut history = [0u32; 16];
//! let out = generate(&mut engine, &Serial, &mut sampler, b, &[8, 9], &params, 6,
//!                    &mut history, &|_| false, &mut |_, _, _| {})?;
//! assert_eq!(out.n_tokens, 6);
//! let _digest: [u8; 32] = out.chain.digest(); // the same bits on every target
//! # Ok(())
//! # }
//! ```
#![no_std]
// Allowed only in `simd` (the `multiversion!` expansion), `quant::fast::x86`
// and `pool`: see "Unsafe code" above.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod arena;
pub mod audit;
pub mod constraint;
pub mod error;
pub mod float;
pub mod gguf;
pub mod kernels;
pub mod kv;
pub mod math;
pub mod model;
pub mod parallel;
#[cfg(feature = "std")]
mod pool;
pub mod quant;
pub mod sample;
pub mod sched;
pub mod selftest;
pub mod simd;
pub mod spec;
#[cfg(test)]
mod testutil;
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
