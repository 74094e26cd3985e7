//! Metadata values: [`ValueType`], [`Value`], [`Array`].
//!
//! A value borrows its bytes from the file. Arrays are kept as their packed
//! element bytes: fixed-size elements are reached in O(1)
//! ([`Array::get_i32`], [`Array::get_f32`]); strings are walked in order
//! ([`Array::str_iter`]).

#![forbid(unsafe_code)]

use core::fmt;

use super::cursor::{Cursor, le_u32_at, u64_of};
use super::error::GgufError;
use crate::F32;

/// GGUF metadata value type (`gguf_type`), ids 0..=12.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ValueType {
    /// `UINT8` (0).
    U8 = 0,
    /// `INT8` (1).
    I8 = 1,
    /// `UINT16` (2).
    U16 = 2,
    /// `INT16` (3).
    I16 = 3,
    /// `UINT32` (4).
    U32 = 4,
    /// `INT32` (5).
    I32 = 5,
    /// `FLOAT32` (6).
    F32 = 6,
    /// `BOOL` (7), one byte, nonzero is true.
    Bool = 7,
    /// `STRING` (8): u64 length + bytes.
    String = 8,
    /// `ARRAY` (9): element type, u64 count, elements.
    Array = 9,
    /// `UINT64` (10).
    U64 = 10,
    /// `INT64` (11).
    I64 = 11,
    /// `FLOAT64` (12).
    F64 = 12,
}

impl ValueType {
    /// The type with id `id`.
    pub const fn from_u32(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    /// Bytes of one value, for the fixed-size types (`None` for STRING and
    /// ARRAY).
    pub const fn fixed_size(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The name gguf.h uses (`UINT32`, `STRING`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "UINT8",
            ValueType::I8 => "INT8",
            ValueType::U16 => "UINT16",
            ValueType::I16 => "INT16",
            ValueType::U32 => "UINT32",
            ValueType::I32 => "INT32",
            ValueType::F32 => "FLOAT32",
            ValueType::Bool => "BOOL",
            ValueType::String => "STRING",
            ValueType::Array => "ARRAY",
            ValueType::U64 => "UINT64",
            ValueType::I64 => "INT64",
            ValueType::F64 => "FLOAT64",
        }
    }

    /// Whether the type is one of the eight integer types.
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            ValueType::U8
                | ValueType::I8
                | ValueType::U16
                | ValueType::I16
                | ValueType::U32
                | ValueType::I32
                | ValueType::U64
                | ValueType::I64
        )
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value, borrowing from the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// `UINT8`.
    U8(u8),
    /// `INT8`.
    I8(i8),
    /// `UINT16`.
    U16(u16),
    /// `INT16`.
    I16(i16),
    /// `UINT32`.
    U32(u32),
    /// `INT32`.
    I32(i32),
    /// `FLOAT32`, as its bits.
    F32(F32),
    /// `BOOL` (the byte was nonzero).
    Bool(bool),
    /// `STRING`: the raw bytes (not validated as UTF-8).
    Str(&'a [u8]),
    /// `ARRAY`.
    Array(Array<'a>),
    /// `UINT64`.
    U64(u64),
    /// `INT64`.
    I64(i64),
    /// `FLOAT64`, as its raw IEEE bits.
    F64(u64),
}

impl<'a> Value<'a> {
    /// The value's type.
    pub const fn ty(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// The value of an integer type, widened losslessly (`None` for the other
    /// types).
    pub const fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v as i128,
            Value::I8(v) => v as i128,
            Value::U16(v) => v as i128,
            Value::I16(v) => v as i128,
            Value::U32(v) => v as i128,
            Value::I32(v) => v as i128,
            Value::U64(v) => v as i128,
            Value::I64(v) => v as i128,
            _ => return None,
        })
    }
}

/// Decode one fixed-size value of type `ty` from exactly its bytes.
fn fixed_value<'a>(ty: ValueType, cur: &mut Cursor<'a>) -> Result<Value<'a>, GgufError> {
    Ok(match ty {
        ValueType::U8 => Value::U8(cur.u8()?),
        ValueType::I8 => Value::I8(i8::from_le_bytes([cur.u8()?])),
        ValueType::U16 => Value::U16(cur.u16()?),
        ValueType::I16 => Value::I16(i16::from_le_bytes(cur.u16()?.to_le_bytes())),
        ValueType::U32 => Value::U32(cur.u32()?),
        ValueType::I32 => Value::I32(i32::from_le_bytes(cur.u32()?.to_le_bytes())),
        ValueType::F32 => Value::F32(F32::from_bits(cur.u32()?)),
        ValueType::Bool => Value::Bool(cur.u8()? != 0),
        ValueType::U64 => Value::U64(cur.u64()?),
        ValueType::I64 => Value::I64(i64::from_le_bytes(cur.u64()?.to_le_bytes())),
        ValueType::F64 => Value::F64(cur.u64()?),
        // Callers only pass fixed-size types; report the mismatch as a type error.
        ValueType::String | ValueType::Array => {
            return Err(GgufError::InvalidValueType {
                offset: u64_of(cur.pos()),
                type_id: ty as u32,
            });
        }
    })
}

/// Read a value type id (an `i32` in the file; negative ids are invalid).
pub(crate) fn read_value_type(cur: &mut Cursor<'_>) -> Result<ValueType, GgufError> {
    let offset = u64_of(cur.pos());
    let id = cur.u32()?;
    ValueType::from_u32(id).ok_or(GgufError::InvalidValueType {
        offset,
        type_id: id,
    })
}

/// Read a GGUF string (u64 length + bytes), checking the length against the
/// bytes left.
pub(crate) fn read_str<'a>(cur: &mut Cursor<'a>) -> Result<&'a [u8], GgufError> {
    let offset = u64_of(cur.pos());
    let len = cur.u64()?;
    let remaining = u64_of(cur.remaining());
    if len > remaining {
        return Err(GgufError::StringTooLong {
            offset,
            len,
            remaining,
        });
    }
    cur.take(len)
}

/// Read one value of type `ty` at the cursor, validating it completely
/// (string and array lengths, element types, no nested arrays). Work is
/// linear in the bytes the value occupies.
pub(crate) fn read_value<'a>(ty: ValueType, cur: &mut Cursor<'a>) -> Result<Value<'a>, GgufError> {
    match ty {
        ValueType::String => read_str(cur).map(Value::Str),
        ValueType::Array => read_array(cur).map(Value::Array),
        _ => fixed_value(ty, cur),
    }
}

/// Read an array header and its elements.
fn read_array<'a>(cur: &mut Cursor<'a>) -> Result<Array<'a>, GgufError> {
    let offset = u64_of(cur.pos());
    let elem = read_value_type(cur)?;
    if elem == ValueType::Array {
        return Err(GgufError::NestedArray { offset });
    }
    let len = cur.u64()?;
    let remaining = u64_of(cur.remaining());
    let too_long = GgufError::ArrayTooLong {
        offset,
        len,
        remaining,
    };
    // Every element takes at least `min` bytes (a string: its u64 length).
    let min = elem.fixed_size().unwrap_or(8);
    let min_bytes = len.checked_mul(u64_of(min)).ok_or(too_long)?;
    if min_bytes > remaining {
        return Err(too_long);
    }
    // `len * min <= remaining <= usize::MAX`, so `len` fits a usize.
    let n = usize::try_from(len).map_err(|_| too_long)?;
    let start = cur.pos();
    let data = if elem == ValueType::String {
        let mut walk = *cur;
        for _ in 0..n {
            read_str(&mut walk)?;
        }
        let end = walk.pos();
        cur.take(u64_of(end - start))?
    } else {
        cur.take(min_bytes)?
    };
    Ok(Array {
        elem,
        len: n,
        data,
        offset,
    })
}

/// A metadata array: element type, count and the packed element bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Array<'a> {
    elem: ValueType,
    len: usize,
    // The elements, packed back to back (strings length-prefixed).
    data: &'a [u8],
    // Offset of the array header (its element type), for errors.
    offset: u64,
}

impl<'a> Array<'a> {
    /// Element type (never ARRAY).
    pub const fn elem_type(&self) -> ValueType {
        self.elem
    }

    /// Number of elements.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the array has no elements.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the array header (the element type id) in the file.
    pub const fn offset(&self) -> u64 {
        self.offset
    }

    /// The packed element bytes (for fixed-size types: `len * size` bytes).
    pub const fn raw(&self) -> &'a [u8] {
        self.data
    }

    /// All elements in order.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            elem: self.elem,
            cur: Cursor::at(self.data, 0),
            left: self.len,
        }
    }

    /// The elements of a STRING array as raw bytes; `WrongType` for another
    /// element type.
    pub fn str_iter(&self) -> Result<StrIter<'a>, GgufError> {
        self.expect(ValueType::String)?;
        Ok(StrIter {
            cur: Cursor::at(self.data, 0),
            left: self.len,
        })
    }

    /// Element `i` of an integer array, if it fits an `i32` losslessly (O(1)).
    /// `Ok(None)` if `i >= len`; `WrongType` if the elements are not integers;
    /// `ValueOutOfRange` if the element does not fit.
    pub fn get_i32(&self, i: usize) -> Result<Option<i32>, GgufError> {
        if !self.elem.is_integer() {
            return Err(self.wrong(ValueType::I32));
        }
        let Some(v) = self.fixed(i) else {
            return Ok(None);
        };
        let v = v.as_i128().ok_or(self.wrong(ValueType::I32))?;
        i32::try_from(v)
            .map(Some)
            .map_err(|_| GgufError::ValueOutOfRange {
                offset: self.offset,
            })
    }

    /// Element `i` of a FLOAT32 array (O(1)). `Ok(None)` if `i >= len`;
    /// `WrongType` for another element type.
    pub fn get_f32(&self, i: usize) -> Result<Option<F32>, GgufError> {
        self.expect(ValueType::F32)?;
        let Some(at) = i.checked_mul(4) else {
            return Ok(None);
        };
        Ok(le_u32_at(self.data, at)
            .filter(|_| i < self.len)
            .map(F32::from_bits))
    }

    /// Fixed-size element `i`, if in range.
    fn fixed(&self, i: usize) -> Option<Value<'a>> {
        let size = self.elem.fixed_size()?;
        if i >= self.len {
            return None;
        }
        let mut cur = Cursor::at(self.data, i.checked_mul(size)?);
        fixed_value(self.elem, &mut cur).ok()
    }

    fn wrong(&self, expected: ValueType) -> GgufError {
        GgufError::WrongType {
            offset: self.offset,
            expected,
            found: self.elem,
        }
    }

    fn expect(&self, ty: ValueType) -> Result<(), GgufError> {
        if self.elem == ty {
            Ok(())
        } else {
            Err(self.wrong(ty))
        }
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;
    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// Iterator over the elements of an [`Array`].
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    elem: ValueType,
    cur: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;
    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The array was validated when the file was parsed, so this read
        // cannot fail; if it did, the iteration just ends.
        let v = read_value(self.elem, &mut self.cur).ok();
        if v.is_none() {
            self.left = 0;
        }
        v
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// Iterator over the elements of a STRING [`Array`], as raw bytes.
#[derive(Clone, Debug)]
pub struct StrIter<'a> {
    cur: Cursor<'a>,
    left: usize,
}

impl<'a> Iterator for StrIter<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let s = read_str(&mut self.cur).ok();
        if s.is_none() {
            self.left = 0;
        }
        s
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for StrIter<'_> {}
