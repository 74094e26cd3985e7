//! What the scheduler reports: a token sampled, a completion finished.
//!
//! Events go to a caller-provided [`Sink`] as they happen, in a fixed order
//! within a step: every token event of the step (rows in plan order, a
//! request's extra completions right after its first), then the finish
//! events. A completion's events are `Token` × `n_tokens`, then one
//! `Finished`.

#![forbid(unsafe_code)]

use super::logprob::TopLogprob;
use crate::F32;
use core::fmt;

/// Handle of a submitted request (ids are issued in submission order, from 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why a completion ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// It produced `max_tokens` tokens.
    Length,
    /// It produced one of the request's stop tokens (the last token reported).
    Stop,
    /// The request was cancelled.
    Cancelled,
    /// Its [`Constraint`](crate::constraint::Constraint) allowed no next
    /// token (no token was sampled for that step).
    Constraint,
}

/// One sampled token of one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenEvent<'e> {
    /// The request.
    pub request: RequestId,
    /// Which of its `n` completions (0-based).
    pub index: u32,
    /// Tokens this completion produced before this one.
    pub position: usize,
    /// The token.
    pub token: u32,
    /// The audit chain after this token (`audit::DigestChain` of the solo run).
    pub digest: [u8; 32],
    /// The logits row the token was sampled from (`vocab_size`).
    pub logits: &'e [F32],
    /// Its log-probability, when the request asked for logprobs
    /// (see [`super::logprobs`] for the distribution).
    pub logprob: Option<F32>,
    /// The most likely tokens and their log-probabilities, most likely first,
    /// ties to the lowest id (as many as the request asked for, ≤ 20).
    pub top_logprobs: &'e [TopLogprob],
}

/// The end of one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinishEvent {
    /// The request.
    pub request: RequestId,
    /// Which of its completions.
    pub index: u32,
    /// Why it ended.
    pub reason: FinishReason,
    /// Tokens it produced (the stop token included).
    pub n_tokens: usize,
    /// The audit chain's final digest (its start if no token was produced).
    pub digest: [u8; 32],
}

/// A scheduler event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'e> {
    /// A token was sampled.
    Token(TokenEvent<'e>),
    /// A completion ended; its pages are released.
    Finished(FinishEvent),
}

/// Where events go: a closure `FnMut(&Event)` or any type implementing it
/// (a std server forwards them to its HTTP streams).
pub trait Sink {
    /// Receives one event.
    fn event(&mut self, ev: &Event<'_>);
}

impl<F: FnMut(&Event<'_>)> Sink for F {
    fn event(&mut self, ev: &Event<'_>) {
        self(ev)
    }
}
