//! The crate's one error type.
//!
//! `Error` is `Copy`, carries data instead of strings, and every variant means
//! that the operation that returned it changed nothing.

use core::fmt;

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
    /// A required tensor is missing from the model.
    MissingTensor,
    /// A required metadata key is missing or has the wrong type.
    MissingMetadata,
    /// A configuration value is out of range or inconsistent.
    InvalidConfig,
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
            Error::UnsupportedType { ggml_type } => {
                write!(f, "unsupported tensor type {ggml_type}")
            }
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
            Error::MissingTensor => f.write_str("required tensor missing"),
            Error::MissingMetadata => f.write_str("required metadata missing or mistyped"),
            Error::InvalidConfig => f.write_str("invalid configuration"),
            Error::InvalidUtf8 => f.write_str("invalid UTF-8"),
            Error::Tokenizer(e) => write!(f, "tokenizer: {e:?}"),
            Error::KvOutOfRange { pos, len, room } => {
                write!(f, "KV position {pos} out of range (len {len}, room {room})")
            }
            Error::KvLayerOutOfRange { layer, n_layers } => {
                write!(f, "KV layer {layer} out of range ({n_layers} layers)")
            }
            Error::DuplicateSequence { index } => {
                write!(f, "sequence {index} appears twice in one request")
            }
        }
    }
}

impl core::error::Error for Error {}
