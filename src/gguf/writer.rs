//! [`Writer`]: GGUF bytes into a caller-provided buffer.
//!
//! Key/value pairs are written as they are added (after room for the
//! 24-byte header); [`Writer::finish`] takes the tensors, writes their info
//! records, the padding to the alignment and the data, then the header.
//!
//! Sizing is two-pass: run the same calls on [`Writer::measure`], whose
//! `finish` returns the bytes needed without storing anything, then on
//! [`Writer::new`] with a buffer that large.
//!
//! Every method either succeeds or returns an error and writes nothing. The
//! writer checks what is cheap to check (names, dims, block multiples, data
//! lengths, alignment, duplicate tensor names); it does not check duplicate
//! keys — [`super::File::parse`] does.

#![forbid(unsafe_code)]

use super::cursor::u64_of;
use super::error::GgufError;
use super::limits;
use super::tensor::{MAX_DIMS, MAX_NAME_LEN};
use super::value::ValueType;
use super::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, HEADER_LEN, MAGIC, pad};
use crate::quant::GgmlType;
use crate::{Error, F32, Result};

/// One tensor for [`Writer::finish`].
#[derive(Clone, Copy, Debug)]
pub struct TensorSpec<'t> {
    /// Name (at most 63 bytes).
    pub name: &'t str,
    /// Block format.
    pub ty: GgmlType,
    /// Shape, fastest-varying first (`ne[0]` = row length), 0 to 4 dims.
    pub ne: &'t [u64],
    /// The tensor's bytes (exactly the size the shape and type imply).
    pub data: &'t [u8],
}

/// Writes a GGUF file into `&mut [u8]` (or only measures it).
#[derive(Debug)]
pub struct Writer<'b> {
    buf: &'b mut [u8],
    // Count bytes without storing them.
    measure: bool,
    // End of what has been written (the header is reserved, written last).
    pos: usize,
    n_kv: usize,
    alignment: u32,
    version: u32,
}

impl<'b> Writer<'b> {
    /// A writer into `buf` (version 3, alignment 32).
    pub fn new(buf: &'b mut [u8]) -> Self {
        Writer {
            buf,
            measure: false,
            pos: HEADER_LEN,
            n_kv: 0,
            alignment: DEFAULT_ALIGNMENT,
            version: 3,
        }
    }

    /// A writer that stores nothing; its [`Writer::finish`] returns the bytes
    /// the same calls need.
    pub fn measure() -> Writer<'static> {
        Writer {
            buf: &mut [],
            measure: true,
            pos: HEADER_LEN,
            n_kv: 0,
            alignment: DEFAULT_ALIGNMENT,
            version: 3,
        }
    }

    /// Write version 2 instead of 3 (same layout).
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if !matches!(version, 2 | 3) {
            return Err(GgufError::UnsupportedVersion { version }.into());
        }
        self.version = version;
        Ok(())
    }

    /// Bytes written so far (including the reserved header).
    pub const fn len(&self) -> usize {
        self.pos
    }

    /// Whether nothing but the reserved header has been written.
    pub const fn is_empty(&self) -> bool {
        self.pos == HEADER_LEN && self.n_kv == 0
    }

    /// Make sure `n` more bytes fit; returns the end position.
    fn room(&self, n: usize) -> Result<usize> {
        let end = self.pos.checked_add(n).ok_or(Error::SizeOverflow)?;
        if !self.measure && end > self.buf.len() {
            return Err(Error::BufferTooSmall {
                needed: end,
                available: self.buf.len(),
            });
        }
        Ok(end)
    }

    /// Copy `b` at the position (room already checked).
    fn put(&mut self, b: &[u8]) {
        let end = self.pos.saturating_add(b.len());
        if !self.measure
            && let Some(dst) = self.buf.get_mut(self.pos..end)
        {
            dst.copy_from_slice(b);
        }
        self.pos = end;
    }

    fn put_str(&mut self, s: &[u8]) {
        self.put(&u64_of(s.len()).to_le_bytes());
        self.put(s);
    }

    /// Add one pair whose value is `value_bytes` (already encoded), after
    /// checking the key and the room.
    fn kv(
        &mut self,
        key: &str,
        ty: ValueType,
        value_len: usize,
        value: impl FnOnce(&mut Self),
    ) -> Result<()> {
        let index = u32::try_from(self.n_kv).unwrap_or(u32::MAX);
        if key.is_empty() {
            return Err(GgufError::EmptyKey { index }.into());
        }
        if self.n_kv >= limits::MAX_KV || key.len() > limits::MAX_KEY_LEN {
            return Err(Error::SizeOverflow);
        }
        let n = (8 + 4usize)
            .checked_add(key.len())
            .and_then(|n| n.checked_add(value_len))
            .ok_or(Error::SizeOverflow)?;
        self.room(n)?;
        self.put_str(key.as_bytes());
        self.put(&(ty as u32).to_le_bytes());
        value(self);
        self.n_kv += 1;
        Ok(())
    }

    /// Add a UINT8 pair.
    pub fn add_u8(&mut self, key: &str, v: u8) -> Result<()> {
        self.kv(key, ValueType::U8, 1, |w| w.put(&[v]))
    }

    /// Add an INT8 pair.
    pub fn add_i8(&mut self, key: &str, v: i8) -> Result<()> {
        self.kv(key, ValueType::I8, 1, |w| w.put(&v.to_le_bytes()))
    }

    /// Add a UINT16 pair.
    pub fn add_u16(&mut self, key: &str, v: u16) -> Result<()> {
        self.kv(key, ValueType::U16, 2, |w| w.put(&v.to_le_bytes()))
    }

    /// Add an INT16 pair.
    pub fn add_i16(&mut self, key: &str, v: i16) -> Result<()> {
        self.kv(key, ValueType::I16, 2, |w| w.put(&v.to_le_bytes()))
    }

    /// Add a UINT32 pair. For `general.alignment` the value must be a nonzero
    /// power of two and becomes the alignment of the data section.
    pub fn add_u32(&mut self, key: &str, v: u32) -> Result<()> {
        let is_alignment = key == ALIGNMENT_KEY;
        if is_alignment && !v.is_power_of_two() {
            return Err(GgufError::BadAlignment { alignment: v }.into());
        }
        self.kv(key, ValueType::U32, 4, |w| w.put(&v.to_le_bytes()))?;
        if is_alignment {
            self.alignment = v;
        }
        Ok(())
    }

    /// Set the alignment (adds `general.alignment` as UINT32).
    pub fn set_alignment(&mut self, alignment: u32) -> Result<()> {
        self.add_u32(ALIGNMENT_KEY, alignment)
    }

    /// Add an INT32 pair.
    pub fn add_i32(&mut self, key: &str, v: i32) -> Result<()> {
        self.kv(key, ValueType::I32, 4, |w| w.put(&v.to_le_bytes()))
    }

    /// Add a FLOAT32 pair.
    pub fn add_f32(&mut self, key: &str, v: F32) -> Result<()> {
        self.kv(key, ValueType::F32, 4, |w| {
            w.put(&v.to_bits().to_le_bytes())
        })
    }

    /// Add a BOOL pair.
    pub fn add_bool(&mut self, key: &str, v: bool) -> Result<()> {
        self.kv(key, ValueType::Bool, 1, |w| w.put(&[u8::from(v)]))
    }

    /// Add a STRING pair.
    pub fn add_str(&mut self, key: &str, v: &str) -> Result<()> {
        self.add_str_bytes(key, v.as_bytes())
    }

    /// Add a STRING pair from raw bytes (need not be UTF-8).
    pub fn add_str_bytes(&mut self, key: &str, v: &[u8]) -> Result<()> {
        let n = v.len().checked_add(8).ok_or(Error::SizeOverflow)?;
        self.kv(key, ValueType::String, n, |w| w.put_str(v))
    }

    /// Add a UINT64 pair.
    pub fn add_u64(&mut self, key: &str, v: u64) -> Result<()> {
        self.kv(key, ValueType::U64, 8, |w| w.put(&v.to_le_bytes()))
    }

    /// Add an INT64 pair.
    pub fn add_i64(&mut self, key: &str, v: i64) -> Result<()> {
        self.kv(key, ValueType::I64, 8, |w| w.put(&v.to_le_bytes()))
    }

    /// Add a FLOAT64 pair from its IEEE bits.
    pub fn add_f64_bits(&mut self, key: &str, bits: u64) -> Result<()> {
        self.kv(key, ValueType::F64, 8, |w| w.put(&bits.to_le_bytes()))
    }

    /// Add an ARRAY of a fixed-size element type from its packed
    /// little-endian element bytes (`raw.len()` a multiple of the element
    /// size).
    pub fn add_array_raw(&mut self, key: &str, elem: ValueType, raw: &[u8]) -> Result<()> {
        let size = elem.fixed_size().ok_or(Error::UnsupportedType {
            ggml_type: elem as u32,
        })?;
        if !raw.len().is_multiple_of(size) {
            return Err(Error::ShapeMismatch {
                expected: raw.len().next_multiple_of(size),
                found: raw.len(),
            });
        }
        let count = u64_of(raw.len() / size);
        let n = raw.len().checked_add(12).ok_or(Error::SizeOverflow)?;
        self.kv(key, ValueType::Array, n, |w| {
            w.put(&(elem as u32).to_le_bytes());
            w.put(&count.to_le_bytes());
            w.put(raw);
        })
    }

    /// Add an ARRAY of a fixed-size type from an iterator of encoded
    /// elements (each `N` bytes).
    fn add_array_elems<const N: usize>(
        &mut self,
        key: &str,
        elem: ValueType,
        items: impl ExactSizeIterator<Item = [u8; N]> + Clone,
    ) -> Result<()> {
        let count = items.len();
        let n = count
            .checked_mul(N)
            .and_then(|n| n.checked_add(12))
            .ok_or(Error::SizeOverflow)?;
        self.kv(key, ValueType::Array, n, |w| {
            w.put(&(elem as u32).to_le_bytes());
            w.put(&u64_of(count).to_le_bytes());
            for e in items {
                w.put(&e);
            }
        })
    }

    /// Add an ARRAY of INT32.
    pub fn add_array_i32(&mut self, key: &str, v: &[i32]) -> Result<()> {
        self.add_array_elems(key, ValueType::I32, v.iter().map(|x| x.to_le_bytes()))
    }

    /// Add an ARRAY of UINT32.
    pub fn add_array_u32(&mut self, key: &str, v: &[u32]) -> Result<()> {
        self.add_array_elems(key, ValueType::U32, v.iter().map(|x| x.to_le_bytes()))
    }

    /// Add an ARRAY of FLOAT32.
    pub fn add_array_f32(&mut self, key: &str, v: &[F32]) -> Result<()> {
        self.add_array_elems(
            key,
            ValueType::F32,
            v.iter().map(|x| x.to_bits().to_le_bytes()),
        )
    }

    /// Add an ARRAY of STRING.
    pub fn add_array_str(&mut self, key: &str, v: &[&str]) -> Result<()> {
        self.add_array_strings(key, v.iter().map(|s| s.as_bytes()))
    }

    /// Add an ARRAY of STRING from raw bytes (need not be UTF-8).
    pub fn add_array_bytes(&mut self, key: &str, v: &[&[u8]]) -> Result<()> {
        self.add_array_strings(key, v.iter().copied())
    }

    /// Add an ARRAY of STRING from any (clonable) iterator of byte strings.
    pub fn add_array_strings<'s>(
        &mut self,
        key: &str,
        items: impl Iterator<Item = &'s [u8]> + Clone,
    ) -> Result<()> {
        let mut count = 0u64;
        let mut n = 12usize;
        for s in items.clone() {
            count += 1;
            n = n
                .checked_add(8)
                .and_then(|n| n.checked_add(s.len()))
                .ok_or(Error::SizeOverflow)?;
        }
        self.kv(key, ValueType::Array, n, |w| {
            w.put(&(ValueType::String as u32).to_le_bytes());
            w.put(&count.to_le_bytes());
            for s in items {
                w.put_str(s);
            }
        })
    }

    /// Write the tensor infos, padding and data, then the header. Returns
    /// the file length (for [`Writer::measure`]: the buffer size needed).
    pub fn finish(mut self, tensors: &[TensorSpec<'_>]) -> Result<usize> {
        if tensors.len() > limits::MAX_TENSORS {
            return Err(Error::SizeOverflow);
        }
        // Validate every tensor and size everything before writing.
        let mut infos_len = 0usize;
        let mut data_len = 0u64; // padded end of the data written so far
        let mut offsets_ok = true;
        for (index, t) in (0u32..).zip(tensors) {
            let n_bytes = check_spec(t, index)?;
            if tensors
                .iter()
                .take(index as usize)
                .any(|u| u.name == t.name)
            {
                let first = tensors.iter().position(|u| u.name == t.name).unwrap_or(0);
                return Err(GgufError::DuplicateTensorName {
                    index,
                    first: u32::try_from(first).unwrap_or(0),
                }
                .into());
            }
            infos_len = infos_len
                .checked_add(8 + t.name.len() + 4 + 8 * t.ne.len() + 4 + 8)
                .ok_or(Error::SizeOverflow)?;
            let start = pad(data_len, self.alignment).ok_or(Error::SizeOverflow)?;
            data_len = start.checked_add(n_bytes).ok_or(Error::SizeOverflow)?;
            offsets_ok &= usize::try_from(data_len).is_ok();
        }
        if !offsets_ok {
            return Err(Error::SizeOverflow);
        }
        let infos_end = self.pos.checked_add(infos_len).ok_or(Error::SizeOverflow)?;
        // With no tensors there is no data section to align.
        let data_start = if tensors.is_empty() {
            u64_of(infos_end)
        } else {
            pad(u64_of(infos_end), self.alignment).ok_or(Error::SizeOverflow)?
        };
        let total = data_start
            .checked_add(data_len)
            .and_then(|t| usize::try_from(t).ok())
            .ok_or(Error::SizeOverflow)?;
        self.room(total.saturating_sub(self.pos))?;

        // Infos.
        let mut offset = 0u64;
        for t in tensors {
            offset = pad(offset, self.alignment).unwrap_or(offset);
            self.put_str(t.name.as_bytes());
            self.put(&(t.ne.len() as u32).to_le_bytes());
            for &d in t.ne {
                self.put(&d.to_le_bytes());
            }
            self.put(&(t.ty as u32).to_le_bytes());
            self.put(&offset.to_le_bytes());
            offset = offset.saturating_add(u64_of(t.data.len()));
        }
        // Padding, then data (each tensor padded to the alignment).
        let data_start = usize::try_from(data_start).unwrap_or(total);
        self.zeros(data_start);
        for t in tensors {
            let at =
                usize::try_from(pad(u64_of(self.pos - data_start), self.alignment).unwrap_or(0))
                    .unwrap_or(0);
            self.zeros(data_start + at);
            self.put(t.data);
        }
        // Header.
        let end = self.pos;
        self.pos = 0;
        self.put(&MAGIC);
        self.put(&self.version.to_le_bytes());
        self.put(&u64_of(tensors.len()).to_le_bytes());
        self.put(&u64_of(self.n_kv).to_le_bytes());
        Ok(end)
    }

    /// Zero bytes up to position `to`.
    fn zeros(&mut self, to: usize) {
        const Z: [u8; 64] = [0; 64];
        while self.pos < to {
            let n = (to - self.pos).min(Z.len());
            self.put(Z.get(..n).unwrap_or(&[]));
        }
    }
}

/// Check one tensor spec; returns its byte size.
fn check_spec(t: &TensorSpec<'_>, index: u32) -> Result<u64> {
    if t.name.len() > MAX_NAME_LEN {
        return Err(GgufError::TensorNameTooLong {
            index,
            len: u64_of(t.name.len()),
        }
        .into());
    }
    if t.ne.len() > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            index,
            n_dims: t.ne.len() as u32,
        }
        .into());
    }
    let mut n_elements = 1u64;
    for (dim, &d) in (0u32..).zip(t.ne) {
        if d > i64::MAX as u64 {
            return Err(GgufError::NegativeDim { index, dim }.into());
        }
        n_elements = n_elements
            .checked_mul(d)
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or(GgufError::ElementCountOverflow { index })?;
    }
    let ne0 = t.ne.first().copied().unwrap_or(1);
    let bs = u64_of(t.ty.block_size());
    if !ne0.is_multiple_of(bs) {
        return Err(GgufError::RowNotBlockMultiple {
            index,
            ne0,
            block_size: t.ty.block_size() as u32,
        }
        .into());
    }
    let mut n_bytes = (ne0 / bs)
        .checked_mul(u64_of(t.ty.type_size()))
        .ok_or(GgufError::ByteSizeOverflow { index })?;
    for &d in t.ne.iter().skip(1) {
        n_bytes = n_bytes
            .checked_mul(d)
            .ok_or(GgufError::ByteSizeOverflow { index })?;
    }
    if n_bytes != u64_of(t.data.len()) {
        return Err(Error::ShapeMismatch {
            expected: usize::try_from(n_bytes).unwrap_or(usize::MAX),
            found: t.data.len(),
        });
    }
    Ok(n_bytes)
}
