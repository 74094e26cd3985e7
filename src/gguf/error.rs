//! [`GgufError`]: what is wrong with a GGUF file, and where.
//!
//! Every variant carries offsets (bytes from the start of the file) or
//! indices (the n-th key/value pair or tensor info, from 0), never strings, so
//! the type is `Copy` and usable without an allocator. `Display` prints one
//! line naming the problem and its place.

#![forbid(unsafe_code)]

use core::fmt;

use super::value::ValueType;

/// A bound the reader enforces to keep parse time and stack use bounded.
///
/// The limits are listed in [`super::limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Number of key/value pairs ([`super::limits::MAX_KV`]).
    KvCount,
    /// Number of tensors ([`super::limits::MAX_TENSORS`]).
    TensorCount,
    /// Length of one metadata key ([`super::limits::MAX_KEY_LEN`]).
    KeyLength,
    /// Offset of a key/value pair: the metadata section must lie in the first
    /// 4 GiB of the file ([`super::limits::MAX_KV_SECTION`]).
    KvSection,
}

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
    /// The file does not start with `GGUF`.
    BadMagic {
        /// The first four bytes (fewer bytes are [`GgufError::Truncated`]).
        found: [u8; 4],
    },
    /// The version is not 2 or 3.
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// The version field reads as 2 or 3 only after a byte swap: a big-endian
    /// GGUF, which this reader does not support.
    ByteSwapped {
        /// The version field as read (little-endian).
        version: u32,
    },
    /// A count field (`n_tensors`, `n_kv`) is negative as an `i64`.
    NegativeCount {
        /// Where the count is.
        offset: u64,
    },
    /// A count field claims more entries than the rest of the file could hold
    /// (each entry has a minimum size).
    CountExceedsData {
        /// Where the count is.
        offset: u64,
        /// The count.
        count: u64,
        /// Bytes left after the count field.
        remaining: u64,
    },
    /// A count or length is beyond one of the reader's bounds.
    LimitExceeded {
        /// Which bound.
        limit: Limit,
        /// Where the offending field is.
        offset: u64,
        /// The value found.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// A string's length runs past the end of the file.
    StringTooLong {
        /// Where the length field is.
        offset: u64,
        /// The length.
        len: u64,
        /// Bytes left after the length field.
        remaining: u64,
    },
    /// An array's element count needs more bytes than the rest of the file.
    ArrayTooLong {
        /// Where the array header (element type) is.
        offset: u64,
        /// The element count.
        len: u64,
        /// Bytes left after the array header.
        remaining: u64,
    },
    /// A metadata value type id outside 0..=12.
    InvalidValueType {
        /// Where the type id is.
        offset: u64,
        /// The id.
        type_id: u32,
    },
    /// An array whose elements are arrays (llama.cpp rejects them).
    NestedArray {
        /// Where the element type is.
        offset: u64,
    },
    /// A key/value pair with an empty key.
    EmptyKey {
        /// Index of the pair.
        index: u32,
    },
    /// A key that is not valid UTF-8 (keys are looked up by `&str`).
    InvalidUtf8Key {
        /// Index of the pair.
        index: u32,
    },
    /// A key that appears twice.
    DuplicateKey {
        /// Index of the second occurrence.
        index: u32,
        /// Index of the first occurrence.
        first: u32,
    },
    /// `general.alignment` is not of type UINT32.
    AlignmentType {
        /// Index of the pair.
        index: u32,
        /// Its value type.
        found: ValueType,
    },
    /// `general.alignment` is zero or not a power of two.
    BadAlignment {
        /// The alignment.
        alignment: u32,
    },
    /// A tensor name of 64 bytes or more (`GGML_MAX_NAME` is 64 with the NUL).
    TensorNameTooLong {
        /// Tensor index.
        index: u32,
        /// The name length.
        len: u64,
    },
    /// A tensor name that is not valid UTF-8 (tensors are looked up by `&str`).
    InvalidUtf8TensorName {
        /// Tensor index.
        index: u32,
    },
    /// A tensor name that appears twice.
    DuplicateTensorName {
        /// Index of the second occurrence.
        index: u32,
        /// Index of the first occurrence.
        first: u32,
    },
    /// More than 4 dimensions.
    TooManyDims {
        /// Tensor index.
        index: u32,
        /// `n_dims` as read.
        n_dims: u32,
    },
    /// A dimension that is negative as an `i64`.
    NegativeDim {
        /// Tensor index.
        index: u32,
        /// Which dimension (0 = `ne[0]`).
        dim: u32,
    },
    /// The element count overflows `i64`.
    ElementCountOverflow {
        /// Tensor index.
        index: u32,
    },
    /// The byte size (or the running data offset) overflows.
    ByteSizeOverflow {
        /// Tensor index.
        index: u32,
    },
    /// A tensor type id llama.cpp does not define (or has removed).
    UnknownTensorType {
        /// Tensor index.
        index: u32,
        /// The type id.
        type_id: u32,
    },
    /// A tensor type llama.cpp defines but this crate does not implement.
    UnsupportedTensorType {
        /// Tensor index.
        index: u32,
        /// The type id.
        type_id: u32,
    },
    /// `ne[0]` is not a multiple of the type's block size.
    RowNotBlockMultiple {
        /// Tensor index.
        index: u32,
        /// `ne[0]`.
        ne0: u64,
        /// The block size.
        block_size: u32,
    },
    /// A tensor offset that is not a multiple of the alignment.
    MisalignedTensor {
        /// Tensor index.
        index: u32,
        /// Its offset (relative to the data section).
        offset: u64,
        /// The alignment.
        alignment: u32,
    },
    /// A tensor that starts before the end of the previous one (misordered or
    /// overlapping); tensors must be packed in order.
    TensorOverlap {
        /// Tensor index.
        index: u32,
        /// Its offset (relative to the data section).
        offset: u64,
        /// The offset packing requires.
        expected: u64,
    },
    /// A tensor that starts after a gap; tensors must be packed in order.
    TensorGap {
        /// Tensor index.
        index: u32,
        /// Its offset (relative to the data section).
        offset: u64,
        /// The offset packing requires.
        expected: u64,
    },
    /// A tensor's data runs past the end of the file.
    DataOutOfBounds {
        /// Tensor index.
        index: u32,
        /// Absolute end of its data.
        end: u64,
        /// File length.
        file_len: u64,
    },
    /// A value has another type than the accessor needs.
    WrongType {
        /// Where the value's type id is (for an array element: the array's).
        offset: u64,
        /// The type the accessor needs.
        expected: ValueType,
        /// The type found.
        found: ValueType,
    },
    /// An integer value does not fit the accessor's type.
    ValueOutOfRange {
        /// Where the value's type id is.
        offset: u64,
    },
    /// A string value that is not valid UTF-8 where the accessor needs UTF-8.
    InvalidUtf8 {
        /// Where the string's bytes start.
        offset: u64,
    },
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::KvCount => "key/value count",
            Limit::TensorCount => "tensor count",
            Limit::KeyLength => "key length",
            Limit::KvSection => "metadata section offset",
        })
    }
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        // One helper per part of the file the error is about.
        match *self {
            E::Truncated { .. }
            | E::BadMagic { .. }
            | E::UnsupportedVersion { .. }
            | E::ByteSwapped { .. }
            | E::NegativeCount { .. }
            | E::CountExceedsData { .. }
            | E::LimitExceeded { .. } => self.fmt_header(f),
            E::StringTooLong { .. }
            | E::ArrayTooLong { .. }
            | E::InvalidValueType { .. }
            | E::NestedArray { .. }
            | E::EmptyKey { .. }
            | E::InvalidUtf8Key { .. }
            | E::DuplicateKey { .. }
            | E::AlignmentType { .. }
            | E::BadAlignment { .. } => self.fmt_metadata(f),
            E::TensorNameTooLong { .. }
            | E::InvalidUtf8TensorName { .. }
            | E::DuplicateTensorName { .. }
            | E::TooManyDims { .. }
            | E::NegativeDim { .. }
            | E::ElementCountOverflow { .. }
            | E::ByteSizeOverflow { .. }
            | E::UnknownTensorType { .. }
            | E::UnsupportedTensorType { .. }
            | E::RowNotBlockMultiple { .. } => self.fmt_tensor_info(f),
            E::MisalignedTensor { .. }
            | E::TensorOverlap { .. }
            | E::TensorGap { .. }
            | E::DataOutOfBounds { .. } => self.fmt_tensor_data(f),
            E::WrongType { .. } | E::ValueOutOfRange { .. } | E::InvalidUtf8 { .. } => {
                self.fmt_value(f)
            }
        }
    }
}

impl GgufError {
    /// The fixed header, the counts and the reader's bounds.
    fn fmt_header(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        match *self {
            E::Truncated { offset, needed } => write!(
                f,
                "file truncated: {needed} bytes needed at offset {offset}"
            ),
            E::BadMagic {
                found: [a, b, c, d],
            } => write!(
                f,
                "bad magic {a:02x} {b:02x} {c:02x} {d:02x} at offset 0 (expected 47 47 55 46 \"GGUF\")"
            ),
            E::UnsupportedVersion { version } => write!(
                f,
                "unsupported GGUF version {version} at offset 4 (need 2 or 3)"
            ),
            E::ByteSwapped { version } => write!(
                f,
                "big-endian GGUF (version field {version:#010x} at offset 4) is not supported"
            ),
            E::NegativeCount { offset } => write!(f, "negative count at offset {offset}"),
            E::CountExceedsData {
                offset,
                count,
                remaining,
            } => write!(
                f,
                "count {count} at offset {offset} cannot fit in the {remaining} bytes that follow"
            ),
            E::LimitExceeded {
                limit,
                offset,
                value,
                max,
            } => write!(
                f,
                "{limit} {value} at offset {offset} exceeds the limit {max}"
            ),
            _ => fmt::Debug::fmt(self, f), // routed elsewhere by `fmt`
        }
    }

    /// The key/value pairs: their encoding, keys and `general.alignment`.
    fn fmt_metadata(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        match *self {
            E::StringTooLong {
                offset,
                len,
                remaining,
            } => write!(
                f,
                "string length {len} at offset {offset} exceeds the {remaining} bytes that follow"
            ),
            E::ArrayTooLong {
                offset,
                len,
                remaining,
            } => write!(
                f,
                "array of {len} elements at offset {offset} exceeds the {remaining} bytes that follow"
            ),
            E::InvalidValueType { offset, type_id } => write!(
                f,
                "invalid value type {type_id} at offset {offset} (valid: 0 to 12)"
            ),
            E::NestedArray { offset } => write!(
                f,
                "array of arrays at offset {offset} (not supported, as in llama.cpp)"
            ),
            E::EmptyKey { index } => write!(f, "empty key in key/value pair {index}"),
            E::InvalidUtf8Key { index } => {
                write!(f, "key of key/value pair {index} is not valid UTF-8")
            }
            E::DuplicateKey { index, first } => {
                write!(f, "key/value pair {index} repeats the key of pair {first}")
            }
            E::AlignmentType { index, found } => write!(
                f,
                "general.alignment (key/value pair {index}) has type {found}, expected UINT32"
            ),
            E::BadAlignment { alignment } => write!(
                f,
                "general.alignment {alignment} is not a nonzero power of two"
            ),
            _ => fmt::Debug::fmt(self, f), // routed elsewhere by `fmt`
        }
    }

    /// One tensor info: name, dimensions, type.
    fn fmt_tensor_info(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        match *self {
            E::TensorNameTooLong { index, len } => {
                write!(f, "tensor {index}: name of {len} bytes (max 63)")
            }
            E::InvalidUtf8TensorName { index } => {
                write!(f, "tensor {index}: name is not valid UTF-8")
            }
            E::DuplicateTensorName { index, first } => {
                write!(f, "tensor {index}: repeats the name of tensor {first}")
            }
            E::TooManyDims { index, n_dims } => {
                write!(f, "tensor {index}: {n_dims} dimensions (max 4)")
            }
            E::NegativeDim { index, dim } => write!(f, "tensor {index}: ne[{dim}] is negative"),
            E::ElementCountOverflow { index } => {
                write!(f, "tensor {index}: element count overflows int64")
            }
            E::ByteSizeOverflow { index } => write!(f, "tensor {index}: byte size overflows"),
            E::UnknownTensorType { index, type_id } => {
                write!(f, "tensor {index}: unknown ggml type {type_id}")
            }
            E::UnsupportedTensorType { index, type_id } => write!(
                f,
                "tensor {index}: ggml type {} ({type_id}) is not supported by detllm",
                super::ggml_type_name(type_id).unwrap_or("unknown")
            ),
            E::RowNotBlockMultiple {
                index,
                ne0,
                block_size,
            } => write!(
                f,
                "tensor {index}: ne[0] = {ne0} is not a multiple of the block size {block_size}"
            ),
            _ => fmt::Debug::fmt(self, f), // routed elsewhere by `fmt`
        }
    }

    /// Where one tensor's data lies in the data section.
    fn fmt_tensor_data(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        match *self {
            E::MisalignedTensor {
                index,
                offset,
                alignment,
            } => write!(
                f,
                "tensor {index}: data offset {offset} is not a multiple of the alignment {alignment}"
            ),
            E::TensorOverlap {
                index,
                offset,
                expected,
            } => write!(
                f,
                "tensor {index}: data offset {offset} overlaps the previous tensor (expected {expected})"
            ),
            E::TensorGap {
                index,
                offset,
                expected,
            } => write!(
                f,
                "tensor {index}: data offset {offset} leaves a gap (expected {expected})"
            ),
            E::DataOutOfBounds {
                index,
                end,
                file_len,
            } => write!(
                f,
                "tensor {index}: data ends at {end}, past the end of the file ({file_len} bytes)"
            ),
            _ => fmt::Debug::fmt(self, f), // routed elsewhere by `fmt`
        }
    }

    /// A value read through a typed accessor after parsing.
    fn fmt_value(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufError as E;
        match *self {
            E::WrongType {
                offset,
                expected,
                found,
            } => write!(
                f,
                "value at offset {offset} has type {found}, expected {expected}"
            ),
            E::ValueOutOfRange { offset } => write!(
                f,
                "integer value at offset {offset} does not fit the type asked for"
            ),
            E::InvalidUtf8 { offset } => {
                write!(f, "string at offset {offset} is not valid UTF-8")
            }
            _ => fmt::Debug::fmt(self, f), // routed elsewhere by `fmt`
        }
    }
}

impl core::error::Error for GgufError {}
