//! `Display` and `Debug` for [`F32`], in integer arithmetic only.
//!
//! Algorithm: a finite non-zero value is `m · 2^e` exactly (`m < 2^24`). For
//! `e >= 0` that is an integer below 2^128; for `e < 0` it is
//! `(m · 5^-e) · 10^e`, whose integer part `m · 5^-e` (at most 371 bits) is
//! held in a fixed 12-limb big number. Dividing that integer by 10 until it
//! has at most nine digits, remembering the last dropped digit and whether
//! any earlier one was non-zero, gives the value **correctly rounded to nine
//! significant digits** (ties to even). Nine digits always identify a
//! binary32 uniquely, so the printed text parses back to the same bits; it
//! is not always the shortest such text (0.1 prints as `0.100000001`).
//! Trailing zeros are dropped.
//!
//! Layout: plain notation for decimal exponents -5..=16 (`0.000123`,
//! `16777216`), scientific otherwise (`1.17549435e-38`). Specials print as
//! `NaN`, `inf`, `-inf`, `0`, `-0`. Width and alignment flags are honoured
//! (`Formatter::pad`); a precision flag is ignored.

#![forbid(unsafe_code)]

use super::F32;
use core::fmt;

/// Limbs of the big number: 12 × 32 = 384 bits ≥ 24 + 149·log2(5) ≈ 370.
const LIMBS: usize = 12;
/// 10^9: the first integer with ten digits.
const TEN_POW_9: u32 = 1_000_000_000;
/// 5^13, the largest power of five below 2^32.
const FIVE_POW_13: u32 = 1_220_703_125;

/// An unsigned integer in little-endian `u32` limbs.
struct Big([u32; LIMBS]);

impl Big {
    fn from_u128(v: u128) -> Big {
        let mut l = [0u32; LIMBS];
        for (i, limb) in l.iter_mut().take(4).enumerate() {
            *limb = (v >> (32 * i)) as u32;
        }
        Big(l)
    }

    /// `self *= k` (the caller keeps the product below 2^384).
    fn mul_small(&mut self, k: u32) {
        let mut carry = 0u64;
        for limb in self.0.iter_mut() {
            let p = *limb as u64 * k as u64 + carry;
            *limb = p as u32;
            carry = p >> 32;
        }
    }

    /// `self /= k`, returning the remainder.
    fn div_small(&mut self, k: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.0.iter_mut().rev() {
            let cur = (rem << 32) | *limb as u64;
            *limb = (cur / k as u64) as u32;
            rem = cur % k as u64;
        }
        rem as u32
    }

    /// The value if it is below 10^9.
    fn small(&self) -> Option<u32> {
        let (low, high) = self.0.split_first()?;
        (high.iter().all(|&l| l == 0) && *low < TEN_POW_9).then_some(*low)
    }
}

/// `(digits, exp10)` with `value = digits · 10^exp10`, `digits` of at most
/// nine decimal digits without trailing zeros, correctly rounded (ties to
/// even). `bits` must be finite and non-zero (sign ignored).
fn nine_digits(bits: u32) -> (u32, i32) {
    let biased = ((bits >> 23) & 0xFF) as i32;
    let frac = bits & 0x7F_FFFF;
    let (m, e2) = if biased == 0 {
        (frac, -149)
    } else {
        (frac | 0x80_0000, biased - 150)
    };
    let (mut n, mut exp10) = if e2 >= 0 {
        (Big::from_u128((m as u128) << e2), 0)
    } else {
        let mut n = Big::from_u128(m as u128);
        let mut k = -e2;
        while k >= 13 {
            n.mul_small(FIVE_POW_13);
            k -= 13;
        }
        let mut p = 1u32;
        for _ in 0..k {
            p *= 5;
        }
        n.mul_small(p);
        (n, e2)
    };
    // Drop digits until nine remain; `last` is the most recent dropped digit.
    let (mut last, mut sticky) = (0u32, false);
    let mut q = loop {
        if let Some(q) = n.small() {
            break q;
        }
        sticky |= last != 0;
        last = n.div_small(10);
        exp10 += 1;
    };
    if last > 5 || (last == 5 && (sticky || q & 1 == 1)) {
        q += 1;
        if q == TEN_POW_9 {
            q /= 10;
            exp10 += 1;
        }
    }
    while q % 10 == 0 {
        q /= 10;
        exp10 += 1;
    }
    (q, exp10)
}

/// A small stack buffer for one formatted number.
struct Buf {
    bytes: [u8; 48],
    len: usize,
}

impl Buf {
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    fn push_str(&mut self, s: &[u8]) {
        for &b in s {
            self.push(b);
        }
    }
    fn as_str(&self) -> Result<&str, fmt::Error> {
        let used = self.bytes.get(..self.len).ok_or(fmt::Error)?;
        core::str::from_utf8(used).map_err(|_| fmt::Error)
    }
}

/// Writes the decimal text of `x` into `buf`.
fn write_decimal(x: F32, buf: &mut Buf) {
    let bits = x.to_bits();
    if x.is_nan() {
        return buf.push_str(b"NaN");
    }
    if bits & 0x8000_0000 != 0 {
        buf.push(b'-');
    }
    if x.is_infinite() {
        return buf.push_str(b"inf");
    }
    if x.is_zero() {
        return buf.push(b'0');
    }
    let (q, exp10) = nine_digits(bits);
    // Decimal digits of q, most significant first.
    let mut digits = [0u8; 9];
    let mut n = 0usize;
    let mut v = q;
    while v > 0 && n < digits.len() {
        digits[n] = b'0' + (v % 10) as u8;
        v /= 10;
        n += 1;
    }
    let d = digits.get(..n).unwrap_or(&[]);
    let mut d_rev = [0u8; 9];
    for (dst, src) in d_rev.iter_mut().zip(d.iter().rev()) {
        *dst = *src;
    }
    let d = d_rev.get(..n).unwrap_or(&[]);
    let sci = exp10 + n as i32 - 1; // value = d.ddd × 10^sci
    if (-5..=16).contains(&sci) {
        if exp10 >= 0 {
            buf.push_str(d);
            for _ in 0..exp10 {
                buf.push(b'0');
            }
        } else if sci >= 0 {
            let (int, frac) = d.split_at((sci + 1) as usize);
            buf.push_str(int);
            buf.push(b'.');
            buf.push_str(frac);
        } else {
            buf.push_str(b"0.");
            for _ in 0..(-sci - 1) {
                buf.push(b'0');
            }
            buf.push_str(d);
        }
    } else {
        let (first, rest) = d.split_at(1);
        buf.push_str(first);
        if !rest.is_empty() {
            buf.push(b'.');
            buf.push_str(rest);
        }
        buf.push(b'e');
        if sci < 0 {
            buf.push(b'-');
        }
        let mut e = sci.unsigned_abs();
        let mut tmp = [0u8; 3];
        let mut k = 0;
        loop {
            if let Some(t) = tmp.get_mut(k) {
                *t = b'0' + (e % 10) as u8;
            }
            e /= 10;
            k += 1;
            if e == 0 || k == tmp.len() {
                break;
            }
        }
        for t in tmp.iter().take(k).rev() {
            buf.push(*t);
        }
    }
}

impl fmt::Display for F32 {
    /// The value, correctly rounded to nine significant digits (see the
    /// module docs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = Buf {
            bytes: [0; 48],
            len: 0,
        };
        write_decimal(*self, &mut buf);
        f.pad(buf.as_str()?)
    }
}

impl fmt::Debug for F32 {
    /// `F32(<value>, <bits>)`, e.g. `F32(0.100000001, 0x3dcccccd)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "F32({}, {:#010x})", self, self.0)
    }
}
