//! [`NgramDraft`]: prompt-lookup drafting. The last `n` tokens of the
//! history are looked up earlier in the history (prompt and text so far),
//! longest `n` first, most recent occurrence first; the tokens that followed
//! that occurrence are the proposal. No model, no memory beyond the history.
//!
//! Verified by `tests/engine/spec_props.rs` (its proposals on random
//! histories against a direct search) and by the exactness property.

#![forbid(unsafe_code)]

use super::DraftSource;
use crate::Result;

/// Drafts by matching the history's suffix against the history itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NgramDraft {
    /// Shortest suffix that may match (at least 1).
    pub min_n: usize,
    /// Longest suffix tried first.
    pub max_n: usize,
}

impl NgramDraft {
    /// Suffixes of 2 to 4 tokens, longest first (a one-token match is too
    /// often a coincidence to pay for its verify row).
    pub const DEFAULT: NgramDraft = NgramDraft { min_n: 2, max_n: 4 };

    /// Where the most recent earlier occurrence of the last `n` tokens of
    /// `history` ends (the index of the token after it), if any.
    fn match_end(history: &[u32], n: usize) -> Option<usize> {
        let len = history.len();
        if n == 0 || n >= len {
            return None;
        }
        let suffix = &history[len - n..];
        // Occurrences start at i < len - n, so something follows them.
        (0..len - n)
            .rev()
            .find(|&i| &history[i..i + n] == suffix)
            .map(|i| i + n)
    }
}

impl DraftSource for NgramDraft {
    fn propose(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        for n in (self.min_n.max(1)..=self.max_n).rev() {
            if let Some(end) = Self::match_end(history, n) {
                let k = (history.len() - end).min(out.len());
                out[..k].copy_from_slice(&history[end..end + k]);
                return Ok(k);
            }
        }
        Ok(0)
    }
}
