//! What the HTTP side and the worker thread say to each other.
//!
//! The HTTP handlers never touch the model: they send a [`Command`] and
//! read [`Event`]s. Everything that decides what is computed stays on the
//! worker thread (the library's scheduler), so the HTTP layer cannot change
//! an output. Nor does the worker do the HTTP side's slow, output-neutral
//! work: a request's grammar comes to it compiled ([`Compiled`]).

#![forbid(unsafe_code)]

use super::api::GenRequest;
use super::error::ApiError;
use crate::constrain::Compiled;
use tokio::sync::{mpsc, oneshot};

/// A request accepted by the engine.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The engine's id for the request (for cancellation).
    pub id: u64,
    /// Prompt token ids (after the chat template and tokenization).
    pub prompt_ids: Vec<u32>,
    /// The seed every choice samples with.
    pub seed: u64,
}

/// One alternative token and its log-probability.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// Token id.
    pub id: u32,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Natural log of its probability.
    pub logprob: f32,
}

/// Why a choice ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// `max_tokens` or the context was reached.
    Length,
    /// An end-of-generation token or a stop string.
    Stop,
}

impl Finish {
    /// OpenAI's `finish_reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Length => "length",
            Finish::Stop => "stop",
        }
    }
}

/// What the engine reports about a request.
#[derive(Debug, Clone)]
pub enum Event {
    /// A token sampled for choice `choice`.
    Token {
        /// Choice index.
        choice: usize,
        /// Token id.
        id: u32,
        /// Its bytes (empty for a special token such as end-of-turn).
        bytes: Vec<u8>,
        /// Text that became final with this token (complete UTF-8, never
        /// part of a stop string; see `text::ChoiceText`).
        text: String,
        /// Its log-probability and the alternatives, if asked for.
        logprob: Option<(f32, Vec<Alternative>)>,
    },
    /// Choice `choice` ended.
    Done {
        /// Choice index.
        choice: usize,
        /// Why.
        finish: Finish,
        /// The rest of the text (a character split at the end).
        text: String,
        /// SHA-256 of every logits row sampled from (hex).
        digest: String,
        /// Final audit-chain digest (hex).
        audit_digest: String,
        /// Where its transcript is kept.
        transcript_id: String,
        /// The receipt's signature (hex), when the server signs.
        signature: Option<String>,
    },
    /// The engine failed on this request.
    Failed(ApiError),
}

/// A request to the worker thread.
pub enum Command {
    /// Run a request; events go to `events`, the acceptance (or why not) to `reply`.
    Submit {
        /// The request (boxed: it is most of the enum's size).
        req: Box<GenRequest>,
        /// Its constraint, compiled by the HTTP side (`super::compile`):
        /// the worker only attaches it, and records its spec.
        grammar: Option<Compiled>,
        /// Where its events go (dropping the receiver cancels it).
        events: mpsc::UnboundedSender<Event>,
        /// Accepted or rejected.
        reply: oneshot::Sender<Result<Accepted, ApiError>>,
    },
    /// Stop a request (a choice may already have ended; unknown ids are ignored).
    Cancel {
        /// The request.
        id: u64,
    },
    /// Tokenize text as `detllm tokenize` does.
    Tokenize {
        /// The text.
        text: String,
        /// Add BOS/EOS as the model asks and parse special tokens.
        special: bool,
        /// Token ids.
        reply: oneshot::Sender<Result<Vec<u32>, ApiError>>,
    },
    /// Token ids back to text.
    Detokenize {
        /// Token ids.
        tokens: Vec<u32>,
        /// The text (lossy UTF-8).
        reply: oneshot::Sender<Result<String, ApiError>>,
    },
    /// A finished request's audit transcript.
    Transcript {
        /// The transcript id.
        id: String,
        /// The transcript file's bytes (`transcript::to_text`), if kept.
        reply: oneshot::Sender<Option<String>>,
    },
}
