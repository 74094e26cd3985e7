//! Speculation inside the scheduler: n-gram drafts for decoding
//! completions, verified in the step beside the other rows.
//!
//! ## The contract
//!
//! With [`SchedConfig::speculate`](super::SchedConfig::speculate) set, a
//! completion in plain decode may feed drafts after its last token; every
//! event (tokens, logprobs, digests, finish reasons) is the same as without
//! speculation. Only the number of steps a completion needs changes.
//!
//! ## How
//!
//! Before each step's plan, [`propose`] writes up to the completion's
//! current draft length (`Slot::draft`, a [`DraftLen`](crate::spec::DraftLen)
//! capped at `max_draft`: it grows while drafts are kept, shrinks after a
//! partial acceptance, and pauses drafting after single misses, updated
//! after each verify walk) after an eligible completion's history in its
//! token row (the [`NgramDraft`] lookup over prompt and text so far), and
//! the slot marks them as its own drafts (`Slot::forced` and
//! `Slot::drafted`). From there they are handled exactly as a resumed
//! completion's ids: the decode row becomes a verify entry (the last token
//! and the drafts, a logits row each), walked by `spec::accept` (each row
//! drawn by the step's ordinary sampling of that completion, a draft kept
//! while it equals its draw), and the rows past the last token drawn are cut
//! from the KV cache in the same step, before preemption or the prefix cache
//! can see the sequence.
//!
//! Drafts only use what plain scheduling leaves: every decoding completion
//! gets its row, prefill chunks come next, and drafts extend the decode rows
//! from the token budget and logits rows left over. When the step cannot get
//! its KV pages, every draft is dropped and the step retried before anything
//! is evicted or preempted.
//!
//! Not eligible (they decode plainly): a completion that has not drawn its
//! first token (a request's followers draw it from the same row, and the
//! prefix cache keeps the prompt as its prefill ends), one still checking a
//! client's resumed ids, and one with fewer than two tokens left to draw.
//!
//! ## How it is verified
//!
//! `tests/engine/sched_props.rs`: random workloads (preemption, prefix
//! hits, cancellations, `n > 1`, stop tokens, penalties, logprobs, resumed
//! ids) run with and without speculation; every completion equals its solo
//! run, and its events equal those of the scheduler without speculation;
//! `draft_length_adapts_to_kept_drafts`: no step drafts more than a
//! reference `DraftLen` fed the kept counts allows.

#![forbid(unsafe_code)]

use crate::spec::{DraftSource, NgramDraft};

/// Longest draft a scheduler may be configured with.
pub const MAX_DRAFT: usize = 64;

/// N-gram speculation in the scheduler (prompt lookup over each
/// completion's own history).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NgramSpec {
    /// Draft tokens per verify entry at most (`1..=`[`MAX_DRAFT`]); the
    /// step's leftover token budget and logits rows may give fewer.
    pub max_draft: usize,
}

/// Writes the drafts for a history of `len` tokens at the start of `row`
/// (a slot's token row) into `row[len..]`, at most `limit` of them; returns
/// how many. A history that does not fit `row` gets none.
pub(super) fn propose(row: &mut [u32], len: usize, limit: usize) -> usize {
    if len > row.len() {
        return 0;
    }
    let (history, after) = row.split_at_mut(len);
    let room = limit.min(after.len());
    let mut ngram = NgramDraft::DEFAULT;
    ngram
        .propose(history, &mut after[..room])
        .unwrap_or(0)
        .min(room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_follow_the_last_match_and_respect_the_limits() {
        // History 1 2 3 9 1 2: the suffix "1 2" occurred at 0, then 3 9.
        let mut row = [1, 2, 3, 9, 1, 2, 0, 0, 0, 0];
        assert_eq!(propose(&mut row, 6, 8), 4);
        assert_eq!(&row[6..], &[3, 9, 1, 2]);
        let mut row = [1, 2, 3, 9, 1, 2, 0, 0, 0, 0];
        assert_eq!(propose(&mut row, 6, 1), 1);
        assert_eq!(row[6..], [3, 0, 0, 0]);
        // No room after the history, or a history longer than the row.
        let mut row = [1, 2, 1, 2];
        assert_eq!(propose(&mut row, 4, 8), 0);
        assert_eq!(propose(&mut row, 5, 8), 0);
        // No match.
        let mut row = [1, 2, 3, 4, 0, 0];
        assert_eq!(propose(&mut row, 4, 2), 0);
    }
}
