//! GGUF reader (zero-copy, validated in one pass) and writer.
//!
//! # Layout (v2 and v3 are identical; all fields little-endian)
//!
//! ```text
//! u8[4] magic "GGUF" | u32 version | i64 n_tensors | i64 n_kv
//! n_kv      x { str key; i32 value_type; value }
//! n_tensors x { str name; u32 n_dims; i64 ne[n_dims]; i32 ggml_type; u64 offset }
//! zero padding to `alignment`           <- data section start (`data_offset`)
//! tensor i at data_offset + offset_i, offsets packed: offset_i = Σ_{j<i} pad(nbytes_j)
//! ```
//! `str` is a u64 length and the bytes. An array value is an element type,
//! a u64 count and the elements back to back.
//!
//! # Validation
//!
//! [`File::parse`] walks the whole header once and checks everything
//! llama.cpp's `gguf_init_from_file_impl` and model loader check: magic,
//! version, counts against the bytes left, every string and array length,
//! value types 0..=12 without nested arrays, non-empty unique keys,
//! `general.alignment` a UINT32 nonzero power of two, tensor names under 64
//! bytes and unique, `n_dims <= 4`, dimensions non-negative, element count and
//! byte size without overflow, known and supported ggml types, rows a whole
//! number of blocks, offsets packed exactly, and data inside the file. Each
//! failure is its own [`GgufError`] variant. After `parse` succeeds, every
//! accessor is infallible on structure (getters can still report a wrong
//! value type, a value out of range or invalid UTF-8).
//!
//! Two checks go beyond llama.cpp: keys and tensor names must be UTF-8
//! (lookups take `&str`), and the bounds in [`limits`].
//!
//! # Cost
//!
//! Parsing is linear in the header size, except the duplicate checks, which
//! compare each key with the earlier keys and each tensor name with the
//! earlier names. Those are bounded by [`limits`]: at most
//! `MAX_KV²/2` key comparisons of at most `MAX_KEY_LEN` bytes, and
//! `MAX_TENSORS²/2` name comparisons of at most 63 bytes (each tensor record
//! is skipped in O(1)). Key positions are kept in a `[u32; MAX_KV]` table on
//! the stack (2 KiB); nothing else is stored. The real 98 MB SmolLM2 file (33
//! keys, 272 tensors) parses in 278 µs, 1.1× one byte-sum pass over its
//! 1.8 MB header (`benches/gguf_parse.rs`).

#![forbid(unsafe_code)]

mod cursor;
mod error;
mod tensor;
mod value;
mod writer;

pub use error::{GgufError, Limit};
pub use tensor::{MAX_DIMS, MAX_NAME_LEN, TensorInfo, ggml_type_name};
pub use value::{Array, ArrayIter, StrIter, Value, ValueType};
pub use writer::{TensorSpec, Writer};

use cursor::{Cursor, u64_of};
use tensor::{read_info, skip_info};
use value::{read_str, read_value, read_value_type};

use crate::F32;

/// The bounds [`File::parse`] enforces (each failure is
/// [`GgufError::LimitExceeded`]). Real models are far below them (SmolLM2:
/// 33 keys, 272 tensors; the largest public models have about 60 keys and
/// 2,000 tensors).
pub mod limits {
    /// Most key/value pairs.
    pub const MAX_KV: usize = 512;
    /// Most tensors.
    pub const MAX_TENSORS: usize = 1 << 14;
    /// Longest key in bytes.
    pub const MAX_KEY_LEN: usize = 1024;
    /// Every key/value pair must start below this offset (key positions are
    /// kept as `u32`).
    pub const MAX_KV_SECTION: u64 = u32::MAX as u64;
}

/// The magic bytes at offset 0.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u32 = 32;
/// The key that sets the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Header size: magic, version, n_tensors, n_kv.
const HEADER_LEN: usize = 4 + 4 + 8 + 8;
/// Smallest key/value pair: key length (8) + a 1-byte key + type (4) + a
/// 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// Smallest tensor info: name length (8) + n_dims (4) + type (4) + offset (8).
const MIN_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// A validated GGUF file borrowed from its bytes.
#[derive(Clone, Copy, Debug)]
pub struct File<'a> {
    bytes: &'a [u8],
    version: u32,
    n_kv: usize,
    n_tensors: usize,
    alignment: u32,
    // Offset of the first tensor info record.
    infos_start: usize,
    // Start of the data section (may exceed the file length by less than
    // `alignment` when no tensor has data).
    data_offset: u64,
}

/// `n` rounded up to a multiple of `align` (a power of two), if it fits.
const fn pad(n: u64, align: u32) -> Option<u64> {
    let mask = align as u64 - 1;
    match n.checked_add(mask) {
        Some(v) => Some(v & !mask),
        None => None,
    }
}

/// Read a count field (`i64`, must be non-negative), bounded by `max` and by
/// the bytes left (each entry needs at least `min_bytes`).
fn read_count(
    cur: &mut Cursor<'_>,
    limit: Limit,
    max: usize,
    min_bytes: u64,
) -> Result<usize, GgufError> {
    let offset = u64_of(cur.pos());
    let count = cur.u64()?;
    if count > i64::MAX as u64 {
        return Err(GgufError::NegativeCount { offset });
    }
    if count > u64_of(max) {
        return Err(GgufError::LimitExceeded {
            limit,
            offset,
            value: count,
            max: u64_of(max),
        });
    }
    // `count <= max`, so neither the product nor the conversion can fail.
    let remaining = u64_of(cur.remaining());
    if count.saturating_mul(min_bytes) > remaining {
        return Err(GgufError::CountExceedsData {
            offset,
            count,
            remaining,
        });
    }
    Ok(count as usize)
}

/// The header: magic, version (2 or 3), `(version, n_tensors, n_kv)`.
fn read_header(cur: &mut Cursor<'_>) -> Result<(u32, usize, usize), GgufError> {
    let magic = cur.take(4)?;
    if magic != MAGIC {
        let found = <[u8; 4]>::try_from(magic).unwrap_or([0; 4]);
        return Err(GgufError::BadMagic { found });
    }
    let version = cur.u32()?;
    match version {
        2 | 3 => {}
        v if matches!(v.swap_bytes(), 1..=3) => {
            return Err(GgufError::ByteSwapped { version });
        }
        _ => return Err(GgufError::UnsupportedVersion { version }),
    }
    let n_tensors = read_count(cur, Limit::TensorCount, limits::MAX_TENSORS, MIN_INFO_BYTES)?;
    let n_kv = read_count(cur, Limit::KvCount, limits::MAX_KV, MIN_KV_BYTES)?;
    Ok((version, n_tensors, n_kv))
}

/// The `n_kv` key/value pairs: every key valid and unique, every value
/// well-formed; returns `general.alignment` (a power of two) or the default.
fn read_metadata(bytes: &[u8], cur: &mut Cursor<'_>, n_kv: usize) -> Result<u32, GgufError> {
    let mut key_pos = [0u32; limits::MAX_KV];
    let mut alignment = DEFAULT_ALIGNMENT;
    for (index, i) in (0u32..).zip(0..n_kv) {
        let pos = cur.pos();
        let key = read_str(cur)?;
        check_key(bytes, key, pos, index, key_pos.get(..i).unwrap_or(&[]))?;
        if let Some(slot) = key_pos.get_mut(i) {
            // `check_key` verified that `pos` fits a u32.
            *slot = u32::try_from(pos).unwrap_or(u32::MAX);
        }
        let ty = read_value_type(cur)?;
        let value = read_value(ty, cur)?;
        if key == ALIGNMENT_KEY.as_bytes() {
            let Value::U32(a) = value else {
                return Err(GgufError::AlignmentType { index, found: ty });
            };
            if !a.is_power_of_two() {
                return Err(GgufError::BadAlignment { alignment: a });
            }
            alignment = a;
        }
    }
    Ok(alignment)
}

/// The `n_tensors` tensor infos: each valid, names unique, offsets aligned
/// and packed exactly in order (no overlap, no gap).
fn check_tensor_packing(
    bytes: &[u8],
    cur: &mut Cursor<'_>,
    n_tensors: usize,
    alignment: u32,
) -> Result<(), GgufError> {
    let infos_start = cur.pos();
    let mut expected = 0u64;
    for (index, _) in (0u32..).zip(0..n_tensors) {
        let info = read_info(cur, index)?;
        check_name_unique(bytes, infos_start, info.name, index)?;
        let offset = info.offset;
        if !offset.is_multiple_of(u64::from(alignment)) {
            return Err(GgufError::MisalignedTensor {
                index,
                offset,
                alignment,
            });
        }
        if offset < expected {
            return Err(GgufError::TensorOverlap {
                index,
                offset,
                expected,
            });
        }
        if offset > expected {
            return Err(GgufError::TensorGap {
                index,
                offset,
                expected,
            });
        }
        expected = offset
            .checked_add(info.n_bytes)
            .and_then(|end| pad(end, alignment))
            .ok_or(GgufError::ByteSizeOverflow { index })?;
    }
    Ok(())
}

/// Every tensor's data (infos from `infos_start`, data from `data_offset`)
/// lies inside the file.
fn check_data_in_file(
    bytes: &[u8],
    infos_start: usize,
    n_tensors: usize,
    data_offset: u64,
) -> Result<(), GgufError> {
    let file_len = u64_of(bytes.len());
    let mut walk = Cursor::at(bytes, infos_start);
    for (index, _) in (0u32..).zip(0..n_tensors) {
        let info = read_info(&mut walk, index)?;
        let end = data_offset
            .checked_add(info.offset)
            .and_then(|s| s.checked_add(info.n_bytes))
            .ok_or(GgufError::ByteSizeOverflow { index })?;
        if end > file_len {
            return Err(GgufError::DataOutOfBounds {
                index,
                end,
                file_len,
            });
        }
    }
    Ok(())
}

impl<'a> File<'a> {
    /// Parse and validate a whole GGUF file (see the module docs for every
    /// check). Borrows `bytes`; allocates nothing.
    pub fn parse(bytes: &'a [u8]) -> Result<File<'a>, GgufError> {
        let mut cur = Cursor::at(bytes, 0);
        let (version, n_tensors, n_kv) = read_header(&mut cur)?;
        let alignment = read_metadata(bytes, &mut cur, n_kv)?;
        let infos_start = cur.pos();
        check_tensor_packing(bytes, &mut cur, n_tensors, alignment)?;
        let data_offset =
            pad(u64_of(cur.pos()), alignment).ok_or(GgufError::ByteSizeOverflow { index: 0 })?;
        check_data_in_file(bytes, infos_start, n_tensors, data_offset)?;
        Ok(File {
            bytes,
            version,
            n_kv,
            n_tensors,
            alignment,
            infos_start,
            data_offset,
        })
    }

    /// The file's bytes.
    pub const fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Format version (2 or 3).
    pub const fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment (`general.alignment`, default 32).
    pub const fn alignment(&self) -> u32 {
        self.alignment
    }

    /// Offset of the data section from the start of the file.
    pub const fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Number of tensors.
    pub const fn n_tensors(&self) -> usize {
        self.n_tensors
    }

    /// Number of key/value pairs.
    pub const fn n_kv(&self) -> usize {
        self.n_kv
    }

    /// All key/value pairs in file order.
    pub fn kvs(&self) -> KvIter<'a> {
        KvIter {
            cur: Cursor::at(self.bytes, HEADER_LEN),
            left: self.n_kv,
        }
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<Value<'a>> {
        self.find(key).map(|(_, v)| v)
    }

    /// `(offset of the value type id, value)` of `key`.
    fn find(&self, key: &str) -> Option<(u64, Value<'a>)> {
        let mut it = self.kvs();
        while let Some((k, off, v)) = it.next_entry() {
            if k == key.as_bytes() {
                return Some((off, v));
            }
        }
        None
    }

    /// An integer value of any integer type, converted losslessly.
    fn get_int<T: TryFrom<i128>>(
        &self,
        key: &str,
        expected: ValueType,
    ) -> Result<Option<T>, GgufError> {
        let Some((offset, v)) = self.find(key) else {
            return Ok(None);
        };
        let n = v.as_i128().ok_or(GgufError::WrongType {
            offset,
            expected,
            found: v.ty(),
        })?;
        T::try_from(n)
            .map(Some)
            .map_err(|_| GgufError::ValueOutOfRange { offset })
    }

    /// `key` as a `u32`: `Ok(None)` if absent; any integer type whose value
    /// fits is accepted; `WrongType` for a non-integer, `ValueOutOfRange` if
    /// it does not fit.
    pub fn get_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        self.get_int(key, ValueType::U32)
    }

    /// `key` as a `u64` (same rules as [`File::get_u32`]).
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        self.get_int(key, ValueType::U64)
    }

    /// `key` as an `i32` (same rules as [`File::get_u32`]).
    pub fn get_i32(&self, key: &str) -> Result<Option<i32>, GgufError> {
        self.get_int(key, ValueType::I32)
    }

    /// `key` as a FLOAT32 (bits): `Ok(None)` if absent, `WrongType` for any
    /// other type.
    pub fn get_f32(&self, key: &str) -> Result<Option<F32>, GgufError> {
        match self.find(key) {
            None => Ok(None),
            Some((_, Value::F32(x))) => Ok(Some(x)),
            Some((offset, v)) => Err(wrong(offset, ValueType::F32, v)),
        }
    }

    /// `key` as a BOOL: `Ok(None)` if absent, `WrongType` for any other type.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        match self.find(key) {
            None => Ok(None),
            Some((_, Value::Bool(b))) => Ok(Some(b)),
            Some((offset, v)) => Err(wrong(offset, ValueType::Bool, v)),
        }
    }

    /// `key` as a UTF-8 STRING: `Ok(None)` if absent, `WrongType` for any
    /// other type, `InvalidUtf8` if the bytes are not UTF-8.
    pub fn get_str(&self, key: &str) -> Result<Option<&'a str>, GgufError> {
        match self.find(key) {
            None => Ok(None),
            Some((offset, Value::Str(s))) => core::str::from_utf8(s).map(Some).map_err(|_| {
                GgufError::InvalidUtf8 {
                    // type id (4) + length (8)
                    offset: offset.saturating_add(12),
                }
            }),
            Some((offset, v)) => Err(wrong(offset, ValueType::String, v)),
        }
    }

    /// `key` as an ARRAY: `Ok(None)` if absent, `WrongType` for any other
    /// type.
    pub fn get_array(&self, key: &str) -> Result<Option<Array<'a>>, GgufError> {
        match self.find(key) {
            None => Ok(None),
            Some((_, Value::Array(a))) => Ok(Some(a)),
            Some((offset, v)) => Err(wrong(offset, ValueType::Array, v)),
        }
    }

    /// All tensors in file order.
    pub fn tensors(&self) -> TensorIter<'a> {
        TensorIter {
            cur: Cursor::at(self.bytes, self.infos_start),
            next: 0,
            left: self.n_tensors,
            bytes: self.bytes,
            data_offset: self.data_offset,
        }
    }

    /// The tensor named `name`, if present.
    pub fn tensor(&self, name: &str) -> Option<TensorInfo<'a>> {
        self.tensors().find(|t| t.name == name.as_bytes())
    }
}

fn wrong(offset: u64, expected: ValueType, v: Value<'_>) -> GgufError {
    GgufError::WrongType {
        offset,
        expected,
        found: v.ty(),
    }
}

/// Validate key `index` (read from `pos`): length bound, non-empty, UTF-8,
/// position bound, and not equal to any key at `earlier` positions.
fn check_key(
    bytes: &[u8],
    key: &[u8],
    pos: usize,
    index: u32,
    earlier: &[u32],
) -> Result<(), GgufError> {
    if key.len() > limits::MAX_KEY_LEN {
        return Err(GgufError::LimitExceeded {
            limit: Limit::KeyLength,
            offset: u64_of(pos),
            value: u64_of(key.len()),
            max: u64_of(limits::MAX_KEY_LEN),
        });
    }
    if key.is_empty() {
        return Err(GgufError::EmptyKey { index });
    }
    if core::str::from_utf8(key).is_err() {
        return Err(GgufError::InvalidUtf8Key { index });
    }
    if u64_of(pos) > limits::MAX_KV_SECTION {
        return Err(GgufError::LimitExceeded {
            limit: Limit::KvSection,
            offset: u64_of(pos),
            value: u64_of(pos),
            max: limits::MAX_KV_SECTION,
        });
    }
    for (first, &p) in (0u32..).zip(earlier) {
        let mut c = Cursor::at(bytes, p as usize);
        if read_str(&mut c).ok() == Some(key) {
            return Err(GgufError::DuplicateKey { index, first });
        }
    }
    Ok(())
}

/// Reject tensor `index` if an earlier record (from `infos_start`) has the
/// same name. Each earlier record is skipped in O(1).
fn check_name_unique(
    bytes: &[u8],
    infos_start: usize,
    name: &[u8],
    index: u32,
) -> Result<(), GgufError> {
    let mut c = Cursor::at(bytes, infos_start);
    for first in 0..index {
        if skip_info(&mut c) == Some(name) {
            return Err(GgufError::DuplicateTensorName { index, first });
        }
    }
    Ok(())
}

/// Iterator over the key/value pairs of a [`File`]: `(key, value)`.
#[derive(Clone, Debug)]
pub struct KvIter<'a> {
    cur: Cursor<'a>,
    left: usize,
}

impl<'a> KvIter<'a> {
    /// Next `(key, offset of the value type id, value)`.
    fn next_entry(&mut self) -> Option<(&'a [u8], u64, Value<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Validated by `File::parse`; a failure just ends the iteration.
        let entry = (|| {
            let key = read_str(&mut self.cur).ok()?;
            let off = u64_of(self.cur.pos());
            let ty = read_value_type(&mut self.cur).ok()?;
            let v = read_value(ty, &mut self.cur).ok()?;
            Some((key, off, v))
        })();
        if entry.is_none() {
            self.left = 0;
        }
        entry
    }
}

impl<'a> Iterator for KvIter<'a> {
    type Item = (&'a [u8], Value<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().map(|(k, _, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for KvIter<'_> {}

/// Iterator over the tensors of a [`File`].
#[derive(Clone, Debug)]
pub struct TensorIter<'a> {
    cur: Cursor<'a>,
    next: u32,
    left: usize,
    bytes: &'a [u8],
    data_offset: u64,
}

impl<'a> Iterator for TensorIter<'a> {
    type Item = TensorInfo<'a>;
    fn next(&mut self) -> Option<TensorInfo<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Validated by `File::parse`; a failure just ends the iteration.
        let t = (|| {
            let info = read_info(&mut self.cur, self.next).ok()?;
            let start = usize::try_from(self.data_offset.checked_add(info.offset)?).ok()?;
            let end = start.checked_add(usize::try_from(info.n_bytes).ok()?)?;
            Some(TensorInfo {
                name: info.name,
                ty: info.ty,
                n_dims: info.n_dims,
                ne: info.ne,
                offset: info.offset,
                data: self.bytes.get(start..end)?,
            })
        })();
        self.next = self.next.wrapping_add(1);
        if t.is_none() {
            self.left = 0;
        }
        t
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for TensorIter<'_> {}
