//! Token constraints: which tokens a completion may sample next.
//!
//! ## The contract
//!
//! A constraint (a JSON schema, a grammar, a tool-call format) is a caller's
//! [`Constraint`]: asked for completion `who` with the tokens it generated so
//! far, it fills a [`TokenMask`] (one bit per vocabulary entry) with the
//! tokens allowed next. The library does not parse grammars; it applies the
//! mask **before the sampling cut**: every token outside the mask gets the
//! logit −∞ ([`TokenMask::apply`]), and that masked row is what the sampler,
//! the logprobs (those of the constrained distribution) and the audit digest
//! see. A mask with no token ends the completion
//! ([`FinishReason::Constraint`](crate::sched::FinishReason::Constraint)):
//! never a hang, never a token the constraint refused.
//!
//! The mask must be a pure function of (the constraint, the tokens generated
//! so far): [`crate::sched`] may ask again for the same tokens (after a
//! failed step), and a completion's output equals its solo run only if its
//! masks do. Limits a constraint engine applies must count work (steps,
//! items), never time.
//!
//! The mask is `u32` words, bit `t % 32` of word `t / 32` for token `t`
//! (the layout of common constraint engines' masks, so they copy in with
//! [`TokenMask::words_mut`]); bits at or above the vocabulary size are
//! ignored.
//!
//! ## How it is verified
//!
//! The unit tests below check the bit layout, `apply` and the counts;
//! `tests/engine/constrain_props.rs` (proptest) runs random constraints
//! through the scheduler and checks that every sampled token is allowed and
//! every completion equals its solo constrained run.

#![forbid(unsafe_code)]

use crate::sched::RequestId;
use crate::{Error, F32, Result};

/// The tokens a completion may sample next: one bit per vocabulary entry,
/// over words the caller (or the scheduler's arena) provides.
#[derive(Debug)]
pub struct TokenMask<'m> {
    words: &'m mut [u32], // (words_for(vocab))
    vocab: usize,
}

impl<'m> TokenMask<'m> {
    /// Words a mask of `vocab` tokens takes.
    pub const fn words_for(vocab: usize) -> usize {
        vocab.div_ceil(32)
    }

    /// A mask of `vocab` tokens over `words` (contents kept; call
    /// [`TokenMask::clear`] or [`TokenMask::allow_all`] first).
    /// [`Error::BufferTooSmall`] if `words` is shorter than
    /// [`TokenMask::words_for`]`(vocab)`.
    pub fn new(words: &'m mut [u32], vocab: usize) -> Result<Self> {
        let need = Self::words_for(vocab);
        let available = words.len();
        let words = words.get_mut(..need).ok_or(Error::BufferTooSmall {
            needed: need,
            available,
        })?;
        Ok(TokenMask { words, vocab })
    }

    /// The vocabulary size.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Allows no token.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Allows every token.
    pub fn allow_all(&mut self) {
        self.words.fill(u32::MAX);
    }

    /// Allows `token` (ignored outside the vocabulary).
    pub fn allow(&mut self, token: u32) {
        if (token as usize) < self.vocab
            && let Some(w) = self.words.get_mut(token as usize / 32)
        {
            *w |= 1 << (token % 32);
        }
    }

    /// Forbids `token`.
    pub fn forbid(&mut self, token: u32) {
        if let Some(w) = self.words.get_mut(token as usize / 32) {
            *w &= !(1 << (token % 32));
        }
    }

    /// Whether `token` is allowed (false outside the vocabulary).
    pub fn allows(&self, token: u32) -> bool {
        (token as usize) < self.vocab
            && self
                .words
                .get(token as usize / 32)
                .is_some_and(|w| w & (1 << (token % 32)) != 0)
    }

    /// Tokens allowed.
    pub fn count(&self) -> usize {
        let full = self.vocab / 32;
        let mut n: usize = self.words[..full]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum();
        if let Some(last) = self.words.get(full) {
            let tail = (1u32 << (self.vocab % 32)).wrapping_sub(1);
            n += (last & tail).count_ones() as usize;
        }
        n
    }

    /// Whether no token is allowed.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The words, for a constraint engine to fill in place (bit `t % 32` of
    /// word `t / 32` is token `t`).
    pub fn words_mut(&mut self) -> &mut [u32] {
        self.words
    }

    /// The words.
    pub fn words(&self) -> &[u32] {
        self.words
    }

    /// `out[t] = logits[t]` for allowed tokens, −∞ for the others:
    /// the row a constrained completion samples from (`out` and `logits`
    /// of the vocabulary's length, else [`Error::BufferTooSmall`]).
    pub fn apply(&self, logits: &[F32], out: &mut [F32]) -> Result<()> {
        let (Some(src), Some(dst)) = (logits.get(..self.vocab), out.get_mut(..self.vocab)) else {
            return Err(Error::BufferTooSmall {
                needed: self.vocab,
                available: logits.len().min(out.len()),
            });
        };
        mask_row(self.words, src, dst)
    }
}

/// `out[t] = logits[t]` where bit `t` of `words` is set, else −∞, for `t`
/// below `logits.len()` ([`Error::BufferTooSmall`] if `words` or `out` is
/// short).
pub(crate) fn mask_row(words: &[u32], logits: &[F32], out: &mut [F32]) -> Result<()> {
    let n = logits.len();
    let short = Error::BufferTooSmall {
        needed: n,
        available: out.len().min(words.len().saturating_mul(32)),
    };
    let (Some(dst), Some(words)) = (out.get_mut(..n), words.get(..n.div_ceil(32))) else {
        return Err(short);
    };
    for ((d, s), &w) in dst.chunks_mut(32).zip(logits.chunks(32)).zip(words) {
        for (b, (d, s)) in d.iter_mut().zip(s).enumerate() {
            *d = if w & (1 << b) != 0 {
                *s
            } else {
                F32::NEG_INFINITY
            };
        }
    }
    Ok(())
}

/// One completion of one request: whom a mask is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Completion {
    /// The request.
    pub request: RequestId,
    /// Which of its `n` completions.
    pub index: u32,
}

/// A caller's token constraint (see the [module docs](self)).
pub trait Constraint {
    /// Fills `mask` (of the model's vocabulary; its contents on entry are
    /// unspecified) with the tokens `who` may sample after `generated` (its
    /// tokens so far, prompt excluded). An empty mask ends the completion.
    /// Must be a pure function of `who`'s constraint and `generated`.
    fn fill(&mut self, who: Completion, generated: &[u32], mask: &mut TokenMask<'_>);

    /// `who` sampled `token` (one the last `fill` for it allowed). A
    /// stateful engine advances here; the default does nothing.
    fn commit(&mut self, who: Completion, token: u32) {
        let _ = (who, token);
    }
}

/// No constraint: every token allowed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unconstrained;

impl Constraint for Unconstrained {
    fn fill(&mut self, _: Completion, _: &[u32], mask: &mut TokenMask<'_>) {
        mask.allow_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_count_and_apply() {
        let mut words = [0xFFFF_FFFFu32; 4];
        let mut m = TokenMask::new(&mut words, 70).expect("mask");
        assert_eq!(m.words().len(), 3);
        assert_eq!(m.count(), 70, "bits past the vocabulary are not counted");
        m.clear();
        assert!(m.is_empty());
        for t in [0u32, 31, 32, 69, 70, 1000] {
            m.allow(t);
        }
        assert_eq!(m.count(), 4);
        assert!(m.allows(31) && m.allows(32) && m.allows(69));
        assert!(!m.allows(70) && !m.allows(1) && !m.allows(u32::MAX));
        assert_eq!(m.words()[1], 1);
        m.forbid(31);
        assert!(!m.allows(31));
        let logits: [F32; 70] = core::array::from_fn(|i| F32::from_bits(i as u32 + 1));
        let mut out = [F32::ZERO; 70];
        m.apply(&logits, &mut out).expect("apply");
        for (t, v) in out.iter().enumerate() {
            let want = if m.allows(t as u32) {
                logits[t]
            } else {
                F32::NEG_INFINITY
            };
            assert_eq!(v.to_bits(), want.to_bits(), "token {t}");
        }
        assert!(m.apply(&logits[..69], &mut out).is_err());
        assert!(TokenMask::new(&mut [0u32; 2], 65).is_err());
    }
}
