//! The crate's one error type.
//!
//! `Error` is `Copy`, carries data instead of strings, and every variant means
//! that the operation that returned it changed nothing. Each variant a caller
//! can cause names what was wrong and where (which entry, which limit, which
//! tensor or key); names read from a file travel inline as a [`Name`].

#![forbid(unsafe_code)]

use core::fmt;

/// A short name read from a file or given by the caller (a tensor, a
/// metadata key, an architecture), stored inline so that [`Error`] stays
/// `Copy`. Names longer than [`Name::CAP`] bytes keep their first bytes (cut
/// at a character boundary) and display with a trailing `…`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Name {
    bytes: [u8; Name::CAP],
    len: u8,
    truncated: bool,
}

impl Name {
    /// Bytes kept inline.
    pub const CAP: usize = 40;

    /// `s`, cut to at most [`Name::CAP`] bytes at a character boundary.
    pub const fn new(s: &str) -> Name {
        let src = s.as_bytes();
        let mut len = if src.len() < Name::CAP {
            src.len()
        } else {
            Name::CAP
        };
        // Back off to a character boundary (a UTF-8 continuation byte is 0b10xx_xxxx).
        while len < src.len() && len > 0 && (src[len] & 0xC0) == 0x80 {
            len -= 1;
        }
        let mut bytes = [0u8; Name::CAP];
        let mut i = 0;
        while i < len {
            bytes[i] = src[i];
            i += 1;
        }
        Name {
            bytes,
            len: len as u8,
            truncated: len < src.len(),
        }
    }

    /// The name as kept (possibly cut).
    pub fn as_str(&self) -> &str {
        // `new` copies whole characters of a `&str`, so this cannot fail.
        core::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }

    /// Whether the original name was longer than what is kept.
    pub const fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}

/// GGML's name for tensor type id `id` (for messages; `"unknown"` where
/// llama.cpp defines none).
fn type_name(id: u32) -> &'static str {
    match crate::gguf::ggml_type_name(id) {
        Some(n) => n,
        None => "unknown",
    }
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = core::result::Result<T, E>;

/// Everything that can go wrong in `detllm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The arena has fewer bytes left than a carve needs (alignment padding included).
    ArenaExhausted {
        /// Bytes the carve needed.
        requested: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// A length or count does not fit the arithmetic of this target.
    SizeOverflow,
    /// Two shapes that must agree do not.
    ShapeMismatch {
        /// The length that was expected.
        expected: usize,
        /// The length that was found.
        found: usize,
    },
    /// A tensor type the operation does not support.
    UnsupportedType {
        /// The GGML type id.
        ggml_type: u32,
    },
    /// The GGUF file is malformed.
    Gguf(crate::gguf::GgufError),
    /// The KV page pool cannot hold what a step needs; nothing was written.
    KvPagesExhausted {
        /// Pages the step needed.
        needed: usize,
        /// Free pages in the pool.
        free: usize,
    },
    /// No live sequence has this handle (never created, freed, or foreign).
    UnknownSequence {
        /// The handle's slot index.
        index: u32,
    },
    /// All sequence slots are in use.
    TooManySequences {
        /// The configured maximum.
        max: usize,
    },
    /// A sequence would grow past its maximum length.
    SequenceTooLong {
        /// Length it would reach.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A token id is not in the vocabulary.
    TokenOutOfRange {
        /// The token id.
        token: u32,
        /// Vocabulary size.
        vocab_size: usize,
    },
    /// A step carries more tokens or entries than the engine was planned for.
    BatchTooLarge {
        /// Tokens (or entries) in the step.
        requested: usize,
        /// The planned maximum.
        max: usize,
    },
    /// An output buffer is too small.
    BufferTooSmall {
        /// Elements needed.
        needed: usize,
        /// Elements available.
        available: usize,
    },
    /// A required tensor is missing from the model (or its bytes are not in
    /// the buffer given with the file).
    MissingTensor {
        /// The tensor's name.
        name: Name,
    },
    /// A required metadata key is missing or has the wrong type.
    MissingMetadata {
        /// The key.
        key: Name,
    },
    /// A step entry has no tokens (`Engine::step`).
    EmptyEntry {
        /// The entry's index in the step.
        index: usize,
    },
    /// A prompt has no tokens (`model::generate`).
    EmptyPrompt,
    /// A capacity given to `Engine::new` or a KV cache is zero or too large
    /// (`Limits`, `KvConfig`).
    InvalidLimit {
        /// The field, as named in the struct (`"max_seqs"`, `"page_size"`, …).
        name: &'static str,
        /// The value given.
        value: usize,
    },
    /// A model hyper-parameter is out of range or inconsistent with another
    /// (`Model::from_gguf`, the synthetic model writer).
    InvalidModelConfig {
        /// The hyper-parameter (`"embedding_length"`, `"head_count_kv"`, …).
        key: &'static str,
        /// Its value.
        value: usize,
    },
    /// The GGUF's `general.architecture` is not one this crate runs.
    UnsupportedArchitecture {
        /// The architecture named by the file.
        name: Name,
    },
    /// A model tensor has a type this crate cannot compute with.
    UnsupportedTensorType {
        /// The tensor.
        tensor: Name,
        /// Its GGML type id.
        ggml_type: u32,
    },
    /// A sampling parameter is out of range (`SamplingParams::validate`).
    InvalidSampling {
        /// The parameter (`"temperature"`, `"top_p"`, …).
        param: &'static str,
    },
    /// Attention heads that do not divide as grouped-query attention needs
    /// (`n_head` a non-zero multiple of `n_kv_head`, `head_dim` non-zero and
    /// within the kernels' maximum).
    InvalidHeads {
        /// Query heads.
        n_head: usize,
        /// KV heads.
        n_kv_head: usize,
        /// Elements per head.
        head_dim: usize,
    },
    /// RoPE dimensions the kernels cannot rotate: `n_rot` odd, larger than
    /// `head_dim`, or above the supported maximum.
    InvalidRope {
        /// Rotated elements per head.
        n_rot: usize,
        /// Elements per head.
        head_dim: usize,
    },
    /// KV rows of another element type than the operation reads.
    KvTypeMismatch {
        /// The type the operation needs.
        expected: crate::kv::KvType,
    },
    /// A layer index past the model's layer count.
    LayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// Layers in the model.
        n_layers: usize,
    },
    /// An operation needs fewer threads than the `Parallel` offers.
    TooManyThreads {
        /// Threads offered.
        threads: usize,
        /// The operation's maximum.
        max: usize,
    },
    /// Text is not valid UTF-8 where UTF-8 is required.
    InvalidUtf8,
    /// The tokenizer vocabulary is malformed or unsupported, or an input does not fit.
    Tokenizer(crate::tokenizer::TokenizerError),
    /// A KV position or length outside what the operation allows: writes and
    /// `set_len` need `len ≤ pos ≤ room` (write: `pos < room`), `truncate`
    /// needs `pos ≤ len`.
    KvOutOfRange {
        /// The position or length asked for.
        pos: usize,
        /// The sequence's committed length.
        len: usize,
        /// The sequence's reserved room.
        room: usize,
    },
    /// A layer index past the cache's layer count.
    KvLayerOutOfRange {
        /// The layer asked for.
        layer: usize,
        /// Layers in the cache.
        n_layers: usize,
    },
    /// The same sequence appears twice in one request.
    DuplicateSequence {
        /// The handle's slot index.
        index: u32,
    },
    /// The scheduler's queue has no room for the request's completions
    /// (`sched::Scheduler::submit`; a server answers 429 and retries later).
    QueueFull {
        /// Completions the queue holds at most (`SchedConfig::max_slots`).
        capacity: usize,
    },
    /// No waiting or running request has this id (`sched::Scheduler::cancel`):
    /// never submitted, finished, or already cancelled.
    UnknownRequest {
        /// The request id.
        id: u64,
    },
    /// A prompt plus its `max_tokens` does not fit a sequence or the KV pool
    /// (`sched::Scheduler::submit`).
    PromptTooLong {
        /// Prompt tokens plus `max_tokens`.
        len: usize,
        /// The longest sequence the scheduler can run.
        max: usize,
    },
}

impl From<crate::gguf::GgufError> for Error {
    fn from(e: crate::gguf::GgufError) -> Self {
        Error::Gguf(e)
    }
}

impl From<crate::tokenizer::TokenizerError> for Error {
    fn from(e: crate::tokenizer::TokenizerError) -> Self {
        Error::Tokenizer(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::ArenaExhausted {
                requested,
                available,
            } => write!(
                f,
                "arena exhausted: {requested} bytes requested, {available} available"
            ),
            Error::SizeOverflow => f.write_str("size overflow"),
            Error::ShapeMismatch { expected, found } => {
                write!(f, "shape mismatch: expected {expected}, found {found}")
            }
            Error::UnsupportedType { ggml_type } => write!(
                f,
                "unsupported tensor type {} ({ggml_type})",
                type_name(ggml_type)
            ),
            Error::Gguf(e) => write!(f, "malformed GGUF: {e}"),
            Error::KvPagesExhausted { needed, free } => {
                write!(f, "KV pages exhausted: {needed} needed, {free} free")
            }
            Error::UnknownSequence { index } => write!(f, "unknown sequence handle {index}"),
            Error::TooManySequences { max } => write!(f, "too many sequences (max {max})"),
            Error::SequenceTooLong { len, max } => {
                write!(f, "sequence too long: {len} > {max}")
            }
            Error::TokenOutOfRange { token, vocab_size } => {
                write!(f, "token id {token} out of range (vocab {vocab_size})")
            }
            Error::BatchTooLarge { requested, max } => {
                write!(f, "batch too large: {requested} > {max}")
            }
            Error::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "buffer too small: {needed} needed, {available} available"
                )
            }
            Error::MissingTensor { name } => write!(f, "required tensor {name} missing"),
            Error::MissingMetadata { key } => {
                write!(f, "required metadata {key} missing or mistyped")
            }
            Error::EmptyEntry { index } => write!(f, "step entry {index} has no tokens"),
            Error::EmptyPrompt => f.write_str("empty prompt"),
            Error::InvalidLimit { name, value } => {
                write!(f, "invalid limit {name} = {value}")
            }
            Error::InvalidModelConfig { key, value } => {
                write!(f, "invalid model hyper-parameter {key} = {value}")
            }
            Error::UnsupportedArchitecture { name } => {
                write!(f, "unsupported architecture \"{name}\"")
            }
            Error::UnsupportedTensorType { tensor, ggml_type } => write!(
                f,
                "tensor {tensor}: type {} ({ggml_type}) not supported",
                type_name(ggml_type)
            ),
            Error::InvalidSampling { param } => {
                write!(f, "sampling parameter {param} out of range")
            }
            Error::InvalidHeads {
                n_head,
                n_kv_head,
                head_dim,
            } => write!(
                f,
                "invalid attention heads: {n_head} query, {n_kv_head} KV, head_dim {head_dim}"
            ),
            Error::InvalidRope { n_rot, head_dim } => {
                write!(
                    f,
                    "invalid RoPE dimensions: n_rot {n_rot}, head_dim {head_dim}"
                )
            }
            Error::KvTypeMismatch { expected } => {
                write!(f, "KV rows are not of type {expected:?}")
            }
            Error::LayerOutOfRange { layer, n_layers } => {
                write!(f, "layer {layer} out of range ({n_layers} layers)")
            }
            Error::TooManyThreads { threads, max } => {
                write!(f, "too many threads: {threads} > {max}")
            }
            Error::InvalidUtf8 => f.write_str("invalid UTF-8"),
            Error::Tokenizer(e) => write!(f, "tokenizer: {e}"),
            Error::KvOutOfRange { pos, len, room } => {
                write!(f, "KV position {pos} out of range (len {len}, room {room})")
            }
            Error::KvLayerOutOfRange { layer, n_layers } => {
                write!(f, "KV layer {layer} out of range ({n_layers} layers)")
            }
            Error::DuplicateSequence { index } => {
                write!(f, "sequence {index} appears twice in one request")
            }
            Error::QueueFull { capacity } => {
                write!(f, "queue full ({capacity} completions)")
            }
            Error::UnknownRequest { id } => write!(f, "unknown request {id}"),
            Error::PromptTooLong { len, max } => {
                write!(f, "prompt plus max_tokens too long: {len} > {max}")
            }
        }
    }
}

impl core::error::Error for Error {}
