//! x (n), w (n) -> out (n): `out_i = (x_i · (1 / sqrt(Σx²/n + eps))) · w_i`.
//!
//! Order: `ss = +0; ss = ss + x_i·x_i` left to right (soft f32, two roundings
//! per element); `mean = ss / n`; `scale = 1 / sqrt(mean + eps)`;
//! `out_i = (x_i · scale) · w_i`. llama.cpp sums the f32 squares in a double;
//! this profile keeps the sum in f32 so no wider float type is needed.

use super::check_len;
use crate::float::{add_same_sign_try, mul_try, mul_zero_try, sum_left_to_right};
use crate::{F32, Result};

/// RMS normalisation of one row (see the module docs for the exact order).
/// Runs `rmsnorm_body` compiled for the CPU's SIMD where there is such a
/// build ([`crate::simd`]; the same code, the same bits).
pub fn rmsnorm(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()> {
    rmsnorm_builds::best(x, w, eps, out)
}

/// RMS normalisation of each row of `x` (rows of `w.len()`) into `out`:
/// per row exactly [`rmsnorm`] (the same bits).
pub fn rmsnorm_rows(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()> {
    rmsnorm_rows_builds::best(x, w, eps, out)
}

crate::simd::multiversion! {
    /// Builds of [`rmsnorm_body`].
    mod rmsnorm_builds = rmsnorm_body(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()>;
}

crate::simd::multiversion! {
    /// Builds of [`rmsnorm_rows_body`].
    mod rmsnorm_rows_builds = rmsnorm_rows_body(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()>;
}

/// The portable body of [`rmsnorm`]. The products go through
/// [`mul_try`] (the squares) and [`mul_zero_try`] (the scaling: norm
/// weights hold exact zeros, Gemma 3's among them) in branch-free loops
/// (which vectorize); a row with any other operand or result outside the
/// normal range is redone with `*`. The sum
/// of squares stays one fixed-order chain ([`sum_left_to_right`]).
#[inline(always)]
pub(crate) fn rmsnorm_body(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()> {
    let n = x.len();
    check_len(n, w.len())?;
    check_len(n, out.len())?;
    squares(x, out);
    let ss = sum_left_to_right(out);
    scale_row(x, w, eps, ss, out);
    Ok(())
}

/// The portable body of [`rmsnorm_rows`]: per row exactly [`rmsnorm_body`]
/// (the same operations in the same order), with the sums of squares of up
/// to [`LANES`] rows at a time stepped together, one row per lane
/// ([`sums_in_lanes`]): one row's chain is a few dependent integer
/// operations per element, which lanes run side by side. A row whose chain
/// leaves the fast path is summed again alone by [`sum_left_to_right`].
#[inline(always)]
pub(crate) fn rmsnorm_rows_body(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()> {
    let d = w.len();
    check_len(x.len(), out.len())?;
    if d == 0 || !x.len().is_multiple_of(d) {
        return check_len(d, x.len());
    }
    let group = LANES * d;
    for (xg, og) in x.chunks(group).zip(out.chunks_mut(group)) {
        if xg.len() == d {
            rmsnorm_body(xg, w, eps, og)?;
            continue;
        }
        for (xr, or) in xg.chunks_exact(d).zip(og.chunks_exact_mut(d)) {
            squares(xr, or);
        }
        let (sums, fast) = sums_in_lanes(og, d);
        for (l, (xr, or)) in xg.chunks_exact(d).zip(og.chunks_exact_mut(d)).enumerate() {
            let ss = if fast[l] {
                sums[l]
            } else {
                sum_left_to_right(or)
            };
            scale_row(xr, w, eps, ss, or);
        }
    }
    Ok(())
}

/// Rows whose sums of squares [`sums_in_lanes`] steps together.
const LANES: usize = 16;

/// `sum_left_to_right` of each row of `sq` (up to [`LANES`] rows of `d`
/// non-negative terms), all rows stepping together, one per lane: the
/// first term, then each next one by [`add_same_sign_try`] (the same bits
/// as `+` while both are positive normals). Returns the sums and, per row,
/// whether every step took that path and the first term was a normal
/// (`0 + t = t`); a row without it must be summed again. The terms go
/// through a local square of [`LANES`] columns by [`LANES`] rows so that
/// the lanes read side by side.
#[inline(always)]
fn sums_in_lanes(sq: &[F32], d: usize) -> ([F32; LANES], [bool; LANES]) {
    let mut sums = [F32::ONE; LANES];
    let mut fast = [true; LANES];
    let mut cols = [[F32::ONE; LANES]; LANES];
    for j0 in (0..d).step_by(LANES) {
        let width = LANES.min(d - j0);
        for (l, row) in sq.chunks_exact(d).take(LANES).enumerate() {
            for (col, &t) in cols.iter_mut().zip(&row[j0..j0 + width]) {
                col[l] = t;
            }
        }
        for (k, col) in cols.iter().enumerate().take(width) {
            if j0 + k == 0 {
                sums = *col;
                for (f, t) in fast.iter_mut().zip(col) {
                    *f = (0x0080_0000..0x7F80_0000).contains(&t.to_bits());
                }
                continue;
            }
            for ((s, f), &t) in sums.iter_mut().zip(fast.iter_mut()).zip(col) {
                let (r, ok) = add_same_sign_try(*s, t);
                *s = r;
                *f &= ok;
            }
        }
    }
    (sums, fast)
}

/// `out_i = x_i · x_i` (equal lengths).
#[inline(always)]
fn squares(x: &[F32], out: &mut [F32]) {
    let mut ok = true;
    for (o, &v) in out.iter_mut().zip(x) {
        let (p, k) = mul_try(v, v);
        *o = p;
        ok &= k;
    }
    if !ok {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v * v;
        }
    }
}

/// `out_i = (x_i · scale) · w_i` with `scale = 1 / sqrt(ss / n + eps)`;
/// a zero `x_i` or `w_i` keeps the fast path ([`mul_zero_try`]).
#[inline(always)]
fn scale_row(x: &[F32], w: &[F32], eps: F32, ss: F32, out: &mut [F32]) {
    let mean = ss / F32::from_u32(x.len() as u32);
    let scale = F32::ONE / (mean + eps).sqrt();
    let mut ok = true;
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        let (t, k1) = mul_zero_try(v, scale);
        let (p, k2) = mul_zero_try(t, g);
        *o = p;
        ok &= k1 & k2;
    }
    if !ok {
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = (v * scale) * g;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Signature of the row bodies and their builds.
    type RowsFn = rmsnorm_rows_builds::Build;

    /// The original element-by-element formula.
    fn reference(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) {
        let mut ss = F32::ZERO;
        for &v in x {
            ss = ss + v * v;
        }
        let scale = F32::ONE / (ss / F32::from_u32(x.len() as u32) + eps).sqrt();
        for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
            *o = (v * scale) * g;
        }
    }

    /// [`rmsnorm_body`] and every SIMD build of it the CPU runs equal the
    /// element-by-element formula, on rows of moderate values, rows of
    /// moderate values and signed zeros (the fast path), and rows with
    /// zeros, subnormals, huge values, ±∞ and NaN (the fallback).
    #[test]
    fn builds_equal_reference() {
        let simd = rmsnorm_builds::builds();
        let mut next = crate::testutil::lcg(0x2545_F491_4F6C_DD1Du64);
        const N: usize = 200;
        for round in 0..300 {
            let n = 1 + round % N;
            let val = |next: &mut dyn FnMut() -> u32| {
                let r = next();
                F32::from_bits(match (round % 5, r % 64) {
                    (0, 0) => 0,
                    (0, 1) => r & 0x807F_FFFF,                 // subnormal
                    (0, 2) => 0x7F80_0000 | (r & 0x8000_0000), // ±∞
                    (0, 3) => 0x7FC0_0000,
                    (1, _) => r, // any bits
                    (2, _) => (r & 0x8000_0000) | (0x6000_0000 + r % 0x0800_0000), // huge
                    (3, _) => (r & 0x8000_0000) | (0x1800_0000 + r % 0x0800_0000), // tiny
                    (4, 0..3) => r & 0x8000_0000, // ±0 among moderate values
                    _ => (r & 0x8000_0000) | (0x3C00_0000 + r % 0x0700_0000),
                })
            };
            let x: [F32; N] = core::array::from_fn(|_| val(&mut next));
            let w: [F32; N] = core::array::from_fn(|_| val(&mut next));
            let eps = F32::from_bits(0x3727_C5AC); // 1e-5
            let mut want = [F32::ZERO; N];
            reference(&x[..n], &w[..n], eps, &mut want[..n]);
            let mut got = [F32::ZERO; N];
            rmsnorm_body(&x[..n], &w[..n], eps, &mut got[..n]).unwrap();
            assert!(
                got.map(F32::to_bits) == want.map(F32::to_bits),
                "round {round}"
            );
            for f in simd.iter().flatten() {
                let mut got = [F32::ZERO; N];
                f(&x[..n], &w[..n], eps, &mut got[..n]).unwrap();
                assert!(
                    got.map(F32::to_bits) == want.map(F32::to_bits),
                    "round {round}"
                );
            }
        }
    }

    /// [`rmsnorm_rows_body`] and every SIMD build of it equal the formula
    /// row by row, for 0 to 35 rows (whole and partial groups of
    /// [`LANES`], a single row), rows that overflow to ∞ part-way
    /// (huge values), and rows whose squares straddle the smallest normal,
    /// with the same kinds of values as above, and reject a length that is
    /// not a whole number of rows.
    #[test]
    fn rows_builds_equal_reference() {
        let simd = rmsnorm_rows_builds::builds();
        let mut builds: [Option<RowsFn>; 3] = [Some(rmsnorm_rows_body), None, None];
        for (slot, f) in builds[1..].iter_mut().zip(simd) {
            *slot = f;
        }
        let mut next = crate::testutil::lcg(0x9E37_79B9_7F4A_7C15u64);
        const D: usize = 40;
        const R: usize = 35;
        for round in 0..600 {
            let d = 1 + round % D;
            let rows = round % (R + 1);
            let val = |next: &mut dyn FnMut() -> u32| {
                let r = next();
                F32::from_bits(match (round % 5, r % 128) {
                    (0, 0) => 0,
                    (0, 1) => r & 0x807F_FFFF,
                    (0, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                    (0, 3) => 0x7FC0_0000,
                    (1, _) => r,
                    (2, 0..4) => (r & 0x8000_0000) | (0x5E00_0000 + r % 0x0100_0000), // x² near 2^128
                    (2, 4..8) => (r & 0x8000_0000) | (0x2000_0000 + r % 0x0080_0000), // x² subnormal
                    (3, _) => (r & 0x8000_0000) | (0x1F80_0000 + r % 0x0100_0000), // x² about 2^-126
                    (4, 0..6) => r & 0x8000_0000, // ±0 among moderate values (Gemma 3's norm weights)
                    _ => (r & 0x8000_0000) | (0x3C00_0000 + r % 0x0700_0000),
                })
            };
            let x: [F32; D * R] = core::array::from_fn(|_| val(&mut next));
            let w: [F32; D] = core::array::from_fn(|_| val(&mut next));
            // 1e-5, or the smallest subnormal (so that tiny sums of squares show).
            let eps = F32::from_bits(if round % 2 == 0 { 0x3727_C5AC } else { 1 });
            let mut want = [F32::ZERO; D * R];
            for (xr, or) in x[..rows * d].chunks_exact(d).zip(want.chunks_exact_mut(d)) {
                reference(xr, &w[..d], eps, or);
            }
            for f in builds.iter().flatten() {
                let mut got = [F32::ZERO; D * R];
                f(&x[..rows * d], &w[..d], eps, &mut got[..rows * d]).unwrap();
                assert!(
                    got.map(F32::to_bits) == want.map(F32::to_bits),
                    "round {round}"
                );
                if d > 1 && rows > 0 {
                    let err = f(&x[..rows * d - 1], &w[..d], eps, &mut got[..rows * d - 1]);
                    assert!(err.is_err(), "partial row, round {round}");
                }
            }
        }
    }
}
