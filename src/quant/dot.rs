//! Exact row dot products, portable scalar code (the reference every fast
//! path is tested equal to).
//!
//! Every term is `integer × 2^k` with `k ≥ -48`; terms are summed exactly in
//! an `i128` in units of 2^-48 ([`ExactAcc`]) and rounded once. Per 32-block
//! `b` of weight row `x` and Q8 activation row `y` (f16 scales `dx`, `mx`,
//! `dy`, `sy`, block integer sums exact in `i32`):
//!
//! | weight | block term |
//! |---|---|
//! | Q4_0 | `dx·dy·Σ (q-8)·y` |
//! | Q4_1 | `dx·dy·Σ q·y + mx·sy` (llama.cpp's `m·s` form) |
//! | Q5_0 | `dx·dy·Σ (q-16)·y` |
//! | Q5_1 | `dx·dy·Σ q·y + mx·sy` |
//! | Q8_0 | `dx·dy·Σ qx·qy` |
//! | Q4_K | `d·dy·sc_j·Σ q·y − dmin·dy·mn_j·Σ y` per 32-sub-block `j` |
//! | Q5_K | as Q4_K, `q` 5-bit |
//! | Q6_K | `d·dy·(sc_2j·Σ_16 q·y + sc_2j+1·Σ_16 q·y)` |
//!
//! F16 weights: `Σ w_i·x_i` with `x_i` rounded to f16, exact ([`F16Acc`]).
//! F32/BF16 weights: fixed-order soft f32, `acc = +0; acc = acc + w_i·x_i`
//! left to right, two roundings per element ([`dot_f32_soft`]).

#![forbid(unsafe_code)]

use super::GgmlType;
use super::act::{ActRow, FLAG_D_NONFINITE, FLAG_S_NONFINITE};
use super::block::{
    BlockQ4_0, BlockQ4_1, BlockQ4_K, BlockQ5_0, BlockQ5_1, BlockQ5_K, BlockQ6_K, BlockQ8_0, QK,
    blocks,
};
use super::dequant::q5_pair;
use super::fixed::{ExactAcc, f16_fixed, f16_nonfinite};
use crate::{Error, F32, Result};

/// `Σ_j (qs[j] & 15)·y[j] + (qs[j] >> 4)·y[j+16]`.
#[inline(always)]
pub(crate) fn nib_dot(qs: &[u8; 16], y: &[i8]) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += (qs[j] & 15) as i32 * y[j] as i32 + (qs[j] >> 4) as i32 * y[j + 16] as i32;
    }
    s
}

/// `Σ_j x[j]·y[j]` over 32 `i8`.
#[inline(always)]
pub(crate) fn i8_dot(x: &[i8; 32], y: &[i8]) -> i32 {
    let mut s = 0i32;
    for j in 0..32 {
        s += x[j] as i32 * y[j] as i32;
    }
    s
}

/// Exact dot of one weight row (`data`, type `ty`, `n` elements) with one
/// activation row of the matching [`super::ActKind`].
pub fn dot_row(ty: GgmlType, data: &[u8], y: &ActRow<'_>, n: usize) -> Result<F32> {
    let need = ty.row_bytes(n)?;
    if data.len() != need {
        return Err(Error::ShapeMismatch {
            expected: need,
            found: data.len(),
        });
    }
    let bad = |len: usize| Error::ShapeMismatch {
        expected: n,
        found: len,
    };
    match ty {
        GgmlType::F32 | GgmlType::BF16 => {
            if y.f.len() != n {
                return Err(bad(y.f.len()));
            }
            return Ok(dot_f32_soft(ty, data, y.f));
        }
        GgmlType::F16 => {
            if y.h.len() != n {
                return Err(bad(y.h.len()));
            }
            let mut fa = F16Acc::default();
            for (c, &x) in data.chunks_exact(2).zip(y.h) {
                fa.push(u16::from_le_bytes([c[0], c[1]]), x);
            }
            return Ok(fa.finish());
        }
        _ => {}
    }
    if y.qs.len() != n || y.sc.len() * QK != n {
        return Err(bad(y.qs.len()));
    }
    let d_bad = y.flags & FLAG_D_NONFINITE != 0;
    let s_bad = y.flags & FLAG_S_NONFINITE != 0;
    let acc = match ty {
        GgmlType::Q4_0 => dot_q4_0(blocks(data)?, y, d_bad),
        GgmlType::Q4_1 => dot_q4_1(blocks(data)?, y, d_bad | s_bad),
        GgmlType::Q5_0 => dot_q5_0(blocks(data)?, y, d_bad),
        GgmlType::Q5_1 => dot_q5_1(blocks(data)?, y, d_bad | s_bad),
        GgmlType::Q8_0 => dot_q8_0(blocks(data)?, y, d_bad),
        GgmlType::Q4_K => dot_scale_min_k::<BlockQ4_K>(blocks(data)?, y, d_bad),
        GgmlType::Q5_K => dot_scale_min_k::<BlockQ5_K>(blocks(data)?, y, d_bad),
        GgmlType::Q6_K => dot_q6_k(blocks(data)?, y, d_bad),
        GgmlType::F32 | GgmlType::BF16 | GgmlType::F16 | GgmlType::Q8_1 => {
            return Err(Error::UnsupportedType {
                ggml_type: ty as u32,
            });
        }
    };
    Ok(acc.finish())
}

/// The per-block terms of a Q4_0 row (module docs' table), summed exactly;
/// `nonfinite` starts as the activation row's flag.
#[inline(always)]
fn dot_q4_0(bs: &[BlockQ4_0], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    for ((b, yq), s) in bs.iter().zip(y.qs.chunks_exact(QK)).zip(y.sc) {
        let sumi = nib_dot(&b.qs, yq) - 8 * s.bsum;
        let (dm, dsh) = f16_fixed(b.d());
        acc.nonfinite |= f16_nonfinite(b.d());
        acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
    }
    acc
}

/// [`dot_q4_0`] for Q4_1 (with the `m·s` term).
#[inline(always)]
fn dot_q4_1(bs: &[BlockQ4_1], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    for ((b, yq), s) in bs.iter().zip(y.qs.chunks_exact(QK)).zip(y.sc) {
        let sumi = nib_dot(&b.qs, yq);
        let (dm, dsh) = f16_fixed(b.d());
        let (mm, msh) = f16_fixed(b.m());
        acc.nonfinite |= f16_nonfinite(b.d()) | f16_nonfinite(b.m());
        acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        acc.add_shifted((mm * s.sm) as i64, msh + s.ssh);
    }
    acc
}

/// [`dot_q4_0`] for Q5_0.
#[inline(always)]
fn dot_q5_0(bs: &[BlockQ5_0], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    for ((b, yq), s) in bs.iter().zip(y.qs.chunks_exact(QK)).zip(y.sc) {
        let qh = b.qh();
        let mut sumi = 0i32;
        for j in 0..16 {
            let (lo, hi) = q5_pair(b.qs[j], qh, j);
            sumi += (lo - 16) * yq[j] as i32 + (hi - 16) * yq[j + 16] as i32;
        }
        let (dm, dsh) = f16_fixed(b.d());
        acc.nonfinite |= f16_nonfinite(b.d());
        acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
    }
    acc
}

/// [`dot_q4_0`] for Q5_1 (with the `m·s` term).
#[inline(always)]
fn dot_q5_1(bs: &[BlockQ5_1], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    for ((b, yq), s) in bs.iter().zip(y.qs.chunks_exact(QK)).zip(y.sc) {
        let qh = b.qh();
        let mut sumi = 0i32;
        for j in 0..16 {
            let (lo, hi) = q5_pair(b.qs[j], qh, j);
            sumi += lo * yq[j] as i32 + hi * yq[j + 16] as i32;
        }
        let (dm, dsh) = f16_fixed(b.d());
        let (mm, msh) = f16_fixed(b.m());
        acc.nonfinite |= f16_nonfinite(b.d()) | f16_nonfinite(b.m());
        acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        acc.add_shifted((mm * s.sm) as i64, msh + s.ssh);
    }
    acc
}

/// [`dot_q4_0`] for Q8_0.
#[inline(always)]
fn dot_q8_0(bs: &[BlockQ8_0], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    for ((b, yq), s) in bs.iter().zip(y.qs.chunks_exact(QK)).zip(y.sc) {
        let sumi = i8_dot(&b.qs, yq);
        let (dm, dsh) = f16_fixed(b.d());
        acc.nonfinite |= f16_nonfinite(b.d());
        acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
    }
    acc
}

/// A super-block of 8 sub-blocks of 32 with a 6-bit scale and min each,
/// `y = d·sc·q − dmin·mn` (Q4_K, Q5_K: they differ only in the quant's bits).
trait ScaleMinSuperBlock {
    fn d(&self) -> u16;
    fn dmin(&self) -> u16;
    fn scale_min(&self, j: usize) -> (u8, u8);
    fn q(&self, i: usize) -> u8;
}

macro_rules! scale_min_super_block {
    ($($ty:ty),*) => {$(
        impl ScaleMinSuperBlock for $ty {
            #[inline(always)]
            fn d(&self) -> u16 { <$ty>::d(self) }
            #[inline(always)]
            fn dmin(&self) -> u16 { <$ty>::dmin(self) }
            #[inline(always)]
            fn scale_min(&self, j: usize) -> (u8, u8) { <$ty>::scale_min(self, j) }
            #[inline(always)]
            fn q(&self, i: usize) -> u8 { <$ty>::q(self, i) }
        }
    )*};
}
scale_min_super_block!(BlockQ4_K, BlockQ5_K);

/// [`dot_q4_0`] for Q4_K and Q5_K (per 32-sub-block `j`: the scale term and
/// the `dmin` term).
#[inline(always)]
fn dot_scale_min_k<B: ScaleMinSuperBlock>(bs: &[B], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    let sbs = y.qs.chunks_exact(256).zip(y.sc.chunks_exact(8));
    for (b, (yq, ys)) in bs.iter().zip(sbs) {
        let (dm, dsh) = f16_fixed(b.d());
        let (nm, nsh) = f16_fixed(b.dmin());
        acc.nonfinite |= f16_nonfinite(b.d()) | f16_nonfinite(b.dmin());
        for (j, s) in ys.iter().enumerate() {
            let (sc, mn) = b.scale_min(j);
            let mut sumq = 0i32;
            for l in 0..32 {
                sumq += b.q(32 * j + l) as i32 * yq[32 * j + l] as i32;
            }
            acc.add_shifted((sc as i32 * sumq) as i64 * (dm * s.dm) as i64, dsh + s.dsh);
            acc.add_shifted(
                -((mn as i32 * s.bsum) as i64 * (nm * s.dm) as i64),
                nsh + s.dsh,
            );
        }
    }
    acc
}

/// [`dot_q4_0`] for Q6_K (two 16-element scales per 32-sub-block).
#[inline(always)]
fn dot_q6_k(bs: &[BlockQ6_K], y: &ActRow<'_>, nonfinite: bool) -> ExactAcc {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    let sbs = y.qs.chunks_exact(256).zip(y.sc.chunks_exact(8));
    for (b, (yq, ys)) in bs.iter().zip(sbs) {
        let (dm, dsh) = f16_fixed(b.d());
        acc.nonfinite |= f16_nonfinite(b.d());
        for (j, s) in ys.iter().enumerate() {
            let mut sumi = 0i32;
            for g in 0..2 {
                let mut sq = 0i32;
                for l in 0..16 {
                    let i = 32 * j + 16 * g + l;
                    sq += b.q(i) as i32 * yq[i] as i32;
                }
                sumi += b.scales[2 * j + g] as i32 * sq;
            }
            acc.add_shifted(sumi as i64 * (dm * s.dm) as i64, dsh + s.dsh);
        }
    }
    acc
}

/// Fixed-order soft dot of an F32 or BF16 row with F32 inputs:
/// `acc = +0; for i in 0..n { acc = acc + w_i * x_i }` (no FMA).
pub fn dot_f32_soft(ty: GgmlType, data: &[u8], x: &[F32]) -> F32 {
    let mut acc = F32::ZERO;
    if ty == GgmlType::BF16 {
        for (c, &v) in data.chunks_exact(2).zip(x) {
            acc = acc + F32::from_bf16_bits(u16::from_le_bytes([c[0], c[1]])) * v;
        }
    } else {
        for (c, &v) in data.chunks_exact(4).zip(x) {
            acc = acc + F32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]])) * v;
        }
    }
    acc
}

/// Fixed-order soft dot of two F32 slices (`acc = +0`, left to right, no FMA).
pub fn dot_f32(a: &[F32], b: &[F32]) -> F32 {
    let mut acc = F32::ZERO;
    for (&x, &y) in a.iter().zip(b) {
        acc = acc + x * y;
    }
    acc
}

/// Binary16 split for products: `h = v · 2^(15·a - 24)` with `|v| < 2^25`
/// (`v = mant << b`, `sh = 15a + b`, `b ≤ 14`), `a` in {0, 1}.
#[inline(always)]
pub fn f16_split(h: u16) -> (i32, u32) {
    let (m, sh) = f16_fixed(h);
    let a = (sh >= 15) as u32;
    (m << (sh - 15 * a), a)
}

/// Terms an [`F16Acc`] bucket takes before it must be flushed: each product
/// is below 2^50, so 2^12 of them stay below 2^62.
pub const F16_FLUSH: usize = 1 << 12;

/// Exact accumulator of binary16 products `Σ a_i·b_i`.
///
/// Each product is `va·vb · 2^(15·(aa+ab) - 48)` with `|va·vb| < 2^50`; it
/// goes to one of three `i64` buckets by `aa + ab` (0, 1, 2), which are
/// flushed into an `i128` every [`F16_FLUSH`] terms.
#[derive(Clone, Copy, Debug, Default)]
pub struct F16Acc {
    bucket: [i64; 3],
    count: usize,
    acc: ExactAcc,
}

impl F16Acc {
    /// Adds `a · b` (binary16 bits).
    #[inline(always)]
    pub fn push(&mut self, a: u16, b: u16) {
        let (va, aa) = f16_split(a);
        let (vb, ab) = f16_split(b);
        self.acc.nonfinite |= f16_nonfinite(a) | f16_nonfinite(b);
        self.bucket[(aa + ab) as usize] += va as i64 * vb as i64;
        self.count += 1;
        if self.count == F16_FLUSH {
            self.flush();
        }
    }

    /// Adds a pre-split product term (`v`, bucket `k` in 0..3) and a
    /// non-finite flag; the caller keeps the flush discipline.
    #[inline(always)]
    pub fn push_split(&mut self, v: i64, k: usize, nonfinite: bool) {
        self.acc.nonfinite |= nonfinite;
        if let Some(b) = self.bucket.get_mut(k) {
            *b += v;
        }
        self.count += 1;
        if self.count == F16_FLUSH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        for (k, b) in self.bucket.iter_mut().enumerate() {
            self.acc.add_shifted(*b, 15 * k as u32);
            *b = 0;
        }
        self.count = 0;
    }

    /// The exact sum rounded once (NaN if any input was ±∞/NaN).
    pub fn finish(mut self) -> F32 {
        self.flush();
        self.acc.finish()
    }
}
