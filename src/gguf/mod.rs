//! GGUF reader (zero-copy, validated).

/// What is wrong with a GGUF file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GgufError {
    /// The file ends before a field: `needed` bytes at `offset`.
    Truncated {
        /// Where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
    },
}
