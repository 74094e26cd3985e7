//! q (n_head, head_dim), cache K/V (n_ctx, n_kv_head·head_dim) -> out (n_head·head_dim).
//!
//! Per head `h` (kv head `h / (n_head / n_kv_head)`, llama.cpp's GQA mapping):
//! `scores_t = q_h · k_t` for `t < n_ctx`, `p = softmax(scores, scale)`
//! ([`super::softmax()`]), `out_h[d] = Σ_t p_t · v_t[d]`.
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
use crate::float::to_f16_bits_try;
use crate::kv::{KvRead, KvSlice, KvType};
use crate::quant::dot::{F16_FLUSH, f16_split};
use crate::quant::fixed::{ExactAcc, f16_nonfinite, finish_i64_row};
use crate::{Error, F32, Result};

/// Largest head dimension the f16 path holds on the stack.
pub const MAX_HEAD_DIM: usize = 256;

/// A cached row read by an f16 path is F32 (checked up front by
/// [`attention`]; its helpers check again).
const F16_EXPECTED: Error = Error::KvTypeMismatch {
    expected: KvType::F16,
};
/// A cached row read by the f32 path is F16.
const F32_EXPECTED: Error = Error::KvTypeMismatch {
    expected: KvType::F32,
};

/// A cached row of `len` elements, shorter than the `end` its head needs.
#[inline(always)]
const fn short_row(end: usize, len: usize) -> Error {
    Error::ShapeMismatch {
        expected: end,
        found: len,
    }
}

/// Causal GQA attention of one token's query over positions `0..n_ctx`.
///
/// Errors (nothing written): `InvalidHeads` unless `n_kv_head` divides
/// `n_head` and both and `head_dim` are non-zero; `ShapeMismatch` for `q` or
/// `out` not `n_head · head_dim`, `head_dim` above [`MAX_HEAD_DIM`] or a
/// cached row shorter than `n_kv_head · head_dim`; `BufferTooSmall` for
/// fewer than `n_ctx` scores; `KvTypeMismatch` when K and V rows are not
/// all of one type (`expected`: the first row's).
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
        return Err(Error::InvalidHeads {
            n_head,
            n_kv_head,
            head_dim,
        });
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
                let expected = if is16 { KvType::F32 } else { KvType::F16 };
                return Err(Error::KvTypeMismatch { expected });
            }
        }
    }
    let group = n_head / n_kv_head;
    // F16 caches: the heads that share a KV head are done together, at most
    // `MAX_GROUP` at a time, so each cached row is decoded once per
    // sub-group (needs `min(group, MAX_GROUP) · n_ctx` scores). Each head's
    // sums are exact, so how its group is split changes no bit.
    let sub = group.min(MAX_GROUP);
    if f16 == Some(true) && scores.len() >= sub * n_ctx {
        for (g, (qg, og)) in q
            .chunks_exact(group * head_dim)
            .zip(out.chunks_exact_mut(group * head_dim))
            .enumerate()
        {
            for (qs, os) in qg.chunks(sub * head_dim).zip(og.chunks_mut(sub * head_dim)) {
                let heads = qs.len() / head_dim;
                group_f16(
                    qs,
                    kv,
                    g * head_dim,
                    n_ctx,
                    (heads, head_dim),
                    scale,
                    &mut scores[..heads * n_ctx],
                    os,
                )?;
            }
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
/// `k0`, over an F16 cache: the same exact sums as [`head_f16`] for each
/// head (so the same bits), each K and V row read once for the group.
///
/// Rows take a fixed-point path ([`qk_row`], [`pv_row`]) when their values
/// fit its window; the rare others are redone afterwards by the
/// exponent-class sums of [`head_f16`] ([`qk_classes`], [`pv_classes`]).
/// Both are exact, so which rows take which path does not change a bit.
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
    // q of every head rounded to f16 and fixed at its own base.
    let mut qx = [0i32; MAX_GROUP * MAX_HEAD_DIM];
    let mut q_base = [0u32; MAX_GROUP];
    let mut q_bad = [false; MAX_GROUP];
    let mut q_fits = true;
    let mut qb = [0u16; MAX_GROUP * MAX_HEAD_DIM];
    let qb = &mut qb[..group * hd];
    // Normal halves (and zeros) in one branch-free loop; else all again.
    let mut q_normal = true;
    for (b, &x) in qb.iter_mut().zip(qg) {
        let (h, ok) = to_f16_bits_try(x);
        (*b, q_normal) = (h, q_normal & ok);
    }
    if !q_normal {
        for (b, &x) in qb.iter_mut().zip(qg) {
            *b = x.to_f16_bits();
        }
    }
    // Each q row at its lowest live exponent, at most WIN_Q below its
    // largest: the narrower the q rows, the wider the K rows' window.
    let mut wq = 0;
    for (gi, qh) in qb.chunks_exact(hd).enumerate() {
        let top = max_sh(qh);
        q_base[gi] = top.saturating_sub(WIN_Q).max(min_live_sh(qh).min(top));
        wq = wq.max(top - q_base[gi]);
        let (fits, bad) = fix_row(qh, q_base[gi], &mut qx[gi * hd..(gi + 1) * hd]);
        (q_fits, q_bad[gi]) = (q_fits && fits, bad);
    }
    let k_win = win_k(hd, wq);
    let qx = &qx[..group * hd];
    let mut x = [0i32; MAX_HEAD_DIM];
    // K rows left out, for the class path (in batches of MISS_LIST).
    let mut miss = [0u32; MISS_LIST];
    let mut n_miss = 0;
    for t in (0..n_ctx).filter(|_| q_fits) {
        let KvSlice::F16(k) = kv.k(t) else {
            return Err(F16_EXPECTED);
        };
        let k = k.get(k0..k0 + hd).ok_or(short_row(k0 + hd, k.len()))?;
        let mut dots = [0i64; MAX_GROUP];
        let Some((k_base, k_bad)) = (fns.qk)(k, qx, k_win, &mut x, &mut dots[..group]) else {
            if let Some(m) = miss.get_mut(n_miss) {
                *m = t as u32;
            }
            n_miss += 1;
            if n_miss == MISS_LIST {
                let rows = &mut miss.iter().map(|&t| t as usize);
                qk_classes(qb, kv, k0, n_ctx, (group, hd), rows, scores)?;
                n_miss = 0;
            }
            continue;
        };
        for gi in 0..group {
            // Σ q·k = dot · 2^(q_base + k_base − 48), below 2^121.
            let acc = ExactAcc {
                sum: dots[gi] as i128,
                nonfinite: q_bad[gi] | k_bad,
            };
            scores[gi * n_ctx + t] = acc.finish_scaled(q_base[gi] + k_base);
        }
    }
    let gh = (group, hd);
    if !q_fits {
        qk_classes(qb, kv, k0, n_ctx, gh, &mut (0..n_ctx), scores)?;
    } else if n_miss > 0 {
        let rows = &mut miss[..n_miss].iter().map(|&t| t as usize);
        qk_classes(qb, kv, k0, n_ctx, gh, rows, scores)?;
    }
    if n_ctx > 0 {
        for sh in scores.chunks_exact_mut(n_ctx) {
            softmax(sh, scale, n_ctx)?;
        }
    }
    pv_group(kv, k0, n_ctx, gh, scores, og)
}

/// `og[h][d] = Σ_t p_h,t · v_t[d]` for the group's probabilities `scores`
/// (group, n_ctx), each rounded to binary16, exactly. Each V row in the
/// window adds `P·x` (`P = p·2^24`, `x = v·2^(24 − v_base)`) to one `i64` per
/// (head, d); [`pv_classes`] redoes the others.
pub(crate) fn pv_group<K: KvRead + ?Sized>(
    kv: &K,
    k0: usize,
    n_ctx: usize,
    (group, hd): (usize, usize),
    scores: &[F32],
    og: &mut [F32],
) -> Result<()> {
    if group > MAX_GROUP {
        return Err(Error::InvalidHeads {
            n_head: group,
            n_kv_head: 1,
            head_dim: hd,
        });
    }
    if hd > MAX_HEAD_DIM {
        return Err(Error::ShapeMismatch {
            expected: MAX_HEAD_DIM,
            found: hd,
        });
    }
    if scores.len() < group * n_ctx {
        return Err(Error::BufferTooSmall {
            needed: group * n_ctx,
            available: scores.len(),
        });
    }
    super::check_len(group * hd, og.len())?;
    let fns = row_fns();
    let mut v_max = 0;
    for t in 0..n_ctx {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(F16_EXPECTED);
        };
        v_max = v_max.max(max_sh(
            v.get(k0..k0 + hd).ok_or(short_row(k0 + hd, v.len()))?,
        ));
    }
    let v_base = v_max.saturating_sub(WIN_V);
    let mut fast = [0i64; MAX_GROUP * MAX_HEAD_DIM];
    let fast = &mut fast[..group * hd];
    let mut x = [0i32; MAX_HEAD_DIM];
    let mut p_total = 0u64;
    let mut bad = [false; MAX_GROUP];
    let mut missed = false;
    for t in 0..n_ctx {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(F16_EXPECTED);
        };
        let v = v.get(k0..k0 + hd).ok_or(short_row(k0 + hd, v.len()))?;
        let (p, p_row) = p_ints(scores, n_ctx, t, group, &mut bad);
        p_total = p_total.saturating_add(p_row);
        match p.map(|p| (fns.pv)(v, v_base, &p[..group], &mut x, fast)) {
            Some(Some(v_bad)) => {
                for x in &mut bad[..group] {
                    *x |= v_bad;
                }
            }
            _ => missed = true,
        }
    }
    // The sums are below 2^62 when Σ|P| ≤ P_TOTAL (always, for softmax
    // outputs); past it they may have wrapped, and every row is redone.
    let all = p_total > P_TOTAL;
    if missed || all {
        return pv_classes(
            kv,
            k0,
            n_ctx,
            (group, hd),
            scores,
            (v_base, all),
            fast,
            &bad,
            og,
        );
    }
    for ((oh, fh), &bad) in og.chunks_exact_mut(hd).zip(fast.chunks_exact(hd)).zip(&bad) {
        finish_builds::best(fh, v_base, bad, oh);
    }
    Ok(())
}

crate::simd::multiversion! {
    /// Builds of [`finish_i64_row`] (its loop vectorizes with AVX-512's
    /// 64-bit leading-zero count).
    mod finish_builds = finish_i64_row(sums: &[i64], sh: u32, nonfinite: bool, out: &mut [F32]);
}

/// Row `t`'s probabilities of the group's heads as binary16 integers
/// `P = p · 2^24` (exact: a binary16 of at most 1 is a multiple of 2^-24),
/// `None` if any is above 1 or not finite, and `Σ|P|` (saturating); marks
/// the heads whose p is ±∞ or NaN in `bad`.
#[inline(always)]
fn p_ints(
    scores: &[F32],
    n_ctx: usize,
    t: usize,
    group: usize,
    bad: &mut [bool; MAX_GROUP],
) -> (Option<[i32; MAX_GROUP]>, u64) {
    let mut p = [0i32; MAX_GROUP];
    let (mut total, mut fit) = (0u64, true);
    for gi in 0..group {
        let pb = scores[gi * n_ctx + t].to_f16_bits();
        bad[gi] |= f16_nonfinite(pb);
        let (m, sh) = crate::quant::fixed::f16_fixed(pb);
        let mag = (m.unsigned_abs() as u64) << sh;
        fit &= mag <= P_ONE; // also false for ±∞/NaN (sh = 30)
        p[gi] = if mag <= P_ONE { m << sh } else { 0 };
        total = total.saturating_add(mag);
    }
    (fit.then_some(p), total)
}

/// Three exponent-class sums (units 2^-48, 2^-33, 2^-18) added exactly and
/// rounded once; NaN if `nonfinite`.
#[inline(always)]
fn classes_finish([b0, b1, b2]: [i64; 3], nonfinite: bool) -> F32 {
    let mut acc = ExactAcc { sum: 0, nonfinite };
    acc.add_shifted(b0, 0);
    acc.add_shifted(b1, 15);
    acc.add_shifted(b2, 30);
    acc.finish()
}

/// K rows [`group_f16`]'s fixed-point pass leaves out, collected and sent
/// to [`qk_classes`] this many at a time.
const MISS_LIST: usize = 32;

/// The scores of K rows `rows` by exponent-class sums (`qb`: the group's q
/// rows as binary16): the q rows split by class once, then each K row by
/// [`qk_class_row`] (the CPU's widest build).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn qk_classes<K: KvRead + ?Sized>(
    qb: &[u16],
    kv: &K,
    k0: usize,
    n_ctx: usize,
    (group, hd): (usize, usize),
    rows: &mut dyn Iterator<Item = usize>,
    scores: &mut [F32],
) -> Result<()> {
    let class_row = qk_class_builds::best_fn();
    let mut q0 = [0i32; MAX_GROUP * MAX_HEAD_DIM];
    let mut q1 = [0i32; MAX_GROUP * MAX_HEAD_DIM];
    let (q0, q1) = (&mut q0[..group * hd], &mut q1[..group * hd]);
    let mut q_bad = [false; MAX_GROUP];
    for (gi, qh) in qb.chunks_exact(hd).enumerate().take(group) {
        let at = gi * hd..(gi + 1) * hd;
        q_bad[gi] = split_row(qh, &mut q0[at.clone()], &mut q1[at]);
    }
    let mut r = [0i32; 2 * MAX_HEAD_DIM];
    for t in rows {
        let KvSlice::F16(k) = kv.k(t) else {
            return Err(F16_EXPECTED);
        };
        let k = k.get(k0..k0 + hd).ok_or(short_row(k0 + hd, k.len()))?;
        let mut sums = [[0i64; 3]; MAX_GROUP];
        let k_bad = class_row(k, q0, q1, &mut r, &mut sums[..group])
            .ok_or(short_row(group * hd, q0.len()))?;
        for (gi, &b) in sums.iter().enumerate().take(group) {
            scores[gi * n_ctx + t] = classes_finish(b, q_bad[gi] | k_bad);
        }
    }
    Ok(())
}

crate::simd::multiversion! {
    /// Builds of [`qk_class_row`].
    mod qk_class_builds = qk_class_row(k: &[u16], q0: &[i32], q1: &[i32], r: &mut [i32], sums: &mut [[i64; 3]]) -> Option<bool>;
}

/// One K row `k` (head_dim values) against the group's q rows split by
/// class (`q0`, `q1`: `sums.len()` rows of head_dim, [`split_row`]): `k`
/// split into the scratch `r` (`2·hd`), then each head's three class sums
/// ([`dot_classes`]). `Some(bad)` (`k` has ±∞ or NaN), or `None` (nothing
/// written) when the lengths do not match.
#[inline(always)]
pub(crate) fn qk_class_row(
    k: &[u16],
    q0: &[i32],
    q1: &[i32],
    r: &mut [i32],
    sums: &mut [[i64; 3]],
) -> Option<bool> {
    let hd = k.len();
    if q0.len() != sums.len() * hd || q1.len() != q0.len() || r.len() < 2 * hd {
        return None;
    }
    let (r0, r1) = r.split_at_mut(hd);
    let r1 = &mut r1[..hd];
    let bad = split_row(k, r0, r1);
    for ((s, a0), a1) in sums
        .iter_mut()
        .zip(q0.chunks_exact(hd))
        .zip(q1.chunks_exact(hd))
    {
        *s = dot_classes(a0, a1, r0, r1);
    }
    Some(bad)
}

/// [`group_f16`]'s outputs when its fixed-point pass left out V rows (all
/// of them when `all`): those rows' exponent-class sums (three `i64` per
/// head and d, flushed into `i128` every F16_FLUSH rows, as [`head_f16`])
/// plus, unless `all`, the pass's sums `fast` at `v_base`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn pv_classes<K: KvRead + ?Sized>(
    kv: &K,
    k0: usize,
    n_ctx: usize,
    (group, hd): (usize, usize),
    scores: &[F32],
    (v_base, all): (u32, bool),
    fast: &[i64],
    bad: &[bool; MAX_GROUP],
    og: &mut [F32],
) -> Result<()> {
    let mut b = [[[0i64; MAX_HEAD_DIM]; 3]; MAX_GROUP];
    let mut wide = [[ExactAcc::default(); MAX_HEAD_DIM]; MAX_GROUP];
    let (mut r0, mut r1) = ([0i32; MAX_HEAD_DIM], [0i32; MAX_HEAD_DIM]);
    let mut bad = *bad;
    for t in 0..n_ctx {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(F16_EXPECTED);
        };
        let v = v.get(k0..k0 + hd).ok_or(short_row(k0 + hd, v.len()))?;
        let (p, _) = p_ints(scores, n_ctx, t, group, &mut bad);
        // The fixed-point pass took the row iff p fit and v fits.
        if !all && p.is_some() && fix_row(v, v_base, &mut r0[..hd]).0 {
            continue;
        }
        let v_bad = split_row(v, &mut r0[..hd], &mut r1[..hd]);
        for gi in 0..group {
            bad[gi] |= v_bad;
            let (pv, pa) = f16_split(scores[gi * n_ctx + t].to_f16_bits());
            // class(p·v_d) = class(p) + class(v_d): p's class picks the two
            // buckets, each takes one product per position.
            let [c0, c1, c2] = &mut b[gi];
            let (lo, hi) = if pa == 0 { (c0, c1) } else { (c1, c2) };
            axpy2(pv, &r0[..hd], &r1[..hd], &mut lo[..hd], &mut hi[..hd]);
        }
        if (t + 1) % F16_FLUSH == 0 {
            for gi in 0..group {
                flush(&mut b[gi], &mut wide[gi], hd);
            }
        }
    }
    for (gi, oh) in og.chunks_exact_mut(hd).enumerate() {
        flush(&mut b[gi], &mut wide[gi], hd);
        for ((o, w), &f) in oh.iter_mut().zip(wide[gi].iter_mut()).zip(&fast[gi * hd..]) {
            if !all {
                w.add_shifted(f, v_base);
            }
            w.nonfinite |= bad[gi];
            *o = w.finish();
        }
    }
    Ok(())
}

/// Fixed-point windows, in binades below a row's largest exponent (values
/// then below 2^(11 + w)): q rows keep at most [`WIN_Q`] (fewer where
/// their values span fewer), K rows [`win_k`] of the q rows' window (`hd`
/// products stay below 2^63), V rows [`WIN_V`] below the largest exponent of
/// all the V rows of the head (values below 2^31). A value further down
/// sends its row to the exponent-class path: q rows, which take every K row
/// with them, get the widest window.
pub(crate) const WIN_Q: u32 = 20;
/// See [`WIN_Q`].
pub(crate) const WIN_V: u32 = 20;

/// K rows' window for head_dim `hd` (at most [`MAX_HEAD_DIM`] = 2^8)
/// against q rows of window `wq` (at most [`WIN_Q`]): the largest `w ≤ 20`
/// (values below 2^31) with `hd · 2^((11 + wq) + (11 + w))` ≤ 2^63, so at
/// least 13.
#[inline(always)]
pub(crate) const fn win_k(hd: usize, wq: u32) -> u32 {
    let log = usize::BITS - hd.saturating_sub(1).leading_zeros(); // ⌈log2 hd⌉
    let wq = if wq < WIN_Q { wq } else { WIN_Q };
    let w = 63u32.saturating_sub(22 + wq + log);
    if w < 20 { w } else { 20 }
}
/// `1.0` as a `P = p · 2^24`.
const P_ONE: u64 = 1 << 24;
/// Largest `Σ|P|` the fast V sums take: with `|y| < 2^31`, below 2^62.
const P_TOTAL: u64 = 1 << 31;

/// The row kernels of the grouped f16 path ([`qk_row`], [`pv_row`]),
/// compiled for the CPU's SIMD where there is such a build ([`crate::simd`];
/// the same code, identical integers).
#[derive(Clone, Copy)]
pub(crate) struct RowFns {
    /// [`qk_row`].
    pub qk: qk_builds::Build,
    /// [`pv_row`].
    pub pv: pv_builds::Build,
}

/// The widest builds of the row kernels the CPU runs (looked up once per
/// call of the grouped path, then called per row).
fn row_fns() -> RowFns {
    RowFns {
        qk: qk_builds::best_fn(),
        pv: pv_builds::best_fn(),
    }
}

crate::simd::multiversion! {
    /// Builds of [`qk_row`].
    mod qk_builds = qk_row(k: &[u16], qx: &[i32], win: u32, x: &mut [i32], dots: &mut [i64]) -> Option<(u32, bool)>;
}

crate::simd::multiversion! {
    /// Builds of [`pv_row`].
    mod pv_builds = pv_row(v: &[u16], base: u32, p: &[i32], x: &mut [i32], acc: &mut [i64]) -> Option<bool>;
}

/// The smallest `sh` ([`crate::quant::fixed::f16_fixed`]) of the non-zero
/// values of a row of binary16 values (`u32::MAX` if there is none).
#[inline(always)]
pub(crate) fn min_live_sh(h: &[u16]) -> u32 {
    h.iter().fold(u32::MAX, |a, &b| {
        let sh = ((b >> 10) as u32 & 31).max(1) - 1;
        a.min(if b & 0x7FFF != 0 { sh } else { u32::MAX })
    })
}

/// The largest `sh` ([`crate::quant::fixed::f16_fixed`]) of a row of
/// binary16 values (30 for ±∞/NaN; 0 for an empty row).
#[inline(always)]
pub(crate) fn max_sh(h: &[u16]) -> u32 {
    let e = h.iter().fold(0u16, |a, &b| a.max(b & 0x7C00)) >> 10;
    (e.max(1) - 1) as u32
}

/// Binary16 values `h = mant · 2^(sh − 24)` as `x = mant · 2^(sh − base)`.
/// Returns `(fits, bad)`: `fits` when no nonzero value has `sh < base`
/// (else `x` is meaningless), `bad` when any value is ±∞ or NaN. With
/// `base ≥ max_sh(h) − w`, `|x| < 2^(11 + w)`. Branch-free so that it
/// vectorizes.
#[inline(always)]
pub(crate) fn fix_row(h: &[u16], base: u32, x: &mut [i32]) -> (bool, bool) {
    let (mut lost, mut bad) = (false, false);
    for (&b, o) in h.iter().zip(x.iter_mut()) {
        let (m, sh) = crate::quant::fixed::f16_fixed(b);
        let d = sh as i32 - base as i32;
        lost |= d < 0 && m != 0;
        *o = m << (d.max(0) as u32 & 31);
        bad |= f16_nonfinite(b);
    }
    (!lost, bad)
}

/// One K row `k` (head_dim values) against the group's fixed q rows `qx`
/// (`dots.len()` rows of head_dim, in windows of `wq`; `win` is
/// [`win_k`]`(hd, wq)`): the row fixed at
/// `k_base = max_sh(k) − win` (at least 0) into the scratch `x` and
/// `dots[g] = Σ qx_g·x` exactly. `Some((k_base, bad))`, or `None` (`dots`
/// not written) when the row does not fit its window.
#[inline(always)]
pub(crate) fn qk_row(
    k: &[u16],
    qx: &[i32],
    win: u32,
    x: &mut [i32],
    dots: &mut [i64],
) -> Option<(u32, bool)> {
    let hd = k.len();
    if qx.len() != dots.len() * hd || x.len() < hd {
        return None;
    }
    let base = max_sh(k).saturating_sub(win);
    let (fits, bad) = fix_row(k, base, &mut x[..hd]);
    if !fits {
        return None;
    }
    for (d, q) in dots.iter_mut().zip(qx.chunks_exact(hd)) {
        *d = q
            .iter()
            .zip(&x[..hd])
            .map(|(&a, &b)| a as i64 * b as i64)
            .sum();
    }
    Some((base, bad))
}

/// One V row `v` fixed at `base` (callers pass at least the largest `sh` of
/// the row minus [`WIN_V`]) into the scratch `x`, added to the group's
/// sums: `acc[g·hd + d] += p[g] · x[d]`. `Some(bad)`, or `None` (`acc` not
/// written) when the row does not fit.
#[inline(always)]
pub(crate) fn pv_row(
    v: &[u16],
    base: u32,
    p: &[i32],
    x: &mut [i32],
    acc: &mut [i64],
) -> Option<bool> {
    let hd = v.len();
    if acc.len() != p.len() * hd || x.len() < hd {
        return None;
    }
    let (fits, bad) = fix_row(v, base, &mut x[..hd]);
    if !fits {
        return None;
    }
    for (a, &pg) in acc.chunks_exact_mut(hd).zip(p) {
        for (s, &y) in a.iter_mut().zip(&x[..hd]) {
            // Wrapping: the caller discards sums that may have wrapped.
            *s = s.wrapping_add(pg as i64 * y as i64);
        }
    }
    Some(bad)
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
            return Err(F16_EXPECTED);
        };
        let k = k.get(k0..k0 + hd).ok_or(short_row(k0 + hd, k.len()))?;
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
        *s = classes_finish([b0, b1, b2], bad);
    }
    softmax(scores, scale, scores.len())?;
    // out[d] = Σ_t p_t·v_t[d], p_t rounded to f16; three i64 buckets per d
    // (exponent class 0, 1, 2), flushed into i128 every F16_FLUSH positions.
    let mut b = [[0i64; MAX_HEAD_DIM]; 3];
    let mut wide = [ExactAcc::default(); MAX_HEAD_DIM];
    let mut bad = false;
    for (t, &p) in scores.iter().enumerate() {
        let KvSlice::F16(v) = kv.v(t) else {
            return Err(F16_EXPECTED);
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
            return Err(F32_EXPECTED);
        };
        *s = crate::quant::dot::dot_f32(qh, &k[k0..k0 + hd]);
    }
    softmax(scores, scale, scores.len())?;
    oh.fill(F32::ZERO);
    for (t, &p) in scores.iter().enumerate() {
        let KvSlice::F32(v) = kv.v(t) else {
            return Err(F32_EXPECTED);
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

    /// A random binary16 row: exponents in `lo..lo + span` (finite), some
    /// zeros and subnormals, now and then ±∞/NaN.
    fn row(next: &mut dyn FnMut() -> u32, lo: u32, span: u32) -> [u16; MAX_HEAD_DIM] {
        core::array::from_fn(|_| match next() % 64 {
            0 => 0x7C00 | (next() as u16 & 0x83FF), // ±∞ / NaN
            1..=4 => next() as u16 & 0x83FF,        // ±0, subnormal
            _ => {
                let e = (lo + next() % span.max(1)).min(30) as u16;
                (next() as u16 & 0x83FF) | (e << 10)
            }
        })
    }

    /// Exact value of a binary16, in units of 2^-24.
    fn fixed24(h: u16) -> i128 {
        let (m, sh) = crate::quant::fixed::f16_fixed(h);
        (m as i128) << sh
    }

    /// [`win_k`] at its bound: q and K rows of the largest binary16
    /// mantissas, all at the top of their windows (every q window from 0
    /// to [`WIN_Q`], the K window `win_k(hd, wq)`), give dots equal to the
    /// exact sums in every build: a window one binade wider overflows
    /// `i64` for the widest q windows.
    #[test]
    fn qk_row_at_the_window_bound() {
        let builds = qk_builds::builds();
        for hd in [1usize, 7, 64, 100, MAX_HEAD_DIM] {
            for wq in 0..=WIN_Q {
                let top = 25u32; // exponent field 26: values near 2^11
                let h = 0x03FF | ((top as u16 + 1) << 10);
                let q = [h; MAX_HEAD_DIM];
                let mut qx = [0i32; MAX_HEAD_DIM];
                let (fits, _) = fix_row(&q[..hd], top - wq, &mut qx[..hd]);
                assert!(fits);
                let win = win_k(hd, wq);
                let exact = hd as i128 * fixed24(h) * fixed24(h);
                let mut xs = [0i32; MAX_HEAD_DIM];
                let mut dots = [0i64; 1];
                let got = qk_row(&q[..hd], &qx[..hd], win, &mut xs, &mut dots);
                let (k_base, _) = got.expect("fits");
                assert_eq!(
                    (dots[0] as i128) << (top - wq + k_base),
                    exact,
                    "hd {hd} wq {wq}"
                );
                for f in builds.iter().flatten() {
                    let mut d2 = [0i64; 1];
                    assert_eq!(f(&q[..hd], &qx[..hd], win, &mut xs, &mut d2), got);
                    assert_eq!(d2, dots, "hd {hd} wq {wq}");
                }
            }
        }
    }

    /// The fixed-point row kernels against exact `i128` sums: when a row
    /// fits its window, `qk_row`'s dots scaled by the two bases are the
    /// exact `Σ q·k`, and `pv_row` adds exactly `P·v`; rows of every
    /// exponent spread (fitting and not) and every SIMD build the CPU runs.
    #[test]
    fn fixed_row_kernels_are_exact() {
        let simd: [Option<RowFns>; 2] = {
            let (qk, pv) = (qk_builds::builds(), pv_builds::builds());
            [0, 1].map(|i| qk[i].zip(pv[i]).map(|(qk, pv)| RowFns { qk, pv }))
        };
        let mut next = crate::testutil::lcg(0x9E37_79B9_7F4A_7C15u64);
        let (mut fitted, mut missed) = (0, 0);
        for round in 0..2000 {
            let hd = [1usize, 7, 16, 64, 100, MAX_HEAD_DIM][round % 6];
            let g = 1 + round % MAX_GROUP;
            let span = 1 + next() % 31;
            let lo = next() % 31;
            let k = row(&mut next, lo, span);
            let k = &k[..hd];
            let mut qb = [[0u16; MAX_HEAD_DIM]; MAX_GROUP];
            let mut qx = [0i32; MAX_GROUP * MAX_HEAD_DIM];
            let mut q_base = [0u32; MAX_GROUP];
            let mut q_fits = true;
            // q windows of WIN_Q or 0..=WIN_Q binades; the K window follows
            // the widest.
            let mut wq = 0;
            for gi in 0..g {
                let span = 1 + next() % 18;
                let lo = next() % 20;
                qb[gi] = row(&mut next, lo, span);
                let top = max_sh(&qb[gi][..hd]);
                let w = if round % 2 == 0 {
                    WIN_Q
                } else {
                    next() % (WIN_Q + 1)
                };
                q_base[gi] = top.saturating_sub(w);
                wq = wq.max(top - q_base[gi]);
                let (fits, _) = fix_row(&qb[gi][..hd], q_base[gi], &mut qx[gi * hd..(gi + 1) * hd]);
                q_fits &= fits;
            }
            let win = win_k(hd, wq);
            if !q_fits {
                continue;
            }
            let finite = |h: &[u16]| h.iter().all(|&b| !f16_nonfinite(b));
            let mut dots = [0i64; MAX_GROUP];
            let mut xs = [0i32; MAX_HEAD_DIM];
            let got = qk_row(k, &qx[..g * hd], win, &mut xs, &mut dots[..g]);
            match got {
                Some((k_base, bad)) => {
                    fitted += 1;
                    assert_eq!(bad, !finite(k));
                    for gi in 0..g {
                        let exact: i128 = (0..hd).map(|d| fixed24(qb[gi][d]) * fixed24(k[d])).sum();
                        if finite(k) && finite(&qb[gi][..hd]) {
                            assert_eq!((dots[gi] as i128) << (q_base[gi] + k_base), exact);
                        }
                    }
                }
                None => missed += 1,
            }
            // pv: the row fixed at the base of its own largest exponent.
            let base = max_sh(k).saturating_sub(WIN_V);
            let p: [i32; MAX_GROUP] = core::array::from_fn(|_| (next() % (1 << 25)) as i32);
            let init: [i64; MAX_GROUP * MAX_HEAD_DIM] = core::array::from_fn(|_| next() as i64);
            let mut acc = init;
            let pv = pv_row(k, base, &p[..g], &mut xs, &mut acc[..g * hd]);
            match pv {
                Some(bad) => {
                    assert_eq!(bad, !finite(k));
                    for gi in 0..g {
                        for d in 0..hd {
                            let add = (acc[gi * hd + d] - init[gi * hd + d]) as i128;
                            if finite(k) {
                                assert_eq!(add << base, p[gi] as i128 * fixed24(k[d]));
                            }
                        }
                    }
                }
                None => assert_eq!(acc, init, "a row that does not fit writes nothing"),
            }
            for fns in simd.iter().flatten() {
                let mut d2 = [0i64; MAX_GROUP];
                assert_eq!(
                    (fns.qk)(k, &qx[..g * hd], win, &mut xs, &mut d2[..g]),
                    got,
                    "qk, hd {hd}"
                );
                assert_eq!(d2, dots, "qk, hd {hd}");
                let mut acc2 = init;
                assert_eq!(
                    (fns.pv)(k, base, &p[..g], &mut xs, &mut acc2[..g * hd]),
                    pv,
                    "pv, hd {hd}"
                );
                assert_eq!(acc2, acc, "pv, hd {hd}");
            }
        }
        assert!(
            fitted > 100 && missed > 100,
            "both paths: {fitted} / {missed}"
        );
    }

    /// V rows of `HD` values; K rows are not read.
    struct VRows<const HD: usize>([[u16; HD]; 300]);

    impl<const HD: usize> KvRead for VRows<HD> {
        fn k(&self, pos: usize) -> KvSlice<'_> {
            KvSlice::F16(&self.0[pos])
        }
        fn v(&self, pos: usize) -> KvSlice<'_> {
            KvSlice::F16(&self.0[pos])
        }
    }

    /// `pv_group` against exact `i128` sums for any probabilities, also
    /// ones softmax never gives: above 1, ±∞/NaN, and 300 rows of p = 1
    /// against the largest V values, whose fixed-point sums would wrap past
    /// 2^63 without the `Σ|P|` check.
    #[test]
    fn pv_group_is_exact_for_any_probabilities() {
        const HD: usize = 8;
        let mut next = crate::testutil::lcg(0x5EED_0FA7_7E00);
        for case in 0..200 {
            let group = 1 + case % MAX_GROUP;
            let n_ctx = [1, 5, 40, 300][case % 4];
            let mut rows = VRows([[0u16; HD]; 300]);
            let extreme = case % 5 == 0;
            for r in rows.0.iter_mut() {
                let span = 1 + next() % 30;
                *r = if extreme {
                    [0x7BFF; HD] // 65504
                } else {
                    let lo = next() % (32 - span);
                    let full = row(&mut next, lo, span);
                    core::array::from_fn(|i| full[i])
                };
            }
            let mut p = [F32::ZERO; MAX_GROUP * 300];
            for x in p[..group * n_ctx].iter_mut() {
                let h: u16 = match next() % 16 {
                    _ if extreme => 0x3C00, // 1.0
                    0 => next() as u16,     // anything, > 1 and ±∞/NaN too
                    1 => 0,
                    _ => next() as u16 % 0x3C01, // 0 ..= 1
                };
                *x = F32::from_f16_bits(h);
            }
            let mut out = [F32::ZERO; MAX_GROUP * HD];
            pv_group(
                &rows,
                0,
                n_ctx,
                (group, HD),
                &p[..group * n_ctx],
                &mut out[..group * HD],
            )
            .unwrap();
            for gi in 0..group {
                for d in 0..HD {
                    let mut bad = false;
                    let mut sum = 0i128;
                    for t in 0..n_ctx {
                        let (pb, vb) = (p[gi * n_ctx + t].to_f16_bits(), rows.0[t][d]);
                        bad |= f16_nonfinite(pb) | rows.0[t].iter().any(|&b| f16_nonfinite(b));
                        sum += fixed24(pb) * fixed24(vb);
                    }
                    let want = ExactAcc {
                        sum,
                        nonfinite: bad,
                    }
                    .finish();
                    assert_eq!(out[gi * HD + d].to_bits(), want.to_bits(), "case {case}");
                }
            }
        }
    }
}
