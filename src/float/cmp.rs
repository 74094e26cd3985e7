//! Comparisons, min and max.
//!
//! `==` on [`F32`] (the derived `PartialEq`) compares **bits**: the crate's
//! tests are about bit identity. IEEE comparisons are the methods here.

#![forbid(unsafe_code)]

use super::F32;
use core::cmp::Ordering;

impl F32 {
    /// IEEE comparison: `None` if either is NaN, `-0 == +0`.
    #[inline]
    pub fn partial_cmp(self, other: F32) -> Option<Ordering> {
        if self.is_nan() || other.is_nan() {
            return None;
        }
        if self.is_zero() && other.is_zero() {
            return Some(Ordering::Equal);
        }
        Some(self.total_order_key().cmp(&other.total_order_key()))
    }

    /// IEEE-754 `totalOrder`: -NaN < -∞ < … < -0 < +0 < … < +∞ < +NaN.
    #[inline]
    pub fn total_cmp(self, other: F32) -> Ordering {
        self.total_order_key().cmp(&other.total_order_key())
    }

    /// Bits mapped to an `i32` whose order is `totalOrder`.
    #[inline]
    fn total_order_key(self) -> i32 {
        let b = self.0 as i32;
        b ^ ((((b >> 31) as u32) >> 1) as i32)
    }

    /// IEEE equality (`NaN != NaN`, `-0 == +0`).
    #[inline]
    pub fn ieee_eq(self, other: F32) -> bool {
        self.partial_cmp(other) == Some(Ordering::Equal)
    }

    /// IEEE `<`.
    #[inline]
    pub fn lt(self, other: F32) -> bool {
        self.partial_cmp(other) == Some(Ordering::Less)
    }

    /// IEEE `<=`.
    #[inline]
    pub fn le(self, other: F32) -> bool {
        matches!(
            self.partial_cmp(other),
            Some(Ordering::Less | Ordering::Equal)
        )
    }

    /// IEEE `>`.
    #[inline]
    pub fn gt(self, other: F32) -> bool {
        other.lt(self)
    }

    /// IEEE `>=`.
    #[inline]
    pub fn ge(self, other: F32) -> bool {
        other.le(self)
    }

    /// IEEE 754-2019 `minimumNumber`: a NaN operand is ignored (NaN only if
    /// both are NaN, then the canonical NaN); `-0` counts as less than `+0`.
    #[inline]
    pub fn min(self, other: F32) -> F32 {
        match (self.is_nan(), other.is_nan()) {
            (true, true) => F32::NAN,
            (true, false) => other,
            (false, true) => self,
            _ => {
                if self.total_cmp(other) == Ordering::Greater {
                    other
                } else {
                    self
                }
            }
        }
    }

    /// IEEE 754-2019 `maximumNumber`: a NaN operand is ignored (NaN only if
    /// both are NaN, then the canonical NaN); `+0` counts as greater than `-0`.
    #[inline]
    pub fn max(self, other: F32) -> F32 {
        match (self.is_nan(), other.is_nan()) {
            (true, true) => F32::NAN,
            (true, false) => other,
            (false, true) => self,
            _ => {
                if self.total_cmp(other) == Ordering::Less {
                    other
                } else {
                    self
                }
            }
        }
    }
}
