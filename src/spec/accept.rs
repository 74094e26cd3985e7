//! The acceptance rule, in one place: rows that follow proposed tokens are
//! drawn in order, each exactly as plain decoding draws it; a proposed token
//! is kept only while it equals its row's draw, and the first mismatch (or
//! the end of the generation) ends the walk — the rows after it are never
//! drawn for, so the PRNG advances only for emitted tokens.
//!
//! Callers: [`generate_speculative`](super::generate_speculative) (the
//! proposals are drafts) and the scheduler's verify entries: resumed
//! completions
//! ([`Scheduler::submit_resumed`](crate::sched::Scheduler::submit_resumed):
//! the proposals are the ids a client already holds) and speculation
//! ([`SchedConfig::speculate`](crate::sched::SchedConfig::speculate): a
//! decoding completion's n-gram drafts). Verified through all:
//! `tests/engine/spec_props.rs` and `tests/engine/sched_props.rs`.

#![forbid(unsafe_code)]

use crate::Result;

/// What one row's draw gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drew {
    /// A token; the generation goes on.
    Token(u32),
    /// A token after which the generation ends (end of generation, token limit).
    Last(u32),
    /// No token: the generation ended before it (an empty constraint mask).
    Ended,
}

/// The rows of one verify step, as seen by [`accept`].
pub(crate) trait Rows {
    /// The proposed token that row `i` must reproduce to be kept; `None` for
    /// the row after the last proposal (its draw is one more token).
    fn proposed(&self, i: usize) -> Option<u32>;
    /// Draws row `i`'s token as plain decoding would at this position, and
    /// records it (history, PRNG, audit chain, callbacks).
    fn draw(&mut self, i: usize) -> Result<Drew>;
}

/// How a walk over the rows ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Walk {
    /// Tokens drawn (the rows of the step still needed: every row after the
    /// last one emitted must be cut from the cache).
    pub emitted: usize,
    /// Proposed tokens kept (equal to their row's draw).
    pub kept: usize,
}

/// Walks `n` rows of `rows` (see the module docs). Errors: those of
/// [`Rows::draw`], after the draws before it were recorded.
pub(crate) fn accept<R: Rows + ?Sized>(rows: &mut R, n: usize) -> Result<Walk> {
    let mut walk = Walk::default();
    for i in 0..n {
        let proposed = rows.proposed(i);
        let tok = match rows.draw(i)? {
            Drew::Token(t) => t,
            Drew::Last(_) => {
                walk.emitted += 1;
                break;
            }
            Drew::Ended => break,
        };
        walk.emitted += 1;
        if proposed != Some(tok) {
            break;
        }
        walk.kept += 1;
    }
    Ok(walk)
}
