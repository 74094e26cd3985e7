//! Determinism-suite cases for the kernels (group `kernel` of
//! [`crate::selftest`]): every weight block format decoded and multiplied,
//! and the f32 kernels, on seeded pseudo-random inputs, hashed, so that
//! `scripts/cross-test.sh` checks block decoding (little-endian bytes, bit
//! fields, K-quant scale packing) and the exact dot products on every target.
//!
//! ## Inputs
//! One [`SplitMix64`] seeded with [`crate::selftest::SEED`] per case. Weight
//! bytes are random, with every scale field replaced by a finite random f16
//! (biased exponent 0..=20: subnormal to 2^5, both signs) so that results are
//! numbers rather than NaN; f16/bf16/f32 weights are random finite values of
//! moderate exponent. Activations are [`crate::selftest::draw`] values with
//! exponent forced into `[2^-8, 2^8)`.
//!
//! ## Digest
//! `kernel.matmul`: for each format in [`FORMATS`] order, every dequantized
//! weight value (row by row) and then the `(M, N_OUT)` matmul output, as
//! little-endian `F32` bits; `kernel.matmul_q5_k` likewise for
//! [`FORMATS_Q5_K`]. `kernel.ops`: rmsnorm, softmax (scaled, masked),
//! RoPE (NORM and NEOX, partial rotary dims, several positions) and SwiGLU
//! outputs in that order. `kernel.geglu`: GEGLU (gemma3's gating) on rows of
//! every length 1..=[`GEGLU_MAX`] (so every block tail), gate values drawn
//! as the activations but with exponents in `[2^-8, 2^4)`.

#![forbid(unsafe_code)]

use super::inputs::{Digest, SEED, draw};
use crate::kernels::{
    RopeStyle, geglu, matmul, matmul_scratch_len, rmsnorm, rope, rope_theta_scale, softmax, swiglu,
};
use crate::quant::{ActKind, GgmlType, QActs, QMatrix};
use crate::sample::SplitMix64;
use crate::{Arena, F32, Result, Serial};
use sha2::{Digest as _, Sha256};

/// Weight formats the `kernel.matmul` case covers, in digest order.
pub const FORMATS: [GgmlType; 10] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

/// Formats of the `kernel.matmul_q5_k` case (added after [`FORMATS`], whose
/// digest stays as it was).
pub const FORMATS_Q5_K: [GgmlType; 1] = [GgmlType::Q5_K];

/// Row length (one 256-block for K-quants, eight 32-blocks otherwise).
pub const N_IN: usize = 256;
/// Weight rows.
pub const N_OUT: usize = 12;
/// Activation rows.
pub const M: usize = 3;

fn hash_f32s(h: &mut Sha256, xs: &[F32]) {
    for x in xs {
        h.update(x.to_bits().to_le_bytes());
    }
}

/// A finite random f16: random sign and mantissa, biased exponent 0..=20.
fn scale_f16(rng: &mut SplitMix64) -> u16 {
    let r = rng.next_u64();
    let exp = (r >> 32) % 21;
    (r as u16 & 0x83FF) | ((exp as u16) << 10)
}

/// An activation value in `[2^-8, 2^8)` with either sign.
fn act(rng: &mut SplitMix64) -> F32 {
    let b = draw(rng);
    F32::from_bits((b & 0x807F_FFFF) | ((119 + (b >> 23) % 16) << 23))
}

/// Byte offsets of the f16 scale fields inside one block of `ty`.
fn scale_offsets(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[],
    }
}

/// Random weight bytes of `ty` for an `(N_OUT, N_IN)` matrix, into `buf`.
fn weights(ty: GgmlType, rng: &mut SplitMix64, buf: &mut [u8]) {
    for b in buf.iter_mut() {
        *b = rng.next_u64() as u8;
    }
    match ty {
        GgmlType::F32 => {
            for c in buf.chunks_exact_mut(4) {
                let v = act(rng).to_bits();
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in buf.chunks_exact_mut(2) {
                c.copy_from_slice(&scale_f16(rng).to_le_bytes());
            }
        }
        GgmlType::BF16 => {
            for c in buf.chunks_exact_mut(2) {
                let v = (act(rng).to_bits() >> 16) as u16;
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        _ => {
            for block in buf.chunks_exact_mut(ty.type_size()) {
                for &o in scale_offsets(ty) {
                    block[o..o + 2].copy_from_slice(&scale_f16(rng).to_le_bytes());
                }
            }
        }
    }
}

/// `kernel.matmul`: dequantization and matmul in every format of [`FORMATS`].
pub fn case_matmul(scratch: &mut [u8]) -> Result<Digest> {
    matmul_digest(&FORMATS, scratch)
}

/// `kernel.matmul_q5_k`: the same for [`FORMATS_Q5_K`] (fresh generator).
pub fn case_matmul_q5_k(scratch: &mut [u8]) -> Result<Digest> {
    matmul_digest(&FORMATS_Q5_K, scratch)
}

/// Dequantized rows and matmul outputs of each format of `formats`, in order.
fn matmul_digest(formats: &[GgmlType], scratch: &mut [u8]) -> Result<Digest> {
    let mut rng = SplitMix64::new(SEED);
    let mut h = Sha256::new();
    for &ty in formats {
        let mut arena = Arena::new(scratch);
        let bytes = arena.alloc::<u8>(ty.row_bytes(N_IN)? * N_OUT)?;
        weights(ty, &mut rng, bytes);
        let w = QMatrix::new(ty, N_IN, N_OUT, bytes)?;
        let row = arena.alloc::<F32>(N_IN)?;
        for r in 0..N_OUT {
            w.dequantize_row(r, row)?;
            hash_f32s(&mut h, row);
        }
        let x = arena.alloc::<F32>(M * N_IN)?;
        for v in x.iter_mut() {
            *v = act(&mut rng);
        }
        let mut acts = QActs::new(&mut arena, ActKind::for_weight(ty), M, N_IN)?;
        acts.quantize(x)?;
        let out = arena.alloc::<F32>(M * N_OUT)?;
        let tmp = arena.alloc::<F32>(matmul_scratch_len(M, N_OUT))?;
        matmul(&Serial, &w, &acts, out, tmp)?;
        hash_f32s(&mut h, out);
    }
    Ok(h.finalize().into())
}

/// `kernel.ops`: rmsnorm, softmax, RoPE (both styles) and SwiGLU.
pub fn case_ops(scratch: &mut [u8]) -> Result<Digest> {
    const N: usize = 64;
    let mut rng = SplitMix64::new(SEED);
    let mut h = Sha256::new();
    let mut arena = Arena::new(scratch);
    let x = arena.alloc::<F32>(N)?;
    let w = arena.alloc::<F32>(N)?;
    let out = arena.alloc::<F32>(N)?;
    for v in x.iter_mut().chain(w.iter_mut()) {
        *v = act(&mut rng);
    }
    // rmsnorm with llama's eps (1e-5) and SmolLM2's (1e-5) as bits.
    rmsnorm(x, w, F32::from_bits(0x3727_C5AC), out)?;
    hash_f32s(&mut h, out);
    // softmax over every prefix length (causal mask), scale 1/8.
    for n_valid in 1..=N {
        out.copy_from_slice(x);
        softmax(out, F32::from_bits(0x3E00_0000), n_valid)?;
        hash_f32s(&mut h, out);
    }
    // RoPE: 4 heads of 16, rotary dims 16 and 8, positions far apart.
    for style in [RopeStyle::Norm, RopeStyle::Neox] {
        for n_rot in [16, 8] {
            let ts = rope_theta_scale(F32::from_bits(0x461C_4000), n_rot);
            for pos in [0, 1, 7, 100, 4095, 65_535] {
                out.copy_from_slice(x);
                rope(out, 4, 16, n_rot, pos, ts, style)?;
                hash_f32s(&mut h, out);
            }
        }
    }
    out.copy_from_slice(x);
    swiglu(out, w)?;
    hash_f32s(&mut h, out);
    Ok(h.finalize().into())
}

/// Longest row of `kernel.geglu`.
pub const GEGLU_MAX: usize = 80;

/// `kernel.geglu`: the GEGLU kernel's outputs, bit for bit. A model case
/// alone would miss a last-bit error here: the gated values are
/// re-quantized to 8-bit blocks before the down projection.
pub fn case_geglu(scratch: &mut [u8]) -> Result<Digest> {
    let mut rng = SplitMix64::new(SEED);
    let mut h = Sha256::new();
    let mut arena = Arena::new(scratch);
    let gate = arena.alloc::<F32>(GEGLU_MAX)?;
    let up = arena.alloc::<F32>(GEGLU_MAX)?;
    for n in 1..=GEGLU_MAX {
        for g in gate[..n].iter_mut() {
            let b = act(&mut rng).to_bits();
            *g = F32::from_bits((b & 0x807F_FFFF) | ((119 + (b >> 23) % 12) << 23));
        }
        for u in up[..n].iter_mut() {
            *u = act(&mut rng);
        }
        geglu(&mut gate[..n], &up[..n])?;
        hash_f32s(&mut h, &gate[..n]);
    }
    Ok(h.finalize().into())
}
