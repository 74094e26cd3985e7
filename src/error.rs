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
        }
    }
}

impl core::error::Error for Error {}
