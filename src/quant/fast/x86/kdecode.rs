//! The x86 decode kernels of Q4_K, Q5_K and Q6_K (x86-64, feature `std`): every
//! weight row of a call against one input row (M = 1), or a few (batched
//! decode, and prefill without a VNNI tile: up to [`kquant::DECODE_ROWS`]
//! a call, in passes of up to [`GROUP`]: each weight super-block decoded
//! once per pass), in AVX2 intrinsics ([`avx2`]; also compiled with the
//! AVX-512 features: [`avx512`]; with one input row on AVX-512 VNNI, the
//! 512-bit build of [`vnni`]). Each cell is the exact sum of
//! [`kquant`]'s row kernel, rounded once.
//!
//! Contract: for weight rows `rows` (whole rows of `n_in / 256`
//! super-blocks) and input rows `acts` (each with its `qs`, `sc` and `ch`
//! as long as the rows), a [`kquant::DecodeFn`] sets each cell `(row, col +
//! j)` of `out` (as many rows as `rows`, of `out.len() / rows` cells) to
//! `q4_k_row(row, acts[j]).finish()` (`q5_k_row`, `q6_k_row`), the same bits as
//! [`crate::quant::dot::dot_row`], and no other cell; it returns `false`,
//! writing nothing, for input rows it does not take (more than
//! `DECODE_ROWS`, one longer than [`MAX_TERMS`] super-blocks, or lengths
//! that do not match) or columns past the row's cells.
//! Verified by `tests/kernels/matmul.rs` (every path at M = 1 to 71
//! asserted to run this kernel and to give the reference's bits;
//! `kquant_decode_blocks_agree` over several of the driver's blocks; random
//! and wild scales; `kquant_chunk_limits_agree` at and one past each limit
//! with one and two input rows; `kquant_decode_row_length_limit`),
//! `tests/kernels_guarded.rs` (guard pages), `tests/kernels/quant_exact.rs`.
//!
//! ## What it saves over the row kernel
//!
//! The row kernel ([`super::kquant`]) takes, per weight row and
//! super-block, the input's terms (shift base and spread, mantissas,
//! shifts: scalar work on eight 32-byte block scales), the weight's
//! 6-bit scales one by one, and one or two `i128` steps. Here the input's
//! terms are taken once per call for all rows ([`ActSuper`]), each
//! weight super-block's values and factors once per pass of input rows
//! ([`Q4kSuper`], [`Q6kSuper`]), the scales unpacked with eight-byte
//! words, and the `i128` step taken once per chunk of [`kquant::CHUNK_SUPERS`] super-blocks, as the AVX-512 VNNI
//! tile does: per weight row and chunk the smallest shift of the row's
//! non-zero `f16` scales `wbase` ([`ChunkWeights`]), per input row its
//! chunk's `dbase` (its `ChunkScale`; `drel_j = ash_j − dbase`).
//!
//! With one input row the kernel asks the cache for the bytes
//! [`PREFETCH_AHEAD`] past each super-block it decodes (the rows of a call
//! are contiguous): the hardware prefetcher alone left the loop waiting on
//! memory.
//!
//! ## Why it is exact
//!
//! Within the chunk limits (weight spread `≤ CHUNK_WLIM`, weight plus
//! activation spread `≤ CHUNK_LIM`: [`kquant::CHUNK_WLIM_Q4_K`] 14 /
//! [`kquant::CHUNK_LIM_Q4_K`] 16, [`kquant::CHUNK_WLIM_Q6_K`] 9 /
//! [`kquant::CHUNK_LIM_Q6_K`] 14) every sub-block's term goes into an
//! `i64` lane shifted relative to `wbase + dbase`:
//!
//! * Q4_K ([`q4_k_super`]): `((sumq·am)·(sc·dm << wrel_d) − (bsum·am)·(mn·nm
//!   << wrel_n)) << drel`: `sumq·am ≤ 60960·2047 < 2^27` and `bsum·am ≤
//!   4064·2047 < 2^23` (`vpmulld`), the weight factors `≤ 63·2047·2^14 <
//!   2^31` (`vpmulld`), their products by `vpmuldq`; a term is at most
//!   `(60960 + 4064)·63·2047²·2^16 < 2^59.97`.
//! * Q5_K (the same, values `0..=31` by [`q5_k_weights`]): `sumq·am ≤
//!   125984·2047 < 2^28`; a term is at most `(125984 + 4064)·63·2047²·
//!   2^15 < 2^59.97` within [`kquant::CHUNK_LIM_Q5_K`] 15 (at 16 eight
//!   of them could pass 2^63), [`kquant::CHUNK_WLIM_Q5_K`] 14 as Q4_K's.
//! * Q6_K ([`q6_k_super`]): `(sumi·((dm << wrel)·am)) << drel`: `|sumi| <
//!   2^24`, `(dm << wrel)·am ≤ 2047²·2^9 < 2^31` (`vpmulld`); a term is at
//!   most `2^24·2^22·2^14 = 2^60`.
//!
//! Each of the four lanes gathers two sub-blocks a super-block, eight
//! terms a chunk: it stays below 2^63. At the chunk's end the lanes are
//! summed in `i128` (each lane is bounded, not their sum) and added at
//! `2^(wbase + dbase)` (each shift at most 29, the sum masked to
//! `0..=63`: [`shl63`]). Integer addition being associative, that is the
//! row kernel's integer. Beyond the limits (rare: a spread of 2^14
//! within 1024 elements) that row's chunk goes through the row kernel's
//! body ([`q4_k_rows_vec`], [`kquant::q5_k_row`], [`q6_k_rows_vec`]) and
//! its sum is added.
//!
//! ## Unsafe review
//! * Every `unsafe` block is a call of a `#[target_feature]` function, made
//!   only through a function pointer that [`avx2`] or [`avx512`] hands out
//!   after [`crate::simd::level`] confirmed each of its features
//!   ([`Level::Avx2`]: AVX2, BMI1, BMI2, LZCNT; [`Level::Avx512`]: those
//!   and AVX-512 F, CD, VL, DQ, BW).
//! * Loads go through [`load32`] (length asserted at the load); there is no
//!   pointer arithmetic, no write through a pointer, no uninitialised
//!   memory.
#![allow(unsafe_code)]

use super::kquant::{
    half_sums, load32, q4_k_rows_vec, q6_k_rows_vec, q6_k_unpack, shl63, sum8v, v8,
};
use crate::F32;
use crate::quant::GgmlType;
use crate::quant::act::{ActRow, CHUNK_BLOCKS, ChunkScale, FLAG_D_NONFINITE};
use crate::quant::block::{QK, QK_K};
use crate::quant::fast::kquant::{self, CHUNK_SUPERS};
use crate::quant::fixed::ExactAcc;
use crate::simd::Level;
use core::arch::x86_64::*;

mod vnni;
pub(in crate::quant::fast) use vnni::vnni;

/// Super-blocks of input-row terms a decode kernel holds, and so of the
/// longest input row it takes (65536 elements; the terms live on the
/// stack: [`ActSuper`] 160 bytes each, 40 KiB, or 10 KiB where a pass's
/// terms fit [`FEW_TERMS`]; the VNNI build's, with the activations
/// reordered, 448 bytes each: 112 KiB, or 28 KiB).
pub const MAX_TERMS: usize = 256;

// A chunk of super-blocks is one activation chunk: `drel` and `ChunkScale`
// are relative to it.
const _: () = assert!(CHUNK_SUPERS * QK_K == CHUNK_BLOCKS * QK);

/// Bytes of a Q4_K, a Q5_K and a Q6_K super-block.
const Q4_K_BYTES: usize = 144;
const Q5_K_BYTES: usize = 176;
const Q6_K_BYTES: usize = 210;

/// The AVX2 decode kernel of Q4_K, Q5_K or Q6_K if this CPU runs [`Level::Avx2`];
/// `None` for other formats.
pub(in crate::quant::fast) fn avx2(ty: GgmlType) -> Option<kquant::DecodeFn> {
    if crate::simd::level() < Level::Avx2 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(q4_k_decode_avx2_entry),
        GgmlType::Q5_K => Some(q5_k_decode_avx2_entry),
        GgmlType::Q6_K => Some(q6_k_decode_avx2_entry),
        _ => None,
    }
}

/// [`avx2`]'s kernels compiled with the AVX-512 features too (the same
/// intrinsics), if this CPU runs [`Level::Avx512`].
pub(in crate::quant::fast) fn avx512(ty: GgmlType) -> Option<kquant::DecodeFn> {
    if crate::simd::level() < Level::Avx512 {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(q4_k_decode_avx512_entry),
        GgmlType::Q5_K => Some(q5_k_decode_avx512_entry),
        GgmlType::Q6_K => Some(q6_k_decode_avx512_entry),
        _ => None,
    }
}

/// One super-block's input terms, taken once per call for every weight
/// row: the mantissas `am_j` (lane `j`); `drel_j` for the even and the odd
/// sub-blocks as `vpsllvq` counts (the low dword of each `i64` lane, odd
/// ones moved down); `x`: Q4_K's `bsum_j·am_j` (`< 2^23`) likewise even
/// and odd, Q6_K's `32·Σ y` over each 16-element half in [`half_sums`]'
/// layout.
#[derive(Clone, Copy)]
struct ActSuper {
    am: __m256i,
    rel: [__m256i; 2],
    x: [__m256i; 2],
}

/// The [`ActSuper`] of super-block `b` of `a` (`Q6`: Q6_K's `x`, else
/// Q4_K's); the caller checks that `a` has it.
#[target_feature(enable = "avx2")]
#[inline]
fn act_super<const Q6: bool>(a: &ActRow<'_>, b: usize) -> ActSuper {
    let (mut am, mut rel, mut bsum) = ([0i32; 8], [0i32; 8], [0i32; 8]);
    for (j, s) in a.sc[8 * b..8 * b + 8].iter().enumerate() {
        // `drel` is 0 where `dm` is (`fill_chunks`): that term is 0.
        (am[j], rel[j], bsum[j]) = (s.dm, s.drel as i32, s.bsum);
    }
    let (am, rel) = (v8(am), v8(rel));
    let rel = [
        _mm256_and_si256(rel, _mm256_set1_epi64x(0xFFFF_FFFF)),
        _mm256_srli_epi64(rel, 32),
    ];
    let x = if Q6 {
        let (c32, ones) = (_mm256_set1_epi8(32), _mm256_set1_epi16(1));
        let y: [__m256i; 8] = core::array::from_fn(|k| load32(a.qs, QK_K * b + 32 * k));
        let (o0, o1) = half_sums(y.map(|y| _mm256_madd_epi16(_mm256_maddubs_epi16(c32, y), ones)));
        [o0, o1]
    } else {
        let bam = _mm256_mullo_epi32(v8(bsum), am);
        [bam, _mm256_shuffle_epi32(bam, 0xF5)]
    };
    ActSuper { am, rel, x }
}

/// One weight row's `f16` scales over one chunk of at most
/// [`CHUNK_SUPERS`] super-blocks: the mantissas shifted by their shift
/// above the row's chunk base (`m`; 0 for a zero mantissa), Q4_K's lane
/// `2i` super-block `i`'s `d`, `2i + 1` its `dmin`, Q6_K's lane `i` its
/// `d`; the row's chunk base `base` and the spread above it; whether a
/// scale is ±∞/NaN (`bad`).
struct ChunkWeights {
    m: [i32; 8],
    base: u32,
    spread: u32,
    bad: bool,
}

impl ChunkWeights {
    /// The chunk sum's shift `wbase + dbase` against the input chunk `ch`
    /// if the spreads are within the limits `(wlim, lim)`.
    #[inline(always)]
    fn fit(&self, ch: Option<&ChunkScale>, (wlim, lim): (u32, u32)) -> Option<u32> {
        ch.filter(|ch| self.spread <= wlim && ch.dspread <= lim - self.spread.min(lim))
            .map(|ch| self.base + ch.dbase)
    }
}

/// The smallest and the largest of the eight `u32` lanes of `lo`, `hi`.
#[target_feature(enable = "avx2")]
#[inline]
fn min_max_u32(lo: __m256i, hi: __m256i) -> (u32, u32) {
    let lo = _mm256_min_epu32(lo, _mm256_permute2x128_si256(lo, lo, 1));
    let hi = _mm256_max_epu32(hi, _mm256_permute2x128_si256(hi, hi, 1));
    let lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0x4E));
    let hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0x4E));
    let lo = _mm256_min_epu32(lo, _mm256_shuffle_epi32(lo, 0xB1));
    let hi = _mm256_max_epu32(hi, _mm256_shuffle_epi32(hi, 0xB1));
    (
        _mm256_cvtsi256_si32(lo) as u32,
        _mm256_cvtsi256_si32(hi) as u32,
    )
}

/// The [`ChunkWeights`] of the super-blocks `blks` (at most
/// [`CHUNK_SUPERS`]; `Q4`: Q4_K's (Q5_K's) `d` and `dmin` at bytes 0 and 2, else
/// Q6_K's `d` at 208): the `f16`s decoded in `i32` lanes as
/// [`f16_fixed`](crate::quant::fixed::f16_fixed) does
/// (`mant = frac | 0x400` unless the exponent field `e` is 0, `sh =
/// max(e, 1) − 1`, the sign applied), the base and spread over the lanes
/// with a non-zero mantissa, each shifted by its shift above the base.
#[target_feature(enable = "avx2")]
#[inline]
fn chunk_weights<const B: usize, const Q4: bool>(blks: &[[u8; B]]) -> ChunkWeights {
    // Straight into lanes: through a stack array, the four 32-bit stores
    // and the wider load missed store forwarding (a stall per chunk).
    let word = |b: &[u8; B]| {
        if Q4 {
            i32::from_le_bytes([b[0], b[1], b[2], b[3]])
        } else {
            u16::from_le_bytes([b[208], b[209]]) as i32
        }
    };
    // A whole chunk without a bounds test per word (the chain of tests
    // of `get` stood in the loop of every chunk).
    let words: [i32; 4] = match blks {
        [b0, b1, b2, b3] => [word(b0), word(b1), word(b2), word(b3)],
        _ => core::array::from_fn(|i| blks.get(i).map_or(0, word)),
    };
    let w = _mm_setr_epi32(words[0], words[1], words[2], words[3]);
    let h = if Q4 {
        _mm256_cvtepu16_epi32(w)
    } else {
        _mm256_zextsi128_si256(w)
    };
    let c = |x: i32| _mm256_set1_epi32(x);
    let e = _mm256_and_si256(_mm256_srli_epi32(h, 10), c(31));
    let frac = _mm256_and_si256(h, c(0x3FF));
    let normal = _mm256_andnot_si256(_mm256_cmpeq_epi32(e, c(0)), c(0x400));
    // Negated where bit 15 is set (`h << 16` negative; zero only for
    // `h == 0`, whose mantissa is 0).
    let mant = _mm256_sign_epi32(_mm256_or_si256(frac, normal), _mm256_slli_epi32(h, 16));
    let sh = _mm256_sub_epi32(_mm256_max_epu32(e, c(1)), c(1));
    let dead = _mm256_cmpeq_epi32(_mm256_and_si256(h, c(0x7FFF)), c(0));
    let bad = _mm256_movemask_epi8(_mm256_cmpeq_epi32(e, c(31))) != 0;
    let (lo, hi) = min_max_u32(_mm256_or_si256(sh, dead), _mm256_andnot_si256(dead, sh));
    let base = if lo == u32::MAX { 0 } else { lo };
    let spread = hi.saturating_sub(base);
    // Within `CHUNK_WLIM` (at most 14) each shift keeps `mant << rel` in
    // `i32` (beyond it the lanes are not used).
    let rel = _mm256_andnot_si256(dead, _mm256_sub_epi32(sh, c(base as i32)));
    let mut m = [0i32; 8];
    // SAFETY: `m` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(m.as_mut_ptr().cast(), _mm256_sllv_epi32(mant, rel)) };
    ChunkWeights {
        m,
        base,
        spread,
        bad,
    }
}

/// The four `i64` lanes of `v` summed in `i128`.
#[target_feature(enable = "avx2")]
#[inline]
fn lanes_i128(v: __m256i) -> i128 {
    let mut l = [0i64; 4];
    // SAFETY: `l` is 32 writable bytes; the store is unaligned.
    unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), v) };
    l.iter().map(|&x| x as i128).sum()
}

/// `Σ (e_j << rel_j)` of the even and odd sub-blocks' `i64` terms `e`, `o`.
#[target_feature(enable = "avx2")]
#[inline]
fn shifted_pair(e: __m256i, o: __m256i, act: &ActSuper) -> __m256i {
    _mm256_add_epi64(
        _mm256_sllv_epi64(e, act.rel[0]),
        _mm256_sllv_epi64(o, act.rel[1]),
    )
}

/// The 6-bit scales and mins of a Q4_K super-block as `i32` lanes
/// (`get_scale_min_k4` on three little-endian words: scales `0..4` are
/// the low six bits of word 0, `4..8` the low nibbles of word 2 with the
/// top two bits of word 0 above; mins likewise from words 1 and 2).
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_scales(blk: &[u8]) -> (__m256i, __m256i) {
    let w = |i: usize| u32::from_le_bytes([blk[i], blk[i + 1], blk[i + 2], blk[i + 3]]);
    let (s0, s1, s2) = (w(4), w(8), w(12));
    let (m6, m4, m2) = (0x3F3F_3F3F, 0x0F0F_0F0F, 0x0303_0303);
    let sc = (s0 & m6) as u64 | ((((s2 & m4) | ((s0 >> 6) & m2) << 4) as u64) << 32);
    let mn = (s1 & m6) as u64 | (((((s2 >> 4) & m4) | ((s1 >> 6) & m2) << 4) as u64) << 32);
    let lanes = |x: u64| _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(x as i64));
    (lanes(sc), lanes(mn))
}

/// One Q4_K super-block of one weight row, decoded once for every input
/// row of the pass: the nibbles (`q[2c]` the low ones of bytes `32c..`,
/// sub-block `2c`; `q[2c + 1]` the high ones) and the weight factors
/// `sc·dmw`, `mn·nmw` (`dmw = dm << wrel_d`, `nmw = nm << wrel_n`) for
/// the even sub-blocks and, moved down, the odd ones.
struct Q4kSuper {
    q: [__m256i; 8],
    wd: [__m256i; 2],
    wn: [__m256i; 2],
}

/// The [`Q4kSuper`] of `blk` with the weight factors `(dmw, nmw)`.
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_weights(blk: &[u8; Q4_K_BYTES], (dmw, nmw): (i32, i32)) -> Q4kSuper {
    let m4 = _mm256_set1_epi8(15);
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let b = load32(blk, 16 + 32 * c);
        q[2 * c] = _mm256_and_si256(b, m4);
        q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
    }
    let (sc, mn) = q4_k_scales(blk);
    let wd = _mm256_mullo_epi32(sc, _mm256_set1_epi32(dmw));
    let wn = _mm256_mullo_epi32(mn, _mm256_set1_epi32(nmw));
    let odd = |x| _mm256_shuffle_epi32(x, 0xF5);
    Q4kSuper {
        q,
        wd: [wd, odd(wd)],
        wn: [wn, odd(wn)],
    }
}

/// The fifth bit of sub-block `k`'s values (bit `k` of each `qh` byte) at
/// bit 4 of each byte: `qh` shifted in 16-bit lanes so that bit `k` of
/// either byte lands on that byte's bit 4, the rest masked off.
#[target_feature(enable = "avx2")]
#[inline]
fn q5_k_high(qh: __m256i, k: usize) -> __m256i {
    let at4 = match k {
        0 => _mm256_slli_epi16(qh, 4),
        1 => _mm256_slli_epi16(qh, 3),
        2 => _mm256_slli_epi16(qh, 2),
        3 => _mm256_slli_epi16(qh, 1),
        4 => qh,
        5 => _mm256_srli_epi16(qh, 1),
        6 => _mm256_srli_epi16(qh, 2),
        _ => _mm256_srli_epi16(qh, 3),
    };
    _mm256_and_si256(at4, _mm256_set1_epi8(16))
}

/// The [`Q4kSuper`] of a Q5_K super-block `blk` (`d`, `dmin` and the
/// scales where Q4_K has them, `qh` at 16, nibbles at 48) with the weight
/// factors `(dmw, nmw)`: sub-block `2c` the low nibbles of bytes `48 +
/// 32c..` with bit `2c` of `qh` above, `2c + 1` the high ones with bit
/// `2c + 1` (`q5_k_sumq`'s values, `0..=31`).
#[target_feature(enable = "avx2")]
#[inline]
fn q5_k_weights(blk: &[u8; Q5_K_BYTES], (dmw, nmw): (i32, i32)) -> Q4kSuper {
    let m4 = _mm256_set1_epi8(15);
    let qh = load32(blk, 16);
    let mut q = [_mm256_setzero_si256(); 8];
    for c in 0..4 {
        let b = load32(blk, 48 + 32 * c);
        let lo = _mm256_and_si256(b, m4);
        let hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
        q[2 * c] = _mm256_or_si256(lo, q5_k_high(qh, 2 * c));
        q[2 * c + 1] = _mm256_or_si256(hi, q5_k_high(qh, 2 * c + 1));
    }
    let (sc, mn) = q4_k_scales(blk);
    let wd = _mm256_mullo_epi32(sc, _mm256_set1_epi32(dmw));
    let wn = _mm256_mullo_epi32(mn, _mm256_set1_epi32(nmw));
    let odd = |x| _mm256_shuffle_epi32(x, 0xF5);
    Q4kSuper {
        q,
        wd: [wd, odd(wd)],
        wn: [wn, odd(wn)],
    }
}

/// One Q4_K super-block `w` of one weight row against activations `yq`
/// (256) as chunk-sum lanes: the sub-block sums `sumq_j` by `vpmaddubsw` /
/// `vpmaddwd` (nibbles `0..=15` times `-127..=127`, pairs at most
/// `2·15·127`; Q5_K's values `0..=31`, `2·31·127`) and [`sum8v`], then the
/// terms of the module header.
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_super(w: &Q4kSuper, yq: &[i8; QK_K], act: &ActSuper) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let v: [__m256i; 8] = core::array::from_fn(|k| {
        _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[k], load32(yq, 32 * k)), ones)
    });
    let u = _mm256_mullo_epi32(sum8v(v), act.am);
    let e = _mm256_sub_epi64(
        _mm256_mul_epi32(u, w.wd[0]),
        _mm256_mul_epi32(act.x[0], w.wn[0]),
    );
    let o = _mm256_sub_epi64(
        _mm256_mul_epi32(_mm256_shuffle_epi32(u, 0xF5), w.wd[1]),
        _mm256_mul_epi32(act.x[1], w.wn[1]),
    );
    shifted_pair(e, o, act)
}

/// One Q6_K super-block of one weight row, decoded once for every input
/// row of the pass: the 6-bit values plus 32 (`0..=63`) of sub-block `j`
/// (`q[j]`), the signed 16-element scales in [`half_sums`]' order
/// (`s0`, `s1`), and the weight factor `dmw = dm << wrel`.
struct Q6kSuper {
    q: [__m256i; 8],
    s: [__m256i; 2],
    dmw: __m256i,
}

/// The [`Q6kSuper`] of `blk` with the weight factor `dmw`: the values by
/// [`q6_k_unpack`].
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_weights(blk: &[u8; Q6_K_BYTES], dmw: i32) -> Q6kSuper {
    let q = q6_k_unpack(blk);
    // Scale bytes reordered as [0, 2, 4, 6, 1, 3, 5, 7, 8, ...]: the half
    // sums' order.
    let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    let sc = _mm_shuffle_epi8(_mm256_extracti128_si256(load32(blk, 176), 1), order);
    Q6kSuper {
        q,
        s: [
            _mm256_cvtepi8_epi32(sc),
            _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)),
        ],
        dmw: _mm256_set1_epi32(dmw),
    }
}

/// One Q6_K super-block `w` of one weight row against activations `yq`
/// (256) as chunk-sum lanes: `q + 32` by `vpmaddubsw` (pairs at most
/// `2·63·127`) and `vpmaddwd`, the sixteen half sums by [`half_sums`],
/// less the input's `32·Σ y` (`|Σ q·y| ≤ 16·32·127`), times the halves'
/// signed scales and the halves added: `sumi_j` of `q6_k_sumi`; then the
/// terms of the module header.
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_super(w: &Q6kSuper, yq: &[i8; QK_K], act: &ActSuper) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let v: [__m256i; 8] = core::array::from_fn(|j| {
        _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[j], load32(yq, 32 * j)), ones)
    });
    let (u0, u1) = half_sums(v);
    let p0 = _mm256_mullo_epi32(_mm256_sub_epi32(u0, act.x[0]), w.s[0]);
    let p1 = _mm256_mullo_epi32(_mm256_sub_epi32(u1, act.x[1]), w.s[1]);
    let sumi = _mm256_add_epi32(
        _mm256_permute2x128_si256(p0, p1, 0x20),
        _mm256_permute2x128_si256(p0, p1, 0x31),
    );
    let f = _mm256_mullo_epi32(act.am, w.dmw);
    let odd = |x| _mm256_shuffle_epi32(x, 0xF5);
    shifted_pair(
        _mm256_mul_epi32(sumi, f),
        _mm256_mul_epi32(odd(sumi), odd(f)),
        act,
    )
}

/// Input rows per pass over the weights with several input rows.
const GROUP: usize = kquant::DECODE_PASS_ROWS;

/// The rows of `rows` (whole rows of `B`-byte super-blocks; `out` holds
/// as many rows of `stride` cells) against the input rows `acts`, up to
/// `G` at a time (fewer where their terms would pass [`MAX_TERMS`]), each
/// pass's cells (columns `col..` of `out`) by `row` given a weight row, the
/// pass's input rows and their terms; `false` (nothing written) where the
/// lengths do not match, the columns pass the stride, there are more than
/// [`kquant::DECODE_ROWS`] input rows or one is longer than [`MAX_TERMS`]
/// super-blocks.
#[target_feature(enable = "avx2")]
#[inline]
fn decode_rows<const B: usize, const Q6: bool, const G: usize>(
    rows: &[u8],
    acts: &[ActRow<'_>],
    (out, col): (&mut [F32], usize),
    row: impl Fn(&[u8], &[ActRow<'_>], &[ActSuper]) -> [ExactAcc; G],
) -> bool {
    let z = _mm256_setzero_si256();
    let zero = ActSuper {
        am: z,
        rel: [z; 2],
        x: [z; 2],
    };
    let term = |a: &ActRow<'_>, b: usize| act_super::<Q6>(a, b);
    decode_rows_with::<B, G, ActSuper>(rows, acts, (out, col), (zero, term), row)
}

/// [`decode_rows`] with the input-row terms of type `S` (`zero` to set
/// the array up, `term(a, b)` those of super-block `b` of `a`): the
/// shared checks and passes of every decode build.
#[target_feature(enable = "avx2")]
#[inline]
fn decode_rows_with<const B: usize, const G: usize, S: Copy>(
    rows: &[u8],
    acts: &[ActRow<'_>],
    (out, col): (&mut [F32], usize),
    (zero, term): (S, impl Fn(&ActRow<'_>, usize) -> S),
    row: impl Fn(&[u8], &[ActRow<'_>], &[S]) -> [ExactAcc; G],
) -> bool {
    let (m, n) = (acts.len(), acts.first().map_or(0, |a| a.qs.len() / QK_K));
    let n_rows = rows.len() / (B * n.max(1));
    let stride = out.len().checked_div(n_rows).unwrap_or(m);
    let fits = n > 0
        && n <= MAX_TERMS
        && m <= kquant::DECODE_ROWS
        && acts.iter().all(|a| {
            a.qs.len() == QK_K * n
                && a.sc.len() == 8 * n
                && a.ch.len() == (8 * n).div_ceil(CHUNK_BLOCKS)
        })
        && rows.len() == B * n * n_rows
        && out.len() == stride * n_rows
        && col.checked_add(m).is_some_and(|end| end <= stride);
    if !fits {
        return false;
    }
    // The terms array is set up (zeroed) on every call: a small one where
    // the pass's terms fit it (every row up to 16384 elements at M = 1).
    let out = (out, stride, col);
    if G.min(m) * n <= FEW_TERMS {
        decode_passes::<B, G, FEW_TERMS, S>((rows, n), acts, out, (zero, term), row);
    } else {
        decode_passes::<B, G, MAX_TERMS, S>((rows, n), acts, out, (zero, term), row);
    }
    true
}

/// Input-row terms of the small terms array of [`decode_rows`] (10 KiB;
/// the VNNI build's 28 KiB).
const FEW_TERMS: usize = kquant::VNNI_DECODE_PASS_TERMS;

/// [`decode_rows`] past its checks (rows of `n` super-blocks, `out` of
/// `stride` cells a row), the terms of each pass in an array of `T`
/// ([`FEW_TERMS`] or [`MAX_TERMS`]).
#[target_feature(enable = "avx2")]
#[inline]
fn decode_passes<const B: usize, const G: usize, const T: usize, S: Copy>(
    (rows, n): (&[u8], usize),
    acts: &[ActRow<'_>],
    (out, stride, col): (&mut [F32], usize, usize),
    (zero, term): (S, impl Fn(&ActRow<'_>, usize) -> S),
    row: impl Fn(&[u8], &[ActRow<'_>], &[S]) -> [ExactAcc; G],
) {
    let mut terms = [zero; T];
    let per = G.min(T / n).max(1);
    for (p, pass) in acts.chunks(per).enumerate() {
        for (k, a) in pass.iter().enumerate() {
            for b in 0..n {
                terms[k * n + b] = term(a, b);
            }
        }
        let terms = &terms[..pass.len() * n];
        for (w, cells) in rows.chunks_exact(B * n).zip(out.chunks_exact_mut(stride)) {
            let accs = row(w, pass, terms);
            for (c, acc) in cells[col + p * per..].iter_mut().zip(&accs[..pass.len()]) {
                *c = acc.finish();
            }
        }
    }
}

/// One weight row `row` (whole `B`-byte super-blocks; `Q4`: Q4_K, else
/// Q6_K) against the input rows `acts` (at most `G`; their terms `terms`,
/// one row's after the other): chunk by chunk, the row's scales once
/// ([`chunk_weights`]), per super-block its values and factors once
/// (`weights`, given the chunk's scales and the super-block's index in
/// it), then per input row within the chunk limits `lims` its chunk-sum
/// lanes (`dot`), beyond them the row kernel's body for that chunk
/// (`by_row_kernel`).
#[target_feature(enable = "avx2")]
#[inline]
fn decode_row<const B: usize, const Q4: bool, const G: usize, W>(
    (row, acts, terms): (&[u8], &[ActRow<'_>], &[ActSuper]),
    lims: (u32, u32),
    weights: impl Fn(&[u8; B], &ChunkWeights, usize) -> W,
    dot: impl Fn(&W, &[i8; QK_K], &ActSuper) -> __m256i,
    by_row_kernel: impl Fn(&mut ExactAcc, &[u8], &ActRow<'_>, usize),
) -> [ExactAcc; G] {
    if let (1, [a]) = (G, acts) {
        // One input row: the plain loop (the general one measured ~15 %
        // slower on it).
        let acc = decode_row_one::<B, Q4, W>((row, a, terms), lims, weights, dot, by_row_kernel);
        return [acc; G];
    }
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
        let mut fit = [None; G];
        for (f, a) in fit.iter_mut().zip(acts) {
            *f = w.fit(a.ch.get(c), lims);
        }
        let mut s = [_mm256_setzero_si256(); G];
        for (i, blk) in bc.iter().enumerate() {
            let b = CHUNK_SUPERS * c + i;
            let wq = weights(blk, &w, i);
            for (k, s) in s.iter_mut().enumerate().take(acts.len()) {
                if let (Some(_), Some(yq), Some(t)) = (fit[k], ys[k].get(b), terms.get(k * n + b)) {
                    *s = _mm256_add_epi64(*s, dot(&wq, yq, t));
                }
            }
        }
        for (k, (acc, a)) in accs.iter_mut().zip(acts).enumerate() {
            acc.nonfinite |= w.bad;
            match fit[k] {
                Some(shift) => acc.sum += shl63(lanes_i128(s[k]), shift),
                None => by_row_kernel(acc, bc.as_flattened(), a, c),
            }
        }
    }
    accs
}

/// [`decode_row`] for one input row `a`.
#[target_feature(enable = "avx2")]
#[inline]
fn decode_row_one<const B: usize, const Q4: bool, W>(
    (row, a, terms): (&[u8], &ActRow<'_>, &[ActSuper]),
    lims: (u32, u32),
    weights: impl Fn(&[u8; B], &ChunkWeights, usize) -> W,
    dot: impl Fn(&W, &[i8; QK_K], &ActSuper) -> __m256i,
    by_row_kernel: impl Fn(&mut ExactAcc, &[u8], &ActRow<'_>, usize),
) -> ExactAcc {
    let mut acc = ExactAcc {
        sum: 0,
        nonfinite: a.flags & FLAG_D_NONFINITE != 0,
    };
    let (blks, ys) = (row.as_chunks::<B>().0, a.qs.as_chunks::<QK_K>().0);
    let chunks = blks.chunks(CHUNK_SUPERS).zip(ys.chunks(CHUNK_SUPERS));
    for (c, ((bc, yc), tc)) in chunks.zip(terms.chunks(CHUNK_SUPERS)).enumerate() {
        let w = chunk_weights::<B, Q4>(bc);
        acc.nonfinite |= w.bad;
        let Some(shift) = w.fit(a.ch.get(c), lims) else {
            by_row_kernel(&mut acc, bc.as_flattened(), a, c);
            continue;
        };
        let mut s = _mm256_setzero_si256();
        for (i, ((blk, yq), t)) in bc.iter().zip(yc).zip(tc).enumerate() {
            prefetch_ahead::<B>(blk);
            s = _mm256_add_epi64(s, dot(&weights(blk, &w, i), yq, t));
        }
        acc.sum += shl63(lanes_i128(s), shift);
    }
    acc
}

/// Bytes ahead of the super-block being decoded that [`prefetch_ahead`]
/// asks the cache for.
const PREFETCH_AHEAD: usize = 1536;

/// Prefetches the bytes [`PREFETCH_AHEAD`] past super-block `blk`, one
/// super-block's worth (`B` bytes, a line per 64): the weight rows of a
/// call are contiguous, so these are the super-blocks decoded next (or past
/// the call's rows: a prefetch never faults).
#[target_feature(enable = "avx2")]
#[inline]
fn prefetch_ahead<const B: usize>(blk: &[u8; B]) {
    let p = blk.as_ptr().wrapping_add(PREFETCH_AHEAD);
    for o in (0..B).step_by(64) {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(o).cast());
    }
}

/// One Q4_K weight row against up to `G` input rows ([`decode_row`] with
/// [`q4_k_weights`] and [`q4_k_super`]).
#[target_feature(enable = "avx2")]
#[inline]
fn q4_k_decode_row<const G: usize>(
    row: &[u8],
    acts: &[ActRow<'_>],
    terms: &[ActSuper],
) -> [ExactAcc; G] {
    decode_row::<Q4_K_BYTES, true, G, Q4kSuper>(
        (row, acts, terms),
        (kquant::CHUNK_WLIM_Q4_K, kquant::CHUNK_LIM_Q4_K),
        |blk, w, i| q4_k_weights(blk, (w.m[2 * i], w.m[2 * i + 1])),
        |w, yq, t| q4_k_super(w, yq, t),
        |acc, blks, a, c| q4_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}

/// One Q5_K weight row against up to `G` input rows ([`decode_row`] with
/// [`q5_k_weights`] and [`q4_k_super`]).
#[target_feature(enable = "avx2")]
#[inline]
fn q5_k_decode_row<const G: usize>(
    row: &[u8],
    acts: &[ActRow<'_>],
    terms: &[ActSuper],
) -> [ExactAcc; G] {
    decode_row::<Q5_K_BYTES, true, G, Q4kSuper>(
        (row, acts, terms),
        (kquant::CHUNK_WLIM_Q5_K, kquant::CHUNK_LIM_Q5_K),
        |blk, w, i| q5_k_weights(blk, (w.m[2 * i], w.m[2 * i + 1])),
        |w, yq, t| q4_k_super(w, yq, t),
        |acc, blks, a, c| q5_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}

/// One Q6_K weight row against up to `G` input rows ([`decode_row`] with
/// [`q6_k_weights`] and [`q6_k_super`]).
#[target_feature(enable = "avx2")]
#[inline]
fn q6_k_decode_row<const G: usize>(
    row: &[u8],
    acts: &[ActRow<'_>],
    terms: &[ActSuper],
) -> [ExactAcc; G] {
    decode_row::<Q6_K_BYTES, false, G, Q6kSuper>(
        (row, acts, terms),
        (kquant::CHUNK_WLIM_Q6_K, kquant::CHUNK_LIM_Q6_K),
        |blk, w, i| q6_k_weights(blk, w.m[i]),
        |w, yq, t| q6_k_super(w, yq, t),
        |acc, blks, a, c| q6_k_chunk_by_row_kernel(acc, blks, a, c),
    )
}

/// Input row `a`'s activations and block scales of chunk `c` (as long as
/// `blks`, `bytes` per super-block), flags cleared, as an input row of
/// its own.
fn chunk_act<'a>(a: &ActRow<'a>, c: usize, blks: &[u8], bytes: usize) -> ActRow<'a> {
    let (b0, n) = (CHUNK_SUPERS * c, blks.len() / bytes);
    ActRow {
        qs: &a.qs[QK_K * b0..QK_K * (b0 + n)],
        sc: &a.sc[8 * b0..8 * (b0 + n)],
        ch: &[],
        flags: 0,
        h: &[],
        f: &[],
    }
}

/// A Q4_K chunk beyond the chunk limits: its super-blocks `blks` against
/// chunk `c` of `a` by the row kernel's body, its sum added to `acc`.
#[target_feature(enable = "avx2")]
#[cold]
#[inline(never)]
fn q4_k_chunk_by_row_kernel(acc: &mut ExactAcc, blks: &[u8], a: &ActRow<'_>, c: usize) {
    let [t] = q4_k_rows_vec([blks], &chunk_act(a, c, blks, Q4_K_BYTES));
    acc.sum += t.sum;
    acc.nonfinite |= t.nonfinite;
}

/// [`q4_k_chunk_by_row_kernel`] for Q5_K (the row kernel's portable body,
/// compiled here with AVX2).
#[target_feature(enable = "avx2")]
#[cold]
#[inline(never)]
fn q5_k_chunk_by_row_kernel(acc: &mut ExactAcc, blks: &[u8], a: &ActRow<'_>, c: usize) {
    let t = kquant::q5_k_row(blks, &chunk_act(a, c, blks, Q5_K_BYTES));
    acc.sum += t.sum;
    acc.nonfinite |= t.nonfinite;
}

/// [`q4_k_chunk_by_row_kernel`] for Q6_K.
#[target_feature(enable = "avx2")]
#[cold]
#[inline(never)]
fn q6_k_chunk_by_row_kernel(acc: &mut ExactAcc, blks: &[u8], a: &ActRow<'_>, c: usize) {
    let [t] = q6_k_rows_vec([blks], &chunk_act(a, c, blks, Q6_K_BYTES));
    acc.sum += t.sum;
    acc.nonfinite |= t.nonfinite;
}

/// Builds of the decode kernels for a feature set: one input row in one
/// pass, several in passes of up to [`GROUP`].
macro_rules! decode_build {
    ($q4:ident, $q5:ident, $q6:ident, $features:literal) => {
        #[target_feature(enable = $features)]
        fn $q4(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
            if acts.len() == 1 {
                decode_rows::<Q4_K_BYTES, false, 1>(rows, acts, (out, col), |w, a, t| {
                    q4_k_decode_row::<1>(w, a, t)
                })
            } else {
                decode_rows::<Q4_K_BYTES, false, GROUP>(rows, acts, (out, col), |w, a, t| {
                    q4_k_decode_row::<GROUP>(w, a, t)
                })
            }
        }

        #[target_feature(enable = $features)]
        fn $q5(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
            if acts.len() == 1 {
                decode_rows::<Q5_K_BYTES, false, 1>(rows, acts, (out, col), |w, a, t| {
                    q5_k_decode_row::<1>(w, a, t)
                })
            } else {
                decode_rows::<Q5_K_BYTES, false, GROUP>(rows, acts, (out, col), |w, a, t| {
                    q5_k_decode_row::<GROUP>(w, a, t)
                })
            }
        }

        #[target_feature(enable = $features)]
        fn $q6(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
            if acts.len() == 1 {
                decode_rows::<Q6_K_BYTES, true, 1>(rows, acts, (out, col), |w, a, t| {
                    q6_k_decode_row::<1>(w, a, t)
                })
            } else {
                decode_rows::<Q6_K_BYTES, true, GROUP>(rows, acts, (out, col), |w, a, t| {
                    q6_k_decode_row::<GROUP>(w, a, t)
                })
            }
        }
    };
}

decode_build!(
    q4_k_decode_avx2,
    q5_k_decode_avx2,
    q6_k_decode_avx2,
    "avx2,bmi1,bmi2,lzcnt"
);
decode_build!(
    q4_k_decode_avx512,
    q5_k_decode_avx512,
    q6_k_decode_avx512,
    "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw"
);

/// [`kquant::DecodeFn`] entry of [`q4_k_decode_avx2`].
fn q4_k_decode_avx2_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: only handed out by `avx2`, after `simd::level()` returned
    // `Avx2` or wider: AVX2, BMI1, BMI2, LZCNT.
    unsafe { q4_k_decode_avx2(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q5_k_decode_avx2`].
fn q5_k_decode_avx2_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_avx2_entry`.
    unsafe { q5_k_decode_avx2(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q6_k_decode_avx2`].
fn q6_k_decode_avx2_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_avx2_entry`.
    unsafe { q6_k_decode_avx2(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q4_k_decode_avx512`].
fn q4_k_decode_avx512_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: only handed out by `avx512`, after `simd::level()` returned
    // `Avx512` or wider: the AVX2 set and AVX-512 F, CD, VL, DQ, BW.
    unsafe { q4_k_decode_avx512(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q5_k_decode_avx512`].
fn q5_k_decode_avx512_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_avx512_entry`.
    unsafe { q5_k_decode_avx512(rows, acts, out, col) }
}

/// [`kquant::DecodeFn`] entry of [`q6_k_decode_avx512`].
fn q6_k_decode_avx512_entry(rows: &[u8], acts: &[ActRow<'_>], out: &mut [F32], col: usize) -> bool {
    // SAFETY: as in `q4_k_decode_avx512_entry`.
    unsafe { q6_k_decode_avx512(rows, acts, out, col) }
}
