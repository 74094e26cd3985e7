//! Audit digests: a chain that commits to every step of a generation.
//!
//! `d_0 = SHA-256("detllm-audit" ‖ PROFILE ‖ params)` where `params` is the
//! sampling parameters' encoding ([`params_bytes`]: seed, then the bits of
//! temperature, top-k, top-p, min-p, repetition penalty and its window), so
//! the chain commits to how each token was chosen; and after each
//! sampling step `d_i = SHA-256(d_{i-1} ‖ logits_i ‖ token_i)` where
//! `logits_i` is the row the token was sampled from as little-endian `u32`
//! bit patterns and `token_i` is a little-endian `u32`. Re-running the
//! generation anywhere must reproduce every `d_i`; the first step whose
//! digest differs is where two runs diverged.

#![forbid(unsafe_code)]

use crate::sample::SamplingParams;
use crate::{F32, PROFILE};
use sha2::{Digest, Sha256};

/// The running digest of one sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestChain {
    state: [u8; 32],
    steps: u64,
}

impl DigestChain {
    /// The chain's start for a generation sampled with `params`.
    pub fn new(params: &SamplingParams) -> Self {
        let mut h = Sha256::new();
        h.update(b"detllm-audit");
        h.update(PROFILE.as_bytes());
        h.update(params_bytes(params));
        DigestChain {
            state: h.finalize().into(),
            steps: 0,
        }
    }

    /// Folds in one step: the logits row sampled from and the token chosen.
    pub fn step(&mut self, logits: &[F32], token: u32) -> [u8; 32] {
        self.state = Self::peek(&self.state, logits, token);
        self.steps += 1;
        self.state
    }

    /// The digest `step` would produce, without changing the chain.
    pub fn peek(prev: &[u8; 32], logits: &[F32], token: u32) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(prev);
        hash_logits(&mut h, logits);
        h.update(token.to_le_bytes());
        h.finalize().into()
    }

    /// The current digest.
    pub fn digest(&self) -> [u8; 32] {
        self.state
    }

    /// Steps folded in so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }
}

/// SHA-256 of a logits row's bits (little-endian), streamed without a buffer
/// of the row's size; `update` it row after row for a sequence digest.
pub fn hash_logits(h: &mut Sha256, logits: &[F32]) {
    let mut buf = [0u8; 256];
    for chunk in logits.chunks(64) {
        for (dst, x) in buf.chunks_exact_mut(4).zip(chunk) {
            dst.copy_from_slice(&x.to_bits().to_le_bytes());
        }
        h.update(&buf[..chunk.len() * 4]);
    }
}

/// The sampling parameters as `d_0` commits to them: `seed` (u64), the
/// bits of `temperature`, `top_k`, the bits of `top_p`, `min_p` and
/// `repeat_penalty` (u32 each), `penalty_last_n` (u64), all little-endian.
pub fn params_bytes(p: &SamplingParams) -> [u8; 36] {
    let mut out = [0u8; 36];
    out[..8].copy_from_slice(&p.seed.to_le_bytes());
    let words = [
        p.temperature.to_bits(),
        p.top_k,
        p.top_p.to_bits(),
        p.min_p.to_bits(),
        p.repeat_penalty.to_bits(),
    ];
    for (i, w) in words.iter().enumerate() {
        out[8 + 4 * i..12 + 4 * i].copy_from_slice(&w.to_le_bytes());
    }
    out[28..36].copy_from_slice(&(p.penalty_last_n as u64).to_le_bytes());
    out
}
