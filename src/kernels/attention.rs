//! q (n_head, head_dim), cache K/V (n_ctx, n_kv_head·head_dim) -> out (n_head·head_dim).
//!
//! Per head `h` (kv head `h / (n_head / n_kv_head)`, llama.cpp's GQA mapping):
//! `scores_t = q_h · k_t` for `t < n_ctx`, `p = softmax(scores, scale)`
//! ([`super::softmax`]), `out_h[d] = Σ_t p_t · v_t[d]`.
//!
//! * F16 cache (llama.cpp's default, non-flash path): `q_h` and `p` are
//!   rounded to binary16 first (as ggml does for an F16 `mul_mat` operand),
//!   and both dot products are **exact** sums of f16×f16 products
//!   ([`crate::quant::dot::F16Acc`]) rounded once — order-free.
//! * F32 cache: fixed-order soft dots, `acc = +0`, `t` or `d` ascending, no FMA.
//!
//! Every cached row must have the same element type and at least
//! `n_kv_head·head_dim` elements; this is checked before anything is written.

use super::softmax;
use crate::kv::{KvRead, KvSlice};
use crate::quant::dot::{F16_FLUSH, f16_split};
use crate::quant::fixed::{ExactAcc, f16_nonfinite};
use crate::{Error, F32, Result};

/// Largest head dimension the f16 path holds on the stack.
pub const MAX_HEAD_DIM: usize = 256;

/// Causal GQA attention of one token's query over positions `0..n_ctx`.
#[allow(clippy::too_many_arguments)]
pub fn attention<K: KvRead + ?Sized>(
    q: &[F32],
    kv: &K,
    n_ctx: usize,
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
    scale: F32,
    scores: &mut [F32],
    out: &mut [F32],
) -> Result<()> {
    // Validate shapes and every cached row before writing anything.
    let q_len = n_head.checked_mul(head_dim).ok_or(Error::SizeOverflow)?;
    super::check_len(q_len, q.len())?;
    super::check_len(q_len, out.len())?;
    if n_kv_head == 0 || n_head == 0 || !n_head.is_multiple_of(n_kv_head) || head_dim == 0 {
        return Err(Error::InvalidConfig);
    }
    if head_dim > MAX_HEAD_DIM {
        return Err(Error::ShapeMismatch {
            expected: MAX_HEAD_DIM,
            found: head_dim,
        });
    }
    if scores.len() < n_ctx {
        return Err(Error::BufferTooSmall {
            needed: n_ctx,
            available: scores.len(),
        });
    }
    let kv_dim = n_kv_head * head_dim;
    let mut f16 = None;
    for t in 0..n_ctx {
        for row in [kv.k(t), kv.v(t)] {
            let (is16, len) = match row {
                KvSlice::F16(r) => (true, r.len()),
                KvSlice::F32(r) => (false, r.len()),
            };
            if len < kv_dim {
                return Err(Error::ShapeMismatch {
                    expected: kv_dim,
                    found: len,
                });
            }
            if *f16.get_or_insert(is16) != is16 {
                return Err(Error::InvalidConfig);
            }
        }
    }
    let group = n_head / n_kv_head;
    // F16 caches: the heads that share a KV head are done together, so each
    // cached row is decoded once per group (needs `group · n_ctx` scores).
    if f16 == Some(true) && group <= MAX_GROUP && scores.len() >= group * n_ctx {
        for (g, (qg, og)) in q
            .chunks_exact(group * head_dim)
            .zip(out.chunks_exact_mut(group * head_dim))
            .enumerate()
        {
            group_f16(
                qg,
                kv,
                g * head_dim,
                n_ctx,
                (group, head_dim),
                scale,
                &mut scores[..group * n_ctx],
                og,
            )?;
        }
        return Ok(());
    }
    let scores = &mut scores[..n_ctx];
    for (h, (qh, oh)) in q
        .chunks_exact(head_dim)
        .zip(out.chunks_exact_mut(head_dim))
        .enumerate()
    {
        let k0 = (h / group) * head_dim;
        if f16 == Some(true) {
            head_f16(qh, kv, k0, scale, scores, oh)?;
        } else {
            head_f32(qh, kv, k0, scale, scores, oh)?;
        }
    }
    Ok(())
}

/// Most query heads per KV head the grouped f16 path handles.
pub const MAX_GROUP: usize = 4;

/// The `group` heads `qg` (group, head_dim) that share the KV head at column
/// `k0`, over an F16 cache: the same exact arithmetic as [`head_f16`] for
/// each head (so the same bits), with each K and V row split once.
#[allow(clippy::too_many_arguments)]
fn group_f16<K: KvRead + ?Sized>(
    qg: &[F32],
    kv: &K,
    k0: usize,
    n_ctx: usize,
    (group, hd): (usize, usize),
    scale: F32,
    scores: &mut [F32], // (group, n_ctx)
    og: &mut [F32],     // (group, head_dim)
) -> Result<()> {
    let fns = row_fns();
    // q of every head rounded to f16 and split once into its two classes.
    let mut q0 = [[0i32; MAX_HEAD_DIM]; MAX_GROUP];
    let mut q1 = [[0i32; MAX_HEAD_DIM]; MAX_GROUP];
    let mut q_bad = [false; MAX_GROUP];
    let mut qb = [0u16; MAX_HEAD_DIM];
    for (gi, qh) in qg.chunks_exact(hd).enumerate() {
        for (b, &x) in qb.iter_mut().zip(qh) {
            *b = x.to_f16_bits();
        }
        q_bad[gi] = (fns.split)(&qb[..hd], &mut q0[gi][..hd], &mut q1[gi][..hd]);
    }
    let mut r0 = [0i32; MAX_HEAD_DIM];
    let mut r1 = [0i32; MAX_HEAD_DIM];
    for t in 0..n_ctx {
        let KvSlice::F16(k) = kv.k(t) else {
            return Err(Error::InvalidConfig);
        };
        let k = k.get(k0..k0 + hd).ok_or(Error::InvalidConfig)?;
        let k_bad = (fns.split)(k, &mut r0[..hd], &mut r1[..hd]);
        for gi in 0..group {
            let [b0, b1, b2] = (fns.dot)(&q0[gi][..hd], &q1[gi][..hd], &r0[..hd], &r1[..hd]);
            let mut acc = ExactAcc {
                sum: 0,
                nonfinite: q_bad[gi] | k_bad,
            };
            acc.add_shifted(b0, 0);
            acc.add_shifted(b1, 15);
            acc.add_shifted(b2, 30);
            scores[gi * n_ctx + t] = acc.finish();
        }
    }
    if n_ctx > 0 {
        for sh in scores.chunks_exact_mut(n_ctx) {
            softmax(sh, scale, n_ctx)?;
        }
    }
    // out_h[d] = Σ_t p_h,t · v_t[d]: per head three i64 class sums per d,
    // flushed into i128 every F16_FLUSH positions (as head_f16).
    let mut b = [[[0i64; MAX_HEAD_DIM]; 3]; MAX_GROUP];
    let mut wide = [[ExactAcc::default(); MAX_HEAD_DIM]; MAX_GROUP];
    let mut bad = [false; MAX_GROUP];
    for t in 0..n_ctx {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(Error::InvalidConfig);
        };
        let v = v.get(k0..k0 + hd).ok_or(Error::InvalidConfig)?;
        let v_bad = (fns.split)(v, &mut r0[..hd], &mut r1[..hd]);
        for gi in 0..group {
            let pb = scores[gi * n_ctx + t].to_f16_bits();
            bad[gi] |= v_bad | f16_nonfinite(pb);
            let (pv, pa) = f16_split(pb);
            // class(p·v_d) = class(p) + class(v_d): p's class picks the two
            // buckets, each takes one product per position (as before).
            let [c0, c1, c2] = &mut b[gi];
            let (lo, hi) = if pa == 0 { (c0, c1) } else { (c1, c2) };
            (fns.axpy)(pv, &r0[..hd], &r1[..hd], &mut lo[..hd], &mut hi[..hd]);
        }
        if (t + 1) % F16_FLUSH == 0 {
            for gi in 0..group {
                flush(&mut b[gi], &mut wide[gi], hd);
            }
        }
    }
    for (gi, oh) in og.chunks_exact_mut(hd).enumerate() {
        flush(&mut b[gi], &mut wide[gi], hd);
        for (o, w) in oh.iter_mut().zip(wide[gi].iter_mut()) {
            w.nonfinite |= bad[gi];
            *o = w.finish();
        }
    }
    Ok(())
}

/// The row kernels of the grouped f16 path (portable, or the same code
/// compiled for the CPU's SIMD by `quant::simd_x86`; identical integers).
#[derive(Clone, Copy)]
pub(crate) struct RowFns {
    /// [`split_row`].
    pub split: fn(&[u16], &mut [i32], &mut [i32]) -> bool,
    /// [`dot_classes`].
    pub dot: DotFn,
    /// [`axpy2`].
    pub axpy: AxpyFn,
}

/// Signature of [`dot_classes`].
pub(crate) type DotFn = fn(&[i32], &[i32], &[i32], &[i32]) -> [i64; 3];
/// Signature of [`axpy2`].
pub(crate) type AxpyFn = fn(i32, &[i32], &[i32], &mut [i64], &mut [i64]);

fn row_fns() -> RowFns {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if let Some(f) = crate::quant::simd_x86::attention_fns() {
        return f;
    }
    RowFns {
        split: split_row,
        dot: dot_classes,
        axpy: axpy2,
    }
}

/// Splits binary16 values `h = v · 2^(15·a − 24)` ([`f16_split`]) by class:
/// `x0 = v` where `a = 0` (else 0), `x1 = v` where `a = 1` (else 0). Returns
/// whether any value is ±∞ or NaN. Branch-free so that it vectorizes.
#[inline(always)]
pub(crate) fn split_row(h: &[u16], x0: &mut [i32], x1: &mut [i32]) -> bool {
    let mut bad = false;
    for ((&b, o0), o1) in h.iter().zip(x0.iter_mut()).zip(x1.iter_mut()) {
        let (v, a) = f16_split(b);
        let m = (a as i32).wrapping_neg(); // all ones for class 1
        *o0 = v & !m;
        *o1 = v & m;
        bad |= f16_nonfinite(b);
    }
    bad
}

/// The three exponent-class sums of `a · b` for split rows: class 0
/// `Σ a0·b0`, class 1 `Σ a0·b1 + a1·b0`, class 2 `Σ a1·b1`. Each product is
/// below 2^50 and a row has at most 2·[`MAX_HEAD_DIM`] of them per class,
/// so no `i64` can overflow.
#[inline(always)]
pub(crate) fn dot_classes(a0: &[i32], a1: &[i32], b0: &[i32], b1: &[i32]) -> [i64; 3] {
    let (mut c0, mut c1, mut c2) = (0i64, 0i64, 0i64);
    for (((&x0, &x1), &y0), &y1) in a0.iter().zip(a1).zip(b0).zip(b1) {
        c0 += x0 as i64 * y0 as i64;
        c1 += x0 as i64 * y1 as i64 + x1 as i64 * y0 as i64;
        c2 += x1 as i64 * y1 as i64;
    }
    [c0, c1, c2]
}

/// `lo[d] += p·x0[d]`, `hi[d] += p·x1[d]`.
#[inline(always)]
pub(crate) fn axpy2(p: i32, x0: &[i32], x1: &[i32], lo: &mut [i64], hi: &mut [i64]) {
    for (((l, h), &a), &b) in lo.iter_mut().zip(hi.iter_mut()).zip(x0).zip(x1) {
        *l += p as i64 * a as i64;
        *h += p as i64 * b as i64;
    }
}

/// One head over an F16 cache: exact f16 dots.
fn head_f16<K: KvRead + ?Sized>(
    qh: &[F32],
    kv: &K,
    k0: usize,
    scale: F32,
    scores: &mut [F32],
    oh: &mut [F32],
) -> Result<()> {
    let hd = qh.len();
    // q rounded to f16 and split once: q_d = qv · 2^(15·qa − 24).
    let mut qv = [0i32; MAX_HEAD_DIM];
    let mut qa = [0u32; MAX_HEAD_DIM];
    let mut q_bad = false;
    for (d, &x) in qh.iter().enumerate() {
        let hbits = x.to_f16_bits();
        q_bad |= f16_nonfinite(hbits);
        (qv[d], qa[d]) = f16_split(hbits);
    }
    for (t, s) in scores.iter_mut().enumerate() {
        let KvSlice::F16(k) = kv.k(t) else {
            return Err(Error::InvalidConfig);
        };
        let k = k.get(k0..k0 + hd).ok_or(Error::InvalidConfig)?;
        // Three exponent-class sums; each product is below 2^50 and a head
        // has at most MAX_HEAD_DIM (2^8) terms, so no i64 sum can overflow.
        // Branch-free so that it vectorizes.
        let (mut b0, mut b1, mut b2) = (0i64, 0i64, 0i64);
        let mut bad = q_bad;
        for ((&kb, &qvd), &qad) in k.iter().zip(&qv[..hd]).zip(&qa[..hd]) {
            let (kv_, ka) = f16_split(kb);
            bad |= f16_nonfinite(kb);
            let prod = qvd as i64 * kv_ as i64;
            let c = qad + ka;
            b0 += if c == 0 { prod } else { 0 };
            b1 += if c == 1 { prod } else { 0 };
            b2 += if c == 2 { prod } else { 0 };
        }
        let mut acc = ExactAcc {
            sum: 0,
            nonfinite: bad,
        };
        acc.add_shifted(b0, 0);
        acc.add_shifted(b1, 15);
        acc.add_shifted(b2, 30);
        *s = acc.finish();
    }
    softmax(scores, scale, scores.len())?;
    // out[d] = Σ_t p_t·v_t[d], p_t rounded to f16; three i64 buckets per d
    // (exponent class 0, 1, 2), flushed into i128 every F16_FLUSH positions.
    let mut b = [[0i64; MAX_HEAD_DIM]; 3];
    let mut wide = [ExactAcc::default(); MAX_HEAD_DIM];
    let mut bad = false;
    for (t, &p) in scores.iter().enumerate() {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(Error::InvalidConfig);
        };
        let pb = p.to_f16_bits();
        bad |= f16_nonfinite(pb);
        let (pv, pa) = f16_split(pb);
        let v = &v[k0..k0 + hd];
        for d in 0..hd {
            let (vv, va) = f16_split(v[d]);
            bad |= f16_nonfinite(v[d]);
            let prod = pv as i64 * vv as i64;
            let k = pa + va;
            b[0][d] += if k == 0 { prod } else { 0 };
            b[1][d] += if k == 1 { prod } else { 0 };
            b[2][d] += if k == 2 { prod } else { 0 };
        }
        if (t + 1) % F16_FLUSH == 0 {
            flush(&mut b, &mut wide, hd);
        }
    }
    flush(&mut b, &mut wide, hd);
    for (o, w) in oh.iter_mut().zip(wide.iter_mut()) {
        w.nonfinite |= bad;
        *o = w.finish();
    }
    Ok(())
}

fn flush(b: &mut [[i64; MAX_HEAD_DIM]; 3], wide: &mut [ExactAcc; MAX_HEAD_DIM], hd: usize) {
    for (k, bk) in b.iter_mut().enumerate() {
        for (w, x) in wide.iter_mut().zip(bk.iter_mut()).take(hd) {
            w.add_shifted(*x, 15 * k as u32);
            *x = 0;
        }
    }
}

/// One head over an F32 cache: fixed-order soft dots.
fn head_f32<K: KvRead + ?Sized>(
    qh: &[F32],
    kv: &K,
    k0: usize,
    scale: F32,
    scores: &mut [F32],
    oh: &mut [F32],
) -> Result<()> {
    let hd = qh.len();
    for (t, s) in scores.iter_mut().enumerate() {
        let KvSlice::F32(k) = kv.k(t) else {
            return Err(Error::InvalidConfig);
        };
        *s = crate::quant::dot::dot_f32(qh, &k[k0..k0 + hd]);
    }
    softmax(scores, scale, scores.len())?;
    oh.fill(F32::ZERO);
    for (t, &p) in scores.iter().enumerate() {
        let KvSlice::F32(v) = kv.v(t) else {
            return Err(Error::InvalidConfig);
        };
        for (o, &x) in oh.iter_mut().zip(&v[k0..k0 + hd]) {
            *o = *o + p * x;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every SIMD build of the row kernels the CPU runs gives the portable
    /// functions' integers, on random f16 rows (all classes, ±∞/NaN, zeros).
    #[test]
    fn row_kernel_builds_equal_portable() {
        #[cfg(all(feature = "std", target_arch = "x86_64"))]
        let builds = crate::quant::simd_x86::attention_variants();
        #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
        let builds: [Option<RowFns>; 0] = [];
        let mut next = crate::testutil::lcg(0x9E37_79B9_7F4A_7C15u64);
        for fns in builds.into_iter().flatten() {
            for hd in [1usize, 7, 16, 64, 100, MAX_HEAD_DIM] {
                let row = |next: &mut dyn FnMut() -> u32| -> [u16; MAX_HEAD_DIM] {
                    core::array::from_fn(|_| match next() % 8 {
                        0 => 0x7C00 | (next() as u16 & 0x83FF), // ±∞ / NaN
                        1 => next() as u16 & 0x83FF,            // ±0, subnormal
                        _ => next() as u16,
                    })
                };
                let (a, b) = (row(&mut next), row(&mut next));
                let split = |f: fn(&[u16], &mut [i32], &mut [i32]) -> bool, h: &[u16]| {
                    let (mut x0, mut x1) = ([0i32; MAX_HEAD_DIM], [0i32; MAX_HEAD_DIM]);
                    let bad = f(&h[..hd], &mut x0[..hd], &mut x1[..hd]);
                    (x0, x1, bad)
                };
                let (a0, a1, abad) = split(split_row, &a);
                let (b0, b1, bbad) = split(split_row, &b);
                assert_eq!(split(fns.split, &a), (a0, a1, abad), "split, hd {hd}");
                assert_eq!(split(fns.split, &b), (b0, b1, bbad), "split, hd {hd}");
                assert_eq!(
                    (fns.dot)(&a0[..hd], &a1[..hd], &b0[..hd], &b1[..hd]),
                    dot_classes(&a0[..hd], &a1[..hd], &b0[..hd], &b1[..hd]),
                    "dot, hd {hd}"
                );
                let p = next() as i32 >> 7;
                let init: [i64; MAX_HEAD_DIM] = core::array::from_fn(|_| next() as i64);
                let (mut lo, mut hi) = (init, init);
                let (mut lo2, mut hi2) = (init, init);
                axpy2(p, &a0[..hd], &a1[..hd], &mut lo[..hd], &mut hi[..hd]);
                (fns.axpy)(p, &a0[..hd], &a1[..hd], &mut lo2[..hd], &mut hi2[..hd]);
                assert_eq!((lo, hi), (lo2, hi2), "axpy, hd {hd}");
            }
        }
    }
}
