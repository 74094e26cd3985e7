//! Speculative decoding that changes no bit: draft tokens are verified in
//! one engine step, and the output equals plain decoding exactly.
//!
//! ## The contract
//!
//! [`generate_speculative`] produces the same tokens, the same audit digest
//! after every token, from the same logits rows (so the same logprobs) as
//! [`model::generate`] with the same arguments — for every draft source,
//! however good or adversarial its proposals, and every draft length. Only
//! the number of engine steps changes.
//!
//! ## Why it holds
//!
//! 1. **Rows.** A verify step feeds the sequence's last token followed by
//!    `k` draft tokens as one entry whose every row yields logits. By chunking
//!    invariance, row `i` equals the row a single-token step would give after
//!    the history plus the first `i` drafts. While the drafts kept so far equal
//!    the tokens plain decoding chose, that history *is* plain decoding's, so
//!    the row is plain decoding's row for that position.
//! 2. **Choice.** Each row's token is drawn by the same [`Sampler`] with the
//!    same parameters and the same penalty window (the history so far, the
//!    accepted drafts being exactly the tokens drawn). A draft is kept only
//!    while it equals that draw; the first mismatch is replaced by the drawn
//!    token, the rest are dropped and never drawn for. When every draft is
//!    kept, the last row's draw is one more token for free.
//! 3. **PRNG.** [`SplitMix64`] advances once per non-greedy draw, and a draw
//!    happens only for a token that is emitted: rows past the first mismatch
//!    are not sampled at all. So the generator's state at position `p` is its
//!    state after the draws of positions `< p`, exactly as in plain decoding,
//!    whatever number of drafts was tried. (`tests/engine/spec_props.rs`
//!    plants a per-draft advance and sees the property fail.)
//! 4. **KV.** Rejected drafts' rows are cut with [`Engine::truncate`], so the
//!    cache again holds exactly the history minus its last token, as in plain
//!    decoding; nothing of a rejected draft survives (the paged cache's
//!    truncate drops the page references; the next write overwrites the rows).
//! 5. **Stops.** End-of-generation and `max_tokens` are checked after every
//!    emitted token, exactly where plain decoding checks them, and drafts are
//!    never longer than the tokens still allowed.
//!
//! ## Draft sources
//!
//! A [`DraftSource`] proposes continuation tokens of the history.
//! [`NgramDraft`] looks the history's last tokens up in the history itself
//! (prompt lookup: strong when the output copies from the prompt, as code
//! editing does); a std caller can wrap a second, smaller model (see the
//! `detllm` CLI's `--draft-model`). [`DraftLen`] adapts how many tokens are
//! asked for to the recent acceptance.
//!
//! ## How it is verified
//!
//! `tests/engine/spec_props.rs` (proptest): random synthetic models, prompts,
//! seeds, temperatures, penalties, top-k/top-p/min-p, end-of-generation
//! sets, `max_tokens`, draft lengths, step limits and draft sources (n-gram,
//! random tokens including out-of-vocabulary ones, drafts forced to be
//! wrong, the true continuation): tokens, per-step digests, rows and the
//! final KV length equal `model::generate`'s, and a plain step after both
//! gives the same logits (the cache holds the same rows).
//!
//! [`model::generate`]: crate::model::generate
//! [`Sampler`]: crate::sample::Sampler
//! [`SplitMix64`]: crate::sample::SplitMix64
//! [`Engine::truncate`]: crate::model::Engine::truncate

#![forbid(unsafe_code)]

pub(crate) mod accept;
mod adapt;
mod ngram;
mod verify;

pub use adapt::DraftLen;
pub use ngram::NgramDraft;
pub use verify::{
    Ask, Conversation, OnStep, SpecStats, continue_speculative, generate_speculative,
};

use crate::Result;

/// Proposes tokens that may continue a history.
pub trait DraftSource {
    /// Writes up to `out.len()` proposed next tokens of `history` into
    /// `out` and returns how many. Any proposal is safe: a wrong one only
    /// costs a verify row (tokens outside the vocabulary end the proposal).
    fn propose(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize>;
}
