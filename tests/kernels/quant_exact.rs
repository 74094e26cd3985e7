//! Exact dot products against an independent reference: every weight and
//! activation element dequantized to an exact integer multiple of 2^-24 (via
//! hardware f64, not the library's integer decoding), the products summed in
//! `i128`, rounded once by a separately written rounding routine.
//! Also: the Q8 reference quantizer against hardware f32 arithmetic.
use crate::support;

use detllm::F32;
use detllm::quant::GgmlType;
use detllm::quant::act::{
    ActRow, FLAG_D_NONFINITE, FLAG_S_NONFINITE, act_scale, q8_round, quantize_block_q8,
};
use detllm::quant::dot::dot_row;
use proptest::prelude::*;
use support::quant::{Rng, f16_finite, f16_scaled, round_2m48, sw};

/// Weight row → (element values × 2^24 without the Q4_1/Q5_1 min, per-block mins × 2^24, any non-finite scale).
fn ref_weights(ty: GgmlType, data: &[u8], n: usize) -> (Vec<i128>, Vec<i128>, bool) {
    let mut el = Vec::with_capacity(n);
    let mut mins = Vec::new();
    let mut bad = false;
    let h = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let sc = |x: u16, bad: &mut bool| {
        if !f16_finite(x) {
            *bad = true;
            0
        } else {
            f16_scaled(x)
        }
    };
    match ty {
        GgmlType::F16 => {
            for i in 0..n {
                el.push(sc(h(data, 2 * i), &mut bad));
            }
        }
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => {
            let bs = ty.type_size();
            for b in data.chunks(bs) {
                let d = sc(h(b, 0), &mut bad);
                let (m, qh, qs) = match ty {
                    GgmlType::Q4_0 => (None, 0u32, &b[2..]),
                    GgmlType::Q4_1 => (Some(sc(h(b, 2), &mut bad)), 0, &b[4..]),
                    GgmlType::Q5_0 => (
                        None,
                        u32::from_le_bytes(b[2..6].try_into().unwrap()),
                        &b[6..],
                    ),
                    GgmlType::Q5_1 => (
                        Some(sc(h(b, 2), &mut bad)),
                        u32::from_le_bytes(b[4..8].try_into().unwrap()),
                        &b[8..],
                    ),
                    _ => (None, 0, &b[2..]),
                };
                for i in 0..32 {
                    let q: i128 = match ty {
                        GgmlType::Q8_0 => qs[i] as i8 as i128,
                        _ => {
                            let nib = if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 } as i128;
                            let hi = ((qh >> i) & 1) as i128;
                            match ty {
                                GgmlType::Q4_0 => nib - 8,
                                GgmlType::Q4_1 => nib,
                                GgmlType::Q5_0 => nib + 16 * hi - 16,
                                _ => nib + 16 * hi,
                            }
                        }
                    };
                    el.push(q * d);
                }
                if let Some(m) = m {
                    mins.push(m);
                }
            }
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            let q5 = ty == GgmlType::Q5_K;
            for b in data.chunks(ty.type_size()) {
                let d = sc(h(b, 0), &mut bad);
                let dmin = sc(h(b, 2), &mut bad);
                let s = &b[4..16];
                // Q5_K: qh[32] at 16 (bit i/32 of qh[i%32] adds 16), nibbles at 48.
                let (qh, qs) = if q5 {
                    (&b[16..48], &b[48..])
                } else {
                    (&b[16..16], &b[16..])
                };
                for i in 0..256 {
                    let j = i / 32;
                    let (scl, mn) = if j < 4 {
                        (s[j] & 63, s[j + 4] & 63)
                    } else {
                        (
                            (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4),
                            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
                        )
                    };
                    let byte = qs[(i / 64) * 32 + i % 32];
                    let mut q = if j % 2 == 0 { byte & 15 } else { byte >> 4 };
                    if q5 {
                        q += 16 * ((qh[i % 32] >> j) & 1);
                    }
                    el.push(d * scl as i128 * q as i128 - dmin * mn as i128);
                }
            }
        }
        GgmlType::Q6_K => {
            for b in data.chunks(210) {
                let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
                let d = sc(h(b, 208), &mut bad);
                let mut y = [0i128; 256];
                for half in 0..2 {
                    for l in 0..32 {
                        let (ql, qh) = (&ql[64 * half..], &qh[32 * half..]);
                        let q1 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) as i128 - 32;
                        let q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) as i128 - 32;
                        let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i128 - 32;
                        let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i128 - 32;
                        let base = 128 * half;
                        y[base + l] = q1;
                        y[base + l + 32] = q2;
                        y[base + l + 64] = q3;
                        y[base + l + 96] = q4;
                    }
                }
                for (i, q) in y.iter().enumerate() {
                    el.push(d * scales[i / 16] as i8 as i128 * q);
                }
            }
        }
        _ => unreachable!(),
    }
    (el, mins, bad)
}

struct Acts {
    qs: Vec<i8>,
    sc: Vec<detllm::quant::ActScale>,
    h: Vec<u16>,
    flags: u8,
    flags_h: u8,
}

impl Acts {
    fn row(&self, ty: GgmlType) -> ActRow<'_> {
        let flags = if ty == GgmlType::F16 {
            self.flags_h
        } else {
            self.flags
        };
        ActRow {
            qs: &self.qs,
            sc: &self.sc,
            ch: &[],
            flags,
            h: &self.h,
            f: &[],
        }
    }
}

fn random_acts(rng: &mut Rng, n: usize, specials: bool) -> Acts {
    let mut qs = vec![0i8; n];
    let mut sc = Vec::new();
    let mut flags = 0;
    for b in qs.chunks_mut(32) {
        let mut sum = 0;
        for q in b.iter_mut() {
            *q = ((rng.next() % 255) as i32 - 127) as i8;
            sum += *q as i32;
        }
        let d = rng.f16_scale(specials);
        let s = rng.f16_scale(specials);
        if !f16_finite(d) {
            flags |= FLAG_D_NONFINITE;
        }
        if !f16_finite(s) {
            flags |= FLAG_S_NONFINITE;
        }
        sc.push(act_scale(d, s, sum));
    }
    let mut h = vec![0u16; n];
    let mut flags_h = 0;
    for v in h.iter_mut() {
        *v = rng.f16_scale(specials);
        if !f16_finite(*v) {
            flags_h |= FLAG_D_NONFINITE;
        }
    }
    Acts {
        qs,
        sc,
        h,
        flags,
        flags_h,
    }
}

fn random_weights(rng: &mut Rng, ty: GgmlType, n: usize, specials: bool) -> Vec<u8> {
    let bytes = ty.row_bytes(n).unwrap();
    let mut w = vec![0u8; bytes];
    rng.bytes(&mut w);
    let put = |w: &mut [u8], o: usize, v: u16| w[o..o + 2].copy_from_slice(&v.to_le_bytes());
    let bs = ty.type_size();
    for b in 0..bytes / bs {
        let o = b * bs;
        match ty {
            GgmlType::F16 => put(&mut w, o, rng.f16_scale(specials)),
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => {
                put(&mut w, o, rng.f16_scale(specials))
            }
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => {
                put(&mut w, o, rng.f16_scale(specials));
                put(&mut w, o + 2, rng.f16_scale(specials));
            }
            GgmlType::Q6_K => put(&mut w, o + 208, rng.f16_scale(specials)),
            _ => {}
        }
    }
    w
}

fn reference(ty: GgmlType, w: &[u8], a: &Acts, n: usize) -> u32 {
    let (el, mins, mut bad) = ref_weights(ty, w, n);
    let mut sum: i128 = 0;
    if ty == GgmlType::F16 {
        for (e, &x) in el.iter().zip(&a.h) {
            if !f16_finite(x) {
                bad = true;
            } else {
                sum += e * f16_scaled(x);
            }
        }
    } else {
        for (i, e) in el.iter().enumerate() {
            let d = a.sc[i / 32].d;
            if !f16_finite(d) {
                bad = true;
            } else {
                sum += e * (a.qs[i] as i128 * f16_scaled(d));
            }
        }
        for (b, m) in mins.iter().enumerate() {
            let s = a.sc[b].s;
            if !f16_finite(s) {
                bad = true;
            } else {
                sum += m * f16_scaled(s);
            }
        }
        // A non-finite activation scale anywhere in the row makes the row NaN.
        if a.sc.iter().any(|s| !f16_finite(s.d)) {
            bad = true;
        }
        if !mins.is_empty() && a.sc.iter().any(|s| !f16_finite(s.s)) {
            bad = true;
        }
    }
    if bad { 0x7FC0_0000 } else { round_2m48(sum) }
}

const TYPES: [GgmlType; 9] = [
    GgmlType::F16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

fn check(seed: u64, ti: usize, blocks: usize, specials: bool) {
    let ty = TYPES[ti % TYPES.len()];
    let n = blocks
        * if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
            256
        } else {
            32
        };
    let mut rng = Rng(seed);
    let w = random_weights(&mut rng, ty, n, specials);
    let a = random_acts(&mut rng, n, specials);
    let got = dot_row(ty, &w, &a.row(ty), n).unwrap().to_bits();
    let want = reference(ty, &w, &a, n);
    assert_eq!(
        got,
        want,
        "{ty:?} n={n} seed={seed}: got {:e} want {:e}",
        f32::from_bits(got),
        f32::from_bits(want)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn exact_dot_matches_reference(seed in any::<u64>(), ti in 0usize..9, blocks in 1usize..12) {
        check(seed, ti, blocks, false);
    }

    #[test]
    fn exact_dot_nonfinite_scales_give_nan(seed in any::<u64>(), ti in 0usize..9, blocks in 1usize..6) {
        check(seed, ti, blocks, true);
    }
}

/// Long rows near the documented bound: 2^17 elements of extreme values.
#[test]
fn long_rows_extreme_scales_stay_exact() {
    for (ti, ty) in TYPES.iter().enumerate() {
        let n = 1 << 17;
        let mut rng = Rng(ti as u64);
        let mut w = random_weights(&mut rng, *ty, n, false);
        let mut a = random_acts(&mut rng, n, false);
        // Largest finite scales everywhere (worst case for the accumulator).
        let bs = ty.type_size();
        for b in 0..w.len() / bs {
            let o = b * bs;
            let off = if *ty == GgmlType::Q6_K { 208 } else { 0 };
            w[o + off..o + off + 2].copy_from_slice(&0x7BFFu16.to_le_bytes());
        }
        for s in a.sc.iter_mut() {
            *s = act_scale(0x7BFF, 0x7BFF, s.bsum);
        }
        for h in a.h.iter_mut() {
            *h = 0x7BFF;
        }
        a.flags = 0;
        let got = dot_row(*ty, &w, &a.row(*ty), n).unwrap().to_bits();
        assert_eq!(got, reference(*ty, &w, &a, n), "{ty:?}");
    }
}

/// Hardware-f32 version of `quantize_row_q8_1_ref` (IEEE RNE, no FMA).
fn q8_ref(x: &[f32]) -> (Vec<i8>, u16, u16) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    let qs: Vec<i8> = x
        .iter()
        .map(|&v| {
            let q = (v * id).round() as i8; // round(): ties away from zero
            sum += q as i32;
            q
        })
        .collect();
    let s = sum as f32 * d;
    (qs, sw(d).to_f16_bits(), sw(s).to_f16_bits())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]
    #[test]
    fn q8_quantizer_matches_hardware_reference(seed in any::<u64>(), lo in -30i32..10, span in 0i32..30) {
        let mut rng = Rng(seed);
        let mut x = [0f32; 32];
        for v in x.iter_mut() {
            *v = rng.f32_in(lo, lo + span);
        }
        // Exact ties x·id = k + 1/2 appear when x is a multiple of d/2.
        if seed % 4 == 0 {
            let d = x.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
            for (i, v) in x.iter_mut().enumerate().skip(1) {
                *v = (i as f32 - 16.5) * 2.0 * d / 2.0;
            }
        }
        let xs: [F32; 32] = x.map(sw);
        let (qs, d, s, sum) = quantize_block_q8(&xs);
        let (rq, rd, rs) = q8_ref(&x);
        prop_assert_eq!(qs.to_vec(), rq.clone());
        prop_assert_eq!(d, rd);
        prop_assert_eq!(s, rs);
        prop_assert_eq!(sum, rq.iter().map(|&q| q as i32).sum::<i32>());
    }
}

#[test]
fn q8_quantizer_edge_cases() {
    // All zero: d = 0, id = 0, q = 0.
    let (qs, d, s, _) = quantize_block_q8(&[F32::ZERO; 32]);
    assert_eq!((qs, d, s), ([0; 32], 0, 0));
    // NaN anywhere: d is NaN, so every dot with this block is NaN.
    let mut x = [F32::ONE; 32];
    x[7] = F32::NAN;
    let (_, d, _, _) = quantize_block_q8(&x);
    assert!(!f16_finite(d));
    // Infinity: d = inf.
    x[7] = F32::INFINITY;
    let (qs, d, _, _) = quantize_block_q8(&x);
    assert_eq!(d, 0x7C00);
    assert_eq!(qs, [0; 32]);
    // Ties away from zero: x = ±0.5·d·k.
    let mut x = [0f32; 32];
    x[0] = 127.0;
    x[1] = 0.5;
    x[2] = -0.5;
    x[3] = 2.5;
    let (qs, _, _, _) = quantize_block_q8(&x.map(sw));
    assert_eq!(&qs[..4], &[127, 1, -1, 3]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]
    /// The integer element quantizer equals hardware `roundf(v · id)`
    /// (binary32 product, RNE) clamped to ±127, for every finite `v` and
    /// positive normal `id`; `near` puts `v · id` within a few ulps of a
    /// half-integer, where the product's rounding decides the result; with
    /// `short`, `id = 1.5 · 2^e`, so the exact product has two bits beyond
    /// binary32 and exact ties of its rounding (ties-to-even) occur.
    #[test]
    fn q8_round_matches_hardware(vb in any::<u32>(), ib in 0x0080_0000u32..0x7F80_0000,
                                 near in any::<bool>(), short in any::<bool>(), nudge in -3i32..=3) {
        let ib = if short { (ib & 0x7F80_0000) | 0x0040_0000 } else { ib };
        let id = f32::from_bits(ib);
        let v = if near {
            let target = (vb % 512) as f32 * 0.5 - 128.0;
            let v = target / id;
            f32::from_bits((v.to_bits() as i32).wrapping_add(nudge) as u32)
        } else {
            f32::from_bits(vb)
        };
        prop_assume!(v.is_finite());
        let want = ((v * id).round() as i32).clamp(-127, 127);
        prop_assert_eq!(q8_round(sw(v), sw(id)), want, "v = {:e}, id = {:e}", v, id);
    }
}
