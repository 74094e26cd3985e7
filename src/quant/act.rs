//! Activations quantized once per input and shared by every matmul that reads
//! the same input (q/k/v share one, gate/up share one).
//!
//! Q8 activations use llama.cpp's *reference* quantizer
//! (`quantize_row_q8_0_ref` / `quantize_row_q8_1_ref`), per 32-block:
//!
//! ```text
//! amax = max |x_j|                      (a NaN anywhere makes d NaN)
//! d    = amax / 127                     (f32, RNE)
//! id   = d != 0 ? 1 / d : 0             (f32, RNE)
//! q_j  = roundf(x_j * id)               (f32 product, then ties away from zero)
//! d16  = f16(d)                         (RNE)
//! s16  = f16(f32(Σ q_j) * d)            (Q8_1; the unrounded f32 d)
//! ```
//!
//! `d` and `qs` are the same for Q8_0 and Q8_1, so one [`QActs`] serves both
//! views; `s` is stored alongside. Each block also keeps its scales as exact
//! fixed-point integers ([`ActScale`]) so the dot kernels never decode them
//! again. F16 weights get their activations rounded to binary16 (as llama.cpp
//! does for F16 `vec_dot_type`), F32 and BF16 weights read the F32 input.

use super::GgmlType;
use super::block::{BlockQ8_0, BlockQ8_1, QK};
use super::fixed::{f16_fixed, f16_nonfinite};
use crate::{Arena, Error, F32, Result};
use bytemuck::{Pod, Zeroable};

/// 127 as binary32 (`0x42FE0000`).
const F32_127: F32 = F32::from_bits(0x42FE_0000);

/// Which representation of the input a weight type reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    /// Q8 32-blocks (Q8_0 and Q8_1 views): every 32- and 256-block weight type.
    Q8,
    /// Binary16 (F16 weights).
    F16,
    /// Binary32 copies (F32 and BF16 weights).
    F32,
}

impl ActKind {
    /// The activation kind a weight of type `ty` multiplies with.
    pub const fn for_weight(ty: GgmlType) -> ActKind {
        match ty {
            GgmlType::F16 => ActKind::F16,
            GgmlType::F32 | GgmlType::BF16 => ActKind::F32,
            _ => ActKind::Q8,
        }
    }
}

/// Scales of one Q8 activation block, raw and as fixed-point integers
/// (see [`super::fixed`]): `d = dm · 2^(dsh - 24)`, `s = sm · 2^(ssh - 24)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct ActScale {
    /// `d`, f16 bits.
    pub d: u16,
    /// `s = f16(d · Σ qs)`, f16 bits.
    pub s: u16,
    /// `Σ qs` (|Σ| ≤ 32·127).
    pub bsum: i32,
    /// Signed mantissa of `d`.
    pub dm: i32,
    /// Signed mantissa of `s` (next to `dm`: the SIMD kernels broadcast the
    /// pair with one 64-bit load).
    pub sm: i32,
    /// `dsh` minus its chunk's [`ChunkScale::dbase`] (0 when `dm == 0`).
    pub drel: u32,
    /// `ssh` minus its chunk's [`ChunkScale::sbase`] (0 when `sm == 0`).
    pub srel: u32,
    /// Shift of `d`.
    pub dsh: u32,
    /// Shift of `s`.
    pub ssh: u32,
}

/// Blocks per chunk of the fast kernels' `i64` accumulation (1024 elements).
pub const CHUNK_BLOCKS: usize = 32;

/// Shift range of the non-zero scales of one chunk of [`CHUNK_BLOCKS`]
/// activation blocks: every `dsh` lies in `dbase ..= dbase + dspread`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct ChunkScale {
    /// Smallest `dsh` of a non-zero `d` (0 if none).
    pub dbase: u32,
    /// Largest minus smallest.
    pub dspread: u32,
    /// Smallest `ssh` of a non-zero `s` (0 if none).
    pub sbase: u32,
    /// Largest minus smallest.
    pub sspread: u32,
}

/// Fills `drel`/`srel` of `sc` and the per-chunk ranges `ch`
/// (`ch.len() == sc.len().div_ceil(CHUNK_BLOCKS)`).
pub fn fill_chunks(sc: &mut [ActScale], ch: &mut [ChunkScale]) {
    for (c, cs) in sc.chunks_mut(CHUNK_BLOCKS).zip(ch.iter_mut()) {
        let (mut dlo, mut dhi, mut slo, mut shi) = (u32::MAX, 0, u32::MAX, 0);
        for s in c.iter() {
            if s.dm != 0 {
                dlo = dlo.min(s.dsh);
                dhi = dhi.max(s.dsh);
            }
            if s.sm != 0 {
                slo = slo.min(s.ssh);
                shi = shi.max(s.ssh);
            }
        }
        let (dlo, slo) = (
            if dlo == u32::MAX { 0 } else { dlo },
            if slo == u32::MAX { 0 } else { slo },
        );
        *cs = ChunkScale {
            dbase: dlo,
            dspread: dhi.saturating_sub(dlo),
            sbase: slo,
            sspread: shi.saturating_sub(slo),
        };
        for s in c.iter_mut() {
            s.drel = if s.dm != 0 { s.dsh - dlo } else { 0 };
            s.srel = if s.sm != 0 { s.ssh - slo } else { 0 };
        }
    }
}

/// Row flag: some block's `d` is ±∞ or NaN.
pub const FLAG_D_NONFINITE: u8 = 1;
/// Row flag: some block's `s` is ±∞ or NaN.
pub const FLAG_S_NONFINITE: u8 = 2;

/// Quantizes one 32-block with the reference formulas: `(qs, d, s, Σqs)`,
/// `d` and `s` as f16 bits.
#[inline(always)]
pub fn quantize_block_q8(x: &[F32; QK]) -> ([i8; QK], u16, u16, i32) {
    // Detect NaN; find amax = max |x_j| over the others (as `|x_j| > amax`
    // from +0 would: for non-NaN magnitudes the bit patterns order as the
    // values). Branch-free so that it vectorizes.
    let mut amax_bits = 0u32;
    let mut nan = false;
    let mut subnormal = false;
    for &v in x {
        let a = v.to_bits() & 0x7FFF_FFFF;
        let is_nan = a > 0x7F80_0000;
        nan |= is_nan;
        subnormal |= a != 0 && a < 0x0080_0000;
        amax_bits = amax_bits.max(if is_nan { 0 } else { a });
    }
    let amax = F32::from_bits(amax_bits);
    let d = if nan { F32::NAN } else { amax / F32_127 };
    let id = if d.is_zero() { F32::ZERO } else { F32::ONE / d };
    let mut qs = [0i8; QK];
    let mut sum = 0i32;
    // The common case (finite block, 1/d a positive normal) in integers.
    let idb = id.to_bits();
    let fast = amax.is_finite() && (0x0080_0000..0x7F80_0000).contains(&idb);
    if fast && !subnormal {
        // Every x_j finite and normal or zero: one branch-free loop.
        let mi = ((idb & 0x7F_FFFF) | 0x80_0000) as u64;
        let ei = ((idb >> 23) & 0xFF) as i32;
        for (q, &v) in qs.iter_mut().zip(x) {
            let r = q8_round_nz(v.to_bits(), mi, ei);
            *q = r as i8;
            sum += r;
        }
        let s = F32::from_i32(sum) * d;
        return (qs, d.to_f16_bits(), s.to_f16_bits(), sum);
    }
    for (q, &v) in qs.iter_mut().zip(x) {
        // |x·id| rounds to at most 127 whenever 1/d is finite; NaN products
        // give 0. When d is a tiny subnormal, 1/d overflows and llama.cpp's
        // `(int8_t)roundf(±inf)` is undefined; this profile saturates to ±127
        // (so |q| ≤ 127 always, which the SIMD kernels rely on).
        let r = if fast {
            q8_round(v, id)
        } else {
            (v * id).to_i32_round_ties_away().clamp(-127, 127)
        };
        *q = r as i8;
        sum += r;
    }
    let s = F32::from_i32(sum) * d;
    (qs, d.to_f16_bits(), s.to_f16_bits(), sum)
}

/// `(v · id).to_i32_round_ties_away().clamp(-127, 127)` for a finite `v`
/// and a positive normal `id` (other inputs: unspecified), in integers and
/// without data-dependent branches for normal `v`: the exact product
/// `mv·mi · 2^k` (`mv·mi` in `[2^46, 2^48)`), rounded once to 24 bits (RNE:
/// the binary32 product), then to an integer with ties away from zero, then
/// clamped. A product below 2^-126 is not rounded as a subnormal, but it is
/// below 1/2 either way, so the integer is 0 all the same.
#[inline(always)]
pub fn q8_round(v: F32, id: F32) -> i32 {
    let (vb, ib) = (v.to_bits(), id.to_bits());
    let ev = ((vb >> 23) & 0xFF) as i32;
    if ev == 0 {
        // Zero or subnormal v (rare): the soft-float formula.
        return (v * id).to_i32_round_ties_away().clamp(-127, 127);
    }
    let mi = ((ib & 0x7F_FFFF) | 0x80_0000) as u64;
    let ei = ((ib >> 23) & 0xFF) as i32;
    q8_round_nz(vb, mi, ei)
}

/// [`q8_round`] for `v` (bits `vb`) finite and normal or ±0, with `id`'s
/// significand `mi` (implicit bit set) and biased exponent `ei`; no branches.
#[inline(always)]
fn q8_round_nz(vb: u32, mi: u64, ei: i32) -> i32 {
    let ev = ((vb >> 23) & 0xFF) as i32;
    let mv = ((vb & 0x7F_FFFF) | 0x80_0000) as u64;
    // |v·id| = p · 2^(ev + ei - 300) exactly; keep 24 of p's 47 or 48 bits.
    let p = mv * mi;
    let s = 23 + (p >> 47) as u32;
    let (q, rem, half) = (p >> s, p & ((1u64 << s) - 1), 1u64 << (s - 1));
    // (Which way an exact tie goes here never changes the result — every
    // half-integer up to 127.5 has an even 24-bit significand — but this is
    // the binary32 product's RNE, kept literal.)
    let up = (rem > half) as u64 | ((rem == half) as u64 & q & 1);
    let m = q + up; // ≤ 2^24; |fl(v·id)| = m / 2^t
    let t = 300 - ev - ei - s as i32;
    // t ≤ 0: at least 2^23, clamps to 127 (so does (m + 1) >> 1); t ≥ 40:
    // below 2^-15, rounds to 0 (so does the shift by 40).
    let t = t.clamp(1, 40) as u32;
    let r = ((m + (1u64 << (t - 1))) >> t).min(127) as i32;
    let r = if ev == 0 { 0 } else { r }; // ±0
    if vb >> 31 != 0 { -r } else { r }
}

/// Signature of [`quantize_row_q8`].
pub(crate) type QuantRowFn = fn(&[F32], &mut [i8], &mut [ActScale], &mut [ChunkScale]) -> u8;

/// The row quantizer: [`quantize_row_q8`], or the same code compiled for the
/// CPU's SIMD ([`crate::simd`]; identical integers).
fn row_q8() -> QuantRowFn {
    quantize_builds::best_fn()
}

crate::simd::multiversion! {
    /// Builds of [`quantize_row_q8`].
    mod quantize_builds = quantize_row_q8(
        x: &[F32],
        qs: &mut [i8],
        sc: &mut [ActScale],
        ch: &mut [ChunkScale],
    ) -> u8;
}

/// One row into Q8 blocks (`qs`, `sc`) and its chunk ranges (`ch`);
/// returns the row's `FLAG_*` bits. `x.len()` is a multiple of 32 and the
/// outputs are sized for it.
#[inline(always)]
pub(crate) fn quantize_row_q8(
    x: &[F32],
    qs: &mut [i8],
    sc: &mut [ActScale],
    ch: &mut [ChunkScale],
) -> u8 {
    let mut flags = 0u8;
    for ((xb, qb), s) in x
        .chunks_exact(QK)
        .zip(qs.chunks_exact_mut(QK))
        .zip(sc.iter_mut())
    {
        let Some(xb) = xb.first_chunk::<QK>() else {
            continue;
        };
        let (q, d, sv, bsum) = quantize_block_q8(xb);
        qb.copy_from_slice(&q);
        *s = act_scale(d, sv, bsum);
        if f16_nonfinite(d) {
            flags |= FLAG_D_NONFINITE;
        }
        if f16_nonfinite(sv) {
            flags |= FLAG_S_NONFINITE;
        }
    }
    fill_chunks(sc, ch);
    flags
}

/// `quantize_row_q8_0_ref`: `x` (n, n % 32 == 0) → GGUF `Q8_0` bytes.
pub fn quantize_row_q8_0(x: &[F32], out: &mut [u8]) -> Result<()> {
    let need = GgmlType::Q8_0.row_bytes(x.len())?;
    let available = out.len();
    let out = out.get_mut(..need).ok_or(Error::BufferTooSmall {
        needed: need,
        available,
    })?;
    for (xb, ob) in x.chunks_exact(QK).zip(out.chunks_exact_mut(34)) {
        let (qs, d, _, _) = quantize_block_q8(xb.try_into().map_err(|_| Error::SizeOverflow)?);
        let b = BlockQ8_0 {
            d: d.to_le_bytes(),
            qs,
        };
        ob.copy_from_slice(bytemuck::bytes_of(&b));
    }
    Ok(())
}

/// `quantize_row_q8_1_ref`: `x` (n, n % 32 == 0) → GGUF-layout `Q8_1` bytes.
pub fn quantize_row_q8_1(x: &[F32], out: &mut [u8]) -> Result<()> {
    let need = GgmlType::Q8_1.row_bytes(x.len())?;
    let available = out.len();
    let out = out.get_mut(..need).ok_or(Error::BufferTooSmall {
        needed: need,
        available,
    })?;
    for (xb, ob) in x.chunks_exact(QK).zip(out.chunks_exact_mut(36)) {
        let (qs, d, s, _) = quantize_block_q8(xb.try_into().map_err(|_| Error::SizeOverflow)?);
        let b = BlockQ8_1 {
            d: d.to_le_bytes(),
            s: s.to_le_bytes(),
            qs,
        };
        ob.copy_from_slice(bytemuck::bytes_of(&b));
    }
    Ok(())
}

/// Up to `max_m` input rows of `n_in` values in the representation one
/// weight kind reads. Buffers come from an [`Arena`]; [`QActs::quantize`]
/// refills them in place (no allocation per call).
pub struct QActs<'a> {
    kind: ActKind,
    n_in: usize,
    max_m: usize,
    m: usize,
    qs: &'a mut [i8],         // (max_m, n_in)        Q8 quants
    sc: &'a mut [ActScale],   // (max_m, n_in / 32)   Q8 block scales
    ch: &'a mut [ChunkScale], // (max_m, n_chunks)   shift ranges per chunk
    flags: &'a mut [u8],      // (max_m)              FLAG_* per row
    h: &'a mut [u16],         // (max_m, n_in)        binary16 (ActKind::F16)
    f: &'a mut [F32],         // (max_m, n_in)        binary32 (ActKind::F32)
}

/// One input row of a [`QActs`], as the dot kernels read it.
#[derive(Clone, Copy, Debug)]
pub struct ActRow<'r> {
    /// Q8 quants (n_in) — empty unless [`ActKind::Q8`].
    pub qs: &'r [i8],
    /// Q8 block scales (n_in / 32).
    pub sc: &'r [ActScale],
    /// Per-chunk shift ranges (n_in / 32 / [`CHUNK_BLOCKS`], rounded up);
    /// may be empty for rows used only with [`super::dot::dot_row`].
    pub ch: &'r [ChunkScale],
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Binary16 values (n_in) — empty unless [`ActKind::F16`].
    pub h: &'r [u16],
    /// Binary32 values (n_in) — empty unless [`ActKind::F32`].
    pub f: &'r [F32],
}

impl<'a> QActs<'a> {
    /// Element counts of the carves `(qs, sc, h, f, flags, ch)`.
    const fn sizes(kind: ActKind, max_m: usize, n_in: usize) -> Option<[usize; 6]> {
        let cells = match max_m.checked_mul(n_in) {
            Some(c) => c,
            None => return None,
        };
        let blocks = match max_m.checked_mul(n_in / QK) {
            Some(c) => c,
            None => return None,
        };
        let chunks = match max_m.checked_mul((n_in / QK).div_ceil(CHUNK_BLOCKS)) {
            Some(c) => c,
            None => return None,
        };
        Some(match kind {
            ActKind::Q8 => [cells, blocks, 0, 0, max_m, chunks],
            ActKind::F16 => [0, 0, cells, 0, max_m, 0],
            ActKind::F32 => [0, 0, 0, cells, max_m, 0],
        })
    }

    /// Worst-case arena bytes [`QActs::new`] takes (padding included).
    pub const fn bytes_for(kind: ActKind, max_m: usize, n_in: usize) -> Option<usize> {
        let [nq, ns, nh, nf, nl, nc] = match Self::sizes(kind, max_m, n_in) {
            Some(s) => s,
            None => return None,
        };
        let parts = [
            Arena::bytes_for::<i8>(nq),
            Arena::bytes_for::<ActScale>(ns),
            Arena::bytes_for::<u16>(nh),
            Arena::bytes_for::<F32>(nf),
            Arena::bytes_for::<u8>(nl),
            Arena::bytes_for::<ChunkScale>(nc),
        ];
        let mut total = 0usize;
        let mut i = 0;
        while i < parts.len() {
            total = match parts[i] {
                Some(p) => match total.checked_add(p) {
                    Some(t) => t,
                    None => return None,
                },
                None => return None,
            };
            i += 1;
        }
        Some(total)
    }

    /// Buffers for up to `max_m` rows of `n_in` values of `kind` carved from
    /// `arena` (all or nothing). Q8 needs `n_in % 32 == 0`.
    pub fn new(arena: &mut Arena<'a>, kind: ActKind, max_m: usize, n_in: usize) -> Result<Self> {
        if kind == ActKind::Q8 && !n_in.is_multiple_of(QK) {
            return Err(Error::ShapeMismatch {
                expected: n_in.next_multiple_of(QK),
                found: n_in,
            });
        }
        let [nq, ns, nh, nf, nl, nc] = Self::sizes(kind, max_m, n_in).ok_or(Error::SizeOverflow)?;
        let need = Self::bytes_for(kind, max_m, n_in).ok_or(Error::SizeOverflow)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        // Cannot fail now: `need` covers every carve with its padding.
        let qs = arena.alloc::<i8>(nq)?;
        let sc = arena.alloc::<ActScale>(ns)?;
        let h = arena.alloc::<u16>(nh)?;
        let f = arena.alloc::<F32>(nf)?;
        let flags = arena.alloc::<u8>(nl)?;
        let ch = arena.alloc::<ChunkScale>(nc)?;
        Ok(QActs {
            kind,
            n_in,
            max_m,
            m: 0,
            qs,
            sc,
            ch,
            flags,
            h,
            f,
        })
    }

    /// Representation held.
    pub fn kind(&self) -> ActKind {
        self.kind
    }
    /// Row length.
    pub fn n_in(&self) -> usize {
        self.n_in
    }
    /// Rows currently held.
    pub fn rows(&self) -> usize {
        self.m
    }
    /// Capacity in rows.
    pub fn max_rows(&self) -> usize {
        self.max_m
    }

    /// The rows of `x` (`m` with `x.len() = m · n_in ≤ max_m · n_in`).
    fn rows_of(&self, x: &[F32]) -> Result<usize> {
        let n = self.n_in;
        if n == 0 || !x.len().is_multiple_of(n) {
            return Err(Error::ShapeMismatch {
                expected: x.len().next_multiple_of(n.max(1)),
                found: x.len(),
            });
        }
        let m = x.len() / n;
        if m > self.max_m {
            return Err(Error::BatchTooLarge {
                requested: m,
                max: self.max_m,
            });
        }
        Ok(m)
    }

    /// Converts `x` (m, n_in) with `m = x.len() / n_in ≤ max_m`. On error
    /// nothing changes.
    pub fn quantize(&mut self, x: &[F32]) -> Result<()> {
        let n = self.n_in;
        let m = self.rows_of(x)?;
        for (r, xr) in x.chunks_exact(n).enumerate() {
            let mut flags = 0u8;
            match self.kind {
                ActKind::Q8 => {
                    let nb = n / QK;
                    let nc = nb.div_ceil(CHUNK_BLOCKS);
                    let qs = &mut self.qs[r * n..(r + 1) * n];
                    let sc = &mut self.sc[r * nb..(r + 1) * nb];
                    let ch = &mut self.ch[r * nc..(r + 1) * nc];
                    flags = row_q8()(xr, qs, sc, ch);
                }
                ActKind::F16 => {
                    for (o, v) in self.h[r * n..(r + 1) * n].iter_mut().zip(xr) {
                        *o = v.to_f16_bits();
                        if f16_nonfinite(*o) {
                            flags |= FLAG_D_NONFINITE;
                        }
                    }
                }
                ActKind::F32 => self.f[r * n..(r + 1) * n].copy_from_slice(xr),
            }
            self.flags[r] = flags;
        }
        self.m = m;
        Ok(())
    }

    /// [`Self::quantize`] with the rows split over the workers of `par`
    /// (Q8 with several rows; anything else runs [`Self::quantize`]). Each
    /// row is the same arithmetic wherever it runs.
    pub fn quantize_par<P: crate::Parallel>(&mut self, par: &P, x: &[F32]) -> Result<()> {
        let n = self.n_in;
        if self.kind != ActKind::Q8 || par.threads() <= 1 || x.len() <= n || !n.is_multiple_of(QK) {
            return self.quantize(x);
        }
        let m = self.rows_of(x)?;
        let nb = n / QK;
        let nc = nb.div_ceil(CHUNK_BLOCKS);
        /// One row's input and outputs.
        type RowJob<'r> = (
            &'r [F32],
            &'r mut [i8],
            &'r mut [ActScale],
            &'r mut [ChunkScale],
            &'r mut u8,
        );
        const BATCH: usize = 64;
        let mut rows = x
            .chunks_exact(n)
            .zip(self.qs.chunks_exact_mut(n))
            .zip(self.sc.chunks_exact_mut(nb))
            .zip(self.ch.chunks_exact_mut(nc))
            .zip(self.flags.iter_mut())
            .map(|((((x, q), s), c), f)| (x, q, s, c, f));
        let per = BATCH.min(m).div_ceil(par.threads()).max(1);
        let row_q8 = row_q8();
        loop {
            let mut jobs: [Option<RowJob<'_>>; BATCH] = core::array::from_fn(|_| None);
            let mut k = 0;
            for (slot, row) in jobs.iter_mut().zip(rows.by_ref()) {
                *slot = Some(row);
                k += 1;
            }
            if k == 0 {
                break;
            }
            par.for_each_chunk(&mut jobs[..k], per, &|_, js| {
                for (xr, qs, sc, ch, fl) in js.iter_mut().flatten() {
                    **fl = row_q8(xr, qs, sc, ch);
                }
            });
        }
        self.m = m;
        Ok(())
    }

    /// Row `r` (< rows()).
    pub fn row(&self, r: usize) -> Result<ActRow<'_>> {
        if r >= self.m {
            return Err(Error::ShapeMismatch {
                expected: self.m,
                found: r,
            });
        }
        let n = self.n_in;
        let nb = n / QK;
        let pick = |len: usize| if len == 0 { 0..0 } else { r * n..(r + 1) * n };
        Ok(ActRow {
            qs: &self.qs[pick(self.qs.len())],
            sc: if self.sc.is_empty() {
                &[]
            } else {
                &self.sc[r * nb..(r + 1) * nb]
            },
            ch: if self.ch.is_empty() {
                &[]
            } else {
                let nc = nb.div_ceil(CHUNK_BLOCKS);
                &self.ch[r * nc..(r + 1) * nc]
            },
            flags: self.flags[r],
            h: &self.h[pick(self.h.len())],
            f: &self.f[pick(self.f.len())],
        })
    }

    /// Block `b` of row `r` in GGUF `Q8_1` layout (`Q8_0` is the same without `s`).
    pub fn q8_1_block(&self, r: usize, b: usize) -> Result<BlockQ8_1> {
        let row = self.row(r)?;
        let s = row.sc.get(b).ok_or(Error::ShapeMismatch {
            expected: row.sc.len(),
            found: b,
        })?;
        let mut qs = [0i8; QK];
        qs.copy_from_slice(&row.qs[b * QK..(b + 1) * QK]);
        Ok(BlockQ8_1 {
            d: s.d.to_le_bytes(),
            s: s.s.to_le_bytes(),
            qs,
        })
    }
}

/// The fixed-point form of a block's scales.
pub fn act_scale(d: u16, s: u16, bsum: i32) -> ActScale {
    let (dm, dsh) = f16_fixed(d);
    let (sm, ssh) = f16_fixed(s);
    ActScale {
        d,
        s,
        bsum,
        dm,
        dsh,
        sm,
        ssh,
        drel: 0,
        srel: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every SIMD build of the row quantizer the CPU runs writes what the
    /// portable one writes, on random rows mixing every kind of value
    /// (normal, ±0, subnormal, ±∞, NaN, huge, tiny; blocks all zero, with
    /// zeros among normals or with one outlier), and the branch-free block loop agrees with the
    /// element-by-element `q8_round` / soft-float formula it replaces.
    #[test]
    fn quantizer_builds_equal_portable() {
        let builds = quantize_builds::builds();
        let mut next = crate::testutil::lcg(0x2545_F491_4F6C_DD1Du64);
        const N: usize = 64 * QK;
        for round in 0..200 {
            let mut x = [F32::ZERO; N];
            for (j, v) in x.iter_mut().enumerate() {
                let block = j / QK;
                let r = next();
                let bits = match (block + round) % 7 {
                    // Mostly moderate normals around 2^-8..2^8.
                    0 | 1 => (r & 0x8000_0000) | (0x3B80_0000 + (r % 0x0800_0000)),
                    2 => match r % 16 {
                        0 => 0,
                        1 => 0x8000_0000,
                        2 => r & 0x807F_FFFF, // subnormal
                        3 => 0x7F80_0000 | (r & 0x8000_0000),
                        4 => 0x7FC0_0001,
                        _ => r,
                    },
                    3 => 0, // all zero
                    4 => {
                        if j % QK == 5 {
                            0x4700_0000 // one outlier
                        } else {
                            (r & 0x8000_0000) | (0x3000_0000 + (r % 0x0100_0000))
                        }
                    }
                    5 => match r % 4 {
                        0 => r & 0x8000_0000, // ±0 among normals
                        _ => (r & 0x8000_0000) | (0x3B80_0000 + (r % 0x0800_0000)),
                    },
                    _ => r, // any bits
                };
                *v = F32::from_bits(bits);
            }
            let nb = N / QK;
            let nc = nb.div_ceil(CHUNK_BLOCKS);
            let run = |f: QuantRowFn| {
                let mut qs = [0i8; N];
                let mut sc = [ActScale::default(); N / QK];
                let mut ch = [ChunkScale::default(); N / QK];
                let fl = f(&x, &mut qs, &mut sc, &mut ch[..nc]);
                (qs, sc, ch, fl)
            };
            let want = run(quantize_row_q8);
            for f in builds.iter().flatten() {
                assert!(want == run(*f), "round {round}");
            }
            // The block loop against the per-element formulas.
            for xb in x.chunks_exact(QK) {
                let xb: &[F32; QK] = xb.try_into().unwrap();
                let (qs, ..) = quantize_block_q8(xb);
                let amax = xb
                    .iter()
                    .filter(|v| !v.is_nan())
                    .fold(F32::ZERO, |a, v| if v.abs().gt(a) { v.abs() } else { a });
                let nan = xb.iter().any(|v| v.is_nan());
                let d = if nan { F32::NAN } else { amax / F32_127 };
                let id = if d.is_zero() { F32::ZERO } else { F32::ONE / d };
                for (&q, &v) in qs.iter().zip(xb) {
                    let want = (v * id).to_i32_round_ties_away().clamp(-127, 127);
                    assert_eq!(q as i32, want, "{:#010x}", v.to_bits());
                }
            }
        }
    }
}
