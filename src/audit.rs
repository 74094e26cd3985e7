//! Audit digests: a chain that commits to every step of a generation.
//!
//! `d_0 = SHA-256("detllm-audit" ‖ PROFILE ‖ seed_le)`, and after each
//! sampling step `d_i = SHA-256(d_{i-1} ‖ logits_i ‖ token_i)` where
//! `logits_i` is the row the token was sampled from as little-endian `u32`
//! bit patterns and `token_i` is a little-endian `u32`. Re-running the
//! generation anywhere must reproduce every `d_i`; the first step whose
//! digest differs is where two runs diverged.

use crate::{F32, PROFILE};
use sha2::{Digest, Sha256};

/// The running digest of one sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestChain {
    state: [u8; 32],
    steps: u64,
}

impl DigestChain {
    /// The chain's start for a generation seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let mut h = Sha256::new();
        h.update(b"detllm-audit");
        h.update(PROFILE.as_bytes());
        h.update(seed.to_le_bytes());
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
