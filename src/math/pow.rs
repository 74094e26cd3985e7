//! `x^y` (`powf`), with correct rounding decided by a rounding test.
//!
//! Algorithm:
//! 1. Specials per C99 Annex F (F.9.4.4): `x^±0 = 1` and `1^y = 1` even for
//!    NaN, `(-1)^±inf = 1`, signed zeros and infinities by the parity of `y`,
//!    negative `x` with non-integer `y` is NaN. NaN results are canonical.
//! 2. Exact cases (the only ones that can be binary32 midpoints): with
//!    `|x| = s · 2^a` (`s` odd) and `y = n · 2^k` (`n` odd): if `s = 1` and
//!    `a·y` is an integer the result is the power of two `2^(a·y)`; otherwise
//!    square roots are taken while `y` is not an integer and `x` is an exact
//!    square (`x^y = (√x)^(2y)`), and a positive integer `y` whose power
//!    `s^y` fits in 128 bits is evaluated exactly. Every other `x^y` is
//!    irrational or has more than 25 significant bits, so it is no midpoint.
//! 3. General: `t = y · log2|x|` from the accurate logarithm (`ln x · 2^120`,
//!    relative error below 2^-89) times a Q1.127 log2(e), multiplied exactly
//!    by the 24-bit significand of `y`; `|t| >= 256` over/underflows directly;
//!    otherwise `2^t` by [`pow2_parts`] with `t`'s
//!    error bound, so the rounding tests account for it.
//!
//! Bound: the result is correctly rounded whenever the accurate rounding
//! test passes, i.e. whenever `x^y` is not within about 2^-80 relative of a
//! midpoint (the absolute error of `t` is below 2^-81 for |t| < 256). The
//! 2^64 input pairs cannot be checked exhaustively; `tests/float/pow.rs`
//! compares millions of pairs (random, special, exact, and every RoPE
//! `theta_scale = base^(-2/n_rot)`) with CORE-MATH `powf`, with no mismatch
//! (see `docs/sections/math.md`). When the test fails the approximation's
//! nearest value is returned (error below 0.5 ulp + 2^-80 relative).

#![forbid(unsafe_code)]

use super::exp2::{pow2_fast, pow2_parts};
use super::ln::{ln_fast_q120, ln_q120};
use super::mul128;
use super::tables::LOG2E_Q127;
use super::{decode, round_pack};
use crate::F32;

/// Whether a finite nonzero `y` is an integer, and if so whether odd (for
/// the sign of `pow(x, y)` with `x < 0`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parity {
    NonInteger,
    Even,
    Odd,
}

/// The [`Parity`] of the finite nonzero `y` with bits `ybits`.
fn integer_parity(ybits: u32) -> Parity {
    let (my, ey) = decode(ybits);
    if ey > 0 {
        return Parity::Even;
    }
    let frac_bits = (-ey) as u32;
    if my.trailing_zeros() < frac_bits {
        return Parity::NonInteger;
    }
    // frac_bits <= 23 here.
    if (my >> frac_bits) & 1 == 1 {
        Parity::Odd
    } else {
        Parity::Even
    }
}

/// Integer square root of `v` (floor), bit by bit.
fn isqrt(v: u32) -> u32 {
    let mut v = v;
    let mut r = 0u32;
    let mut bit = 1u32 << 30;
    while bit > v {
        bit >>= 2;
    }
    while bit != 0 {
        if v >= r + bit {
            v -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    r
}

/// Low 128 bits of the 256-bit `(ph, pl) >> s`.
fn low128_shr(ph: u128, pl: u128, s: u32) -> u128 {
    if s == 0 {
        pl
    } else if s < 128 {
        (ph << (128 - s)) | (pl >> s)
    } else if s < 256 {
        ph >> (s - 128)
    } else {
        0
    }
}

/// Whether the 256-bit `(ph, pl)` is below `2^s`.
fn below_pow2(ph: u128, pl: u128, s: u32) -> bool {
    if s >= 256 {
        true
    } else if s >= 128 {
        ph >> (s - 128) == 0
    } else {
        ph == 0 && pl >> s == 0
    }
}

/// The exact value of `|x|^y` when it is a power of two or a small exact
/// power (see the module docs), else `None`.
fn exact_pow(xabs: u32, ybits: u32) -> Option<F32> {
    let (mx, ex) = decode(xabs);
    let tz = mx.trailing_zeros();
    let (mut s, mut a) = (mx >> tz, ex + tz as i32); // |x| = s · 2^a
    let (my, ey) = decode(ybits);
    let tzy = my.trailing_zeros();
    let (n, mut k) = ((my >> tzy) as i64, ey + tzy as i32); // |y| = n · 2^k
    let y_neg = ybits >> 31 == 1;
    if s == 1 {
        // x = 2^a: x^y = 2^(a·n·2^k), exact when that exponent is an integer.
        let p = a as i64 * n; // nonzero: a = 0 means x = 1, handled earlier
        let e = if k >= 0 {
            if k > 20 {
                // |a·y| >= 2^20: far outside the finite range.
                return Some(if (p < 0) != y_neg {
                    F32::ZERO
                } else {
                    F32::INFINITY
                });
            }
            p << k
        } else {
            let sh = (-k) as u32;
            if sh >= 40 || p.trailing_zeros() < sh {
                return None;
            }
            p >> sh
        };
        let e = if y_neg { -e } else { e };
        return Some(round_pack(false, 1, e.clamp(-400, 400) as i32));
    }
    // Take exact square roots while y is not an integer.
    while k < 0 && a % 2 == 0 && s & 7 == 1 {
        // (odd squares are 1 mod 8)
        let r = isqrt(s);
        if r * r != s {
            break;
        }
        s = r;
        a /= 2;
        k += 1;
    }
    if k < 0 || y_neg || k > 7 {
        return None; // irrational, not dyadic, or s^y >= 3^128 > 2^128
    }
    let e = n << k; // the integer y, at most 2^24 · 2^7
    let mut v: u128 = 1;
    let mut i = 0;
    while i < e {
        v = v.checked_mul(s as u128)?;
        i += 1;
    }
    Some(round_pack(false, v, (a as i64 * e).clamp(-400, 400) as i32))
}

/// `t = y · log2|x|` as `(k, f, err)`: `t = k + f` with `f` in `[0, 1)` as
/// Q0.128, `err` bounding `t`'s error in units of 2^-128 (which also bounds
/// the relative error of `2^t` in units of 2^-127); `Err(r)` when
/// `|t| >= 256`, `r` being the over/underflowed magnitude. `l` is
/// `ln|x| · 2^120` within `l_err` units.
fn y_log2_x_parts(l: i128, l_err: u128, yb: u32) -> Result<(i32, u128, u128), F32> {
    let l_mag = l.unsigned_abs();
    let lg = mul128(l_mag, LOG2E_Q127); // |log2 x| · 2^119
    // t = P · 2^-n with P = lg · my a 256-bit (ph, pl).
    let (my, ey) = decode(yb);
    let lo = (lg as u64 as u128) * my as u128;
    let hi = (lg >> 64) * my as u128 + (lo >> 64);
    let pl = (hi << 64) | (lo as u64 as u128);
    let ph = hi >> 64;
    let n = (119 - ey) as u32; // in [15, 268]
    let t_neg = (l < 0) != (yb >> 31 == 1);
    if !below_pow2(ph, pl, n + 8) {
        // |t| >= 256: far beyond the binary32 range either way.
        return Err(if t_neg { F32::ZERO } else { F32::INFINITY });
    }
    let int = low128_shr(ph, pl, n) as i32; // < 256
    let frac = if n >= 128 {
        low128_shr(ph, pl, n - 128)
    } else {
        pl << (128 - n)
    };
    // |y| · (l_err + 2) · 2^-119 in units of 2^-128, plus the truncations.
    let base_err = my as u128 * (l_err + 2);
    let t_err = if n <= 128 {
        let up = 128 - n;
        if base_err.leading_zeros() > up {
            base_err << up
        } else {
            u128::MAX >> 1
        }
    } else {
        base_err.checked_shr(n - 128).unwrap_or(0)
    } + 4;
    Ok(if !t_neg {
        (int, frac, t_err)
    } else if frac == 0 {
        (-int, 0, t_err)
    } else {
        (-int - 1, frac.wrapping_neg(), t_err)
    })
}

impl F32 {
    /// `x^y` (C99 `powf`), correctly rounded (ties to even) except possibly
    /// for results within about 2^-80 relative of a rounding boundary (none
    /// found; see the module docs). NaN results are canonical.
    pub fn powf(self, y: F32) -> F32 {
        let (xb, yb) = (self.to_bits(), y.to_bits());
        let (xa, ya) = (xb & 0x7FFF_FFFF, yb & 0x7FFF_FFFF);
        if ya == 0 || xb == 0x3F80_0000 {
            return F32::ONE;
        }
        if xa > 0x7F80_0000 || ya > 0x7F80_0000 {
            return F32::NAN;
        }
        let x_neg = xb >> 31 == 1;
        let y_neg = yb >> 31 == 1;
        if ya == 0x7F80_0000 {
            if xa == 0x3F80_0000 {
                return F32::ONE; // (-1)^±inf
            }
            let big = xa > 0x3F80_0000;
            return if big != y_neg {
                F32::INFINITY
            } else {
                F32::ZERO
            };
        }
        let kind = integer_parity(yb);
        let res_neg = x_neg && kind == Parity::Odd;
        let sign = |v: F32| if res_neg { -v } else { v };
        if xa == 0 || xa == 0x7F80_0000 {
            // 0^y is 0 for y > 0 and inf for y < 0; inf^y the other way round.
            let huge = (xa == 0) == y_neg;
            return sign(if huge { F32::INFINITY } else { F32::ZERO });
        }
        if x_neg && kind == Parity::NonInteger {
            return F32::NAN;
        }
        if xa == 0x3F80_0000 {
            return sign(F32::ONE);
        }
        if let Some(v) = exact_pow(xa, yb) {
            return sign(v);
        }
        // Fast: ln|x| to 2^-57 relative; accurate: to 2^-89.
        let fast = ln_fast_q120(xa);
        let (k, f, t_err) = match y_log2_x_parts(fast, (fast.unsigned_abs() >> 57) + 512, yb) {
            Ok(t) => t,
            Err(v) => return sign(v),
        };
        if let Some(v) = pow2_fast(k, f, t_err) {
            return sign(v);
        }
        let acc = ln_q120(xa);
        let (k, f, t_err) = match y_log2_x_parts(acc, (acc.unsigned_abs() >> 89) + 512, yb) {
            Ok(t) => t,
            Err(v) => return sign(v),
        };
        sign(pow2_parts(k, f, t_err))
    }
}
