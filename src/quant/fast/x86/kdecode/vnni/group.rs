//! The AVX-512 VNNI decode kernels with two to [`GROUP_V`] input rows (a
//! batched decode or speculative verify step): [`super`]'s super-block
//! values, factors and dots, each weight super-block's values and
//! factors and each weight row's chunk scales taken once for all the
//! input rows of a pass (two, four or eight: loops of constant length,
//! their sums in registers). A module of its own so that the one-row
//! kernel of [`super`] is compiled as it is alone.
//!
//! Contract and verification: [`super`]'s (the same terms, chunk limits
//! and `i128` steps; `tests/kernels/matmul.rs` runs it at M = 2 to 4).
#![forbid(unsafe_code)]

use super::super::{
    ChunkWeights, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, chunk_weights, decode_rows_with, lanes_i128,
    q4_k_chunk_by_row_kernel, q5_k_chunk_by_row_kernel, q6_k_chunk_by_row_kernel,
};
use super::{
    ActSuperV, ActSuperV6, act_super_v, act_super_v6, q4_k_super_v, q4_k_weights_v, q5_k_weights_v,
    q6_k_super_v, q6_k_weights_v,
};
use crate::F32;
use crate::quant::act::{ActRow, FLAG_D_NONFINITE};
use crate::quant::block::QK_K;
use crate::quant::fast::kquant::{self, CHUNK_SUPERS};
use crate::quant::fixed::ExactAcc;
use core::arch::x86_64::*;

/// Most input rows per pass of the kernel with several input rows: each
/// weight super-block's values and factors, and each weight row's chunk
/// scales, taken once for all of them.
const GROUP_V: usize = kquant::DECODE_PASS_ROWS;

/// One weight row `row` (`B`-byte super-blocks; `Q4`: Q4_K or Q5_K, else
/// Q6_K) against up to `G` input rows `acts` (their terms
/// `terms`, one row's after the other): [`super::super::decode_row`]'s loop —
/// per chunk the row's scales once ([`chunk_weights`]), per super-block
/// its values and factors once (`weights`), then per input row within the
/// chunk limits `lims` its terms in `i64` lanes (`dot`), beyond them the
/// row kernel's body for that chunk (`by_row_kernel`).
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
#[inline]
fn decode_row_group_v<const B: usize, const Q4: bool, W, T, const G: usize>(
    (row, acts, terms): (&[u8], &[ActRow<'_>], &[T]),
    lims: (u32, u32),
    weights: impl Fn(&[u8; B], &ChunkWeights, usize) -> W,
    dot: impl Fn(&W, &[i8; QK_K], &T) -> __m512i,
    by_row_kernel: impl Fn(&mut ExactAcc, &[u8], &ActRow<'_>, usize),
) -> [ExactAcc; G] {
    let acts = &acts[..acts.len().min(G)];
    let n = row.len() / B;
    let mut accs = [ExactAcc::default(); G];
    let mut ys: [&[[i8; QK_K]]; G] = [&[]; G];
    for ((acc, y), a) in accs.iter_mut().zip(&mut ys).zip(acts) {
        acc.nonfinite = a.flags & FLAG_D_NONFINITE != 0;
        *y = a.qs.as_chunks::<QK_K>().0;
    }
    for (c, bc) in row.as_chunks::<B>().0.chunks(CHUNK_SUPERS).enumerate() {
        let w = chunk_weights::<B, Q4>(bc);
        // `None` for the input rows past `acts` too: the loop below runs
        // all `G` (unrolled, its sums in registers).
        let mut fit = [None; G];
        for (f, a) in fit.iter_mut().zip(acts) {
            *f = w.fit(a.ch.get(c), lims);
        }
        let mut s = [_mm512_setzero_si512(); G];
        for (i, blk) in bc.iter().enumerate() {
            let b = CHUNK_SUPERS * c + i;
            let wq = weights(blk, &w, i);
            for k in 0..G {
                if let (Some(_), Some(yq), Some(t)) = (fit[k], ys[k].get(b), terms.get(k * n + b)) {
                    s[k] = _mm512_add_epi64(s[k], dot(&wq, yq, t));
                }
            }
        }
        for (k, (acc, a)) in accs.iter_mut().zip(acts).enumerate() {
            acc.nonfinite |= w.bad;
            match fit[k] {
                Some(shift) => {
                    let (lo, hi) = (
                        _mm512_castsi512_si256(s[k]),
                        _mm512_extracti64x4_epi64(s[k], 1),
                    );
                    acc.sum += super::super::shl63(lanes_i128(_mm256_add_epi64(lo, hi)), shift);
                }
                None => by_row_kernel(acc, bc.as_flattened(), a, c),
            }
        }
    }
    accs
}

/// The kernel's checks and passes ([`decode_rows_with`]) for a format
/// and several input rows: its terms (`zero`, `term`), chunk limits
/// `lims`, values and factors (`weights`), super-block dot (`dot`) and
/// row kernel's body (`by_row_kernel`); passes of two, four or
/// [`GROUP_V`] by [`decode_row_group_v`].
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
#[inline]
fn decode_group<const B: usize, const Q4: bool, W, T: Copy>(
    (rows, acts, out, col): (&[u8], &[ActRow<'_>], &mut [F32], usize),
    terms: (T, impl Fn(&ActRow<'_>, usize) -> T),
    lims: (u32, u32),
    weights: impl Fn(&[u8; B], &ChunkWeights, usize) -> W + Copy,
    dot: impl Fn(&W, &[i8; QK_K], &T) -> __m512i + Copy,
    by_row_kernel: impl Fn(&mut ExactAcc, &[u8], &ActRow<'_>, usize) + Copy,
) -> bool {
    let out = (out, col);
    let f = (weights, dot, by_row_kernel);
    match acts.len() {
        2 => decode_rows_with::<B, 2, T>(rows, acts, out, terms, |w, a, t| {
            decode_row_group_v::<B, Q4, W, T, 2>((w, a, t), lims, f.0, f.1, f.2)
        }),
        3 | 4 => decode_rows_with::<B, 4, T>(rows, acts, out, terms, |w, a, t| {
            decode_row_group_v::<B, Q4, W, T, 4>((w, a, t), lims, f.0, f.1, f.2)
        }),
        _ => decode_rows_with::<B, GROUP_V, T>(rows, acts, out, terms, |w, a, t| {
            decode_row_group_v::<B, Q4, W, T, GROUP_V>((w, a, t), lims, f.0, f.1, f.2)
        }),
    }
}

/// The Q4_K kernel with several input rows.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
pub(super) fn q4_k_decode(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_group::<Q4_K_BYTES, true, _, _>(
        (rows, acts, out, col),
        (ActSuperV::zero(), |a, b| act_super_v(a, b)),
        (kquant::CHUNK_WLIM_Q4_K, kquant::CHUNK_LIM_Q4_K),
        |blk, w, i| q4_k_weights_v(blk, (w.m[2 * i], w.m[2 * i + 1])),
        |w, yq, t| q4_k_super_v(w, yq, t),
        |acc, blks, a, c| q4_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}

/// The Q5_K kernel with several input rows.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
pub(super) fn q5_k_decode(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_group::<Q5_K_BYTES, true, _, _>(
        (rows, acts, out, col),
        (ActSuperV::zero(), |a, b| act_super_v(a, b)),
        (kquant::CHUNK_WLIM_Q5_K, kquant::CHUNK_LIM_Q5_K),
        |blk, w, i| q5_k_weights_v(blk, (w.m[2 * i], w.m[2 * i + 1])),
        |w, yq, t| q4_k_super_v(w, yq, t),
        |acc, blks, a, c| q5_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}

/// The Q6_K kernel with several input rows.
#[target_feature(
    enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw,avx512vnni"
)]
pub(super) fn q6_k_decode(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    decode_group::<Q6_K_BYTES, false, _, _>(
        (rows, acts, out, col),
        (ActSuperV6::zero(), |a, b| act_super_v6(a, b)),
        (kquant::CHUNK_WLIM_Q6_K, kquant::CHUNK_LIM_Q6_K),
        |blk, w, i| q6_k_weights_v(blk, w.m[i]),
        |w, yq, t| q6_k_super_v(w, yq, t),
        |acc, blks, a, c| q6_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}
