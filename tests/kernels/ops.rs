//! rmsnorm, softmax, rope, swiglu and attention against hardware-f32
//! transcriptions of the documented formulas (elementary functions taken
//! from detllm's own `F32::exp`/`sin_cos`/`silu`, which have their own tests),
//! and the exact f16 attention against an i128 reference.
#![allow(clippy::needless_range_loop)] // references mirror the written formulas
use crate::support;

use detllm::kernels::{RopeStyle, attention, rmsnorm, rope, rope_theta_scale, softmax, swiglu};
use detllm::kv::{KvRead, KvSlice};
use detllm::{Error, F32};
use proptest::prelude::*;
use support::quant::{Rng, canon, f16_finite, f16_scaled, hw, round_2m48, sw};

fn vals(rng: &mut Rng, n: usize, lo: i32, hi: i32) -> Vec<F32> {
    (0..n).map(|_| sw(rng.f32_in(lo, hi))).collect()
}

fn bits(v: &[F32]) -> Vec<u32> {
    v.iter().map(|x| canon(x.to_bits())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn rmsnorm_matches_formula(seed in any::<u64>(), n in 1usize..700) {
        let mut rng = Rng(seed);
        let x = vals(&mut rng, n, -6, 3);
        let w = vals(&mut rng, n, -3, 1);
        let eps = sw(1e-5);
        let mut out = vec![F32::ZERO; n];
        rmsnorm(&x, &w, eps, &mut out).unwrap();
        let mut ss = 0f32;
        for v in &x { ss += hw(*v) * hw(*v); }
        let scale = 1.0 / (ss / n as f32 + 1e-5f32).sqrt();
        let want: Vec<u32> = x.iter().zip(&w).map(|(a, b)| canon(((hw(*a) * scale) * hw(*b)).to_bits())).collect();
        prop_assert_eq!(bits(&out), want);
    }

    #[test]
    fn softmax_matches_formula(seed in any::<u64>(), n in 1usize..300, valid_frac in 0usize..=100) {
        let mut rng = Rng(seed);
        let s = vals(&mut rng, n, -3, 5);
        let nv = (n * valid_frac / 100).max(1);
        let scale = sw(0.125);
        let mut got = s.clone();
        softmax(&mut got, scale, nv).unwrap();
        let t: Vec<f32> = s[..nv].iter().map(|v| hw(*v) * 0.125).collect();
        let max = t.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
        let e: Vec<f32> = t.iter().map(|v| hw(sw(v - max).exp())).collect();
        let mut sum = 0f32;
        for v in &e { sum += v; }
        let inv = 1.0 / sum;
        let mut want: Vec<u32> = e.iter().map(|v| (v * inv).to_bits()).collect();
        want.resize(n, 0);
        prop_assert_eq!(bits(&got), want);
    }

    #[test]
    fn swiglu_matches_formula(seed in any::<u64>(), n in 1usize..200) {
        let mut rng = Rng(seed);
        let g = vals(&mut rng, n, -4, 4);
        let u = vals(&mut rng, n, -4, 2);
        let mut got = g.clone();
        swiglu(&mut got, &u).unwrap();
        let want: Vec<u32> = g.iter().zip(&u).map(|(a, b)| canon((hw(detllm::math::silu(*a)) * hw(*b)).to_bits())).collect();
        prop_assert_eq!(bits(&got), want);
    }

    #[test]
    fn rope_matches_formula(seed in any::<u64>(), pos in 0usize..9000, neox in any::<bool>(), partial in any::<bool>()) {
        let (n_heads, head_dim) = (3, 64);
        let n_rot = if partial { 32 } else { 64 };
        let mut rng = Rng(seed);
        let x = vals(&mut rng, n_heads * head_dim, -4, 2);
        let ts = rope_theta_scale(sw(10000.0), n_rot);
        prop_assert_eq!(ts, sw(10000f32).powf(sw(-2.0f32 / n_rot as f32)));
        let style = if neox { RopeStyle::Neox } else { RopeStyle::Norm };
        let mut got = x.clone();
        rope(&mut got, n_heads, head_dim, n_rot, pos, ts, style).unwrap();
        let mut want: Vec<f32> = x.iter().map(|v| hw(*v)).collect();
        let mut theta = pos as f32;
        for i in 0..n_rot / 2 {
            let (s, c) = sw(theta).sin_cos();
            let (s, c) = (hw(s), hw(c));
            for h in 0..n_heads {
                let (a, b) = if neox { (i, i + n_rot / 2) } else { (2 * i, 2 * i + 1) };
                let (x0, x1) = (want[h * head_dim + a], want[h * head_dim + b]);
                want[h * head_dim + a] = x0 * c - x1 * s;
                want[h * head_dim + b] = x0 * s + x1 * c;
            }
            theta *= hw(ts);
        }
        prop_assert_eq!(bits(&got), want.iter().map(|v| canon(v.to_bits())).collect::<Vec<_>>());
    }
}

/// A cache of `n_ctx` positions, rows of `kv_dim` elements.
struct Cache {
    k16: Vec<Vec<u16>>,
    v16: Vec<Vec<u16>>,
    k32: Vec<Vec<F32>>,
    v32: Vec<Vec<F32>>,
    f16: bool,
}

impl KvRead for Cache {
    fn k(&self, pos: usize) -> KvSlice<'_> {
        if self.f16 {
            KvSlice::F16(&self.k16[pos])
        } else {
            KvSlice::F32(&self.k32[pos])
        }
    }
    fn v(&self, pos: usize) -> KvSlice<'_> {
        if self.f16 {
            KvSlice::F16(&self.v16[pos])
        } else {
            KvSlice::F32(&self.v32[pos])
        }
    }
}

fn cache(rng: &mut Rng, n_ctx: usize, kv_dim: usize, f16: bool) -> Cache {
    let k32: Vec<Vec<F32>> = (0..n_ctx).map(|_| vals(rng, kv_dim, -5, 2)).collect();
    let v32: Vec<Vec<F32>> = (0..n_ctx).map(|_| vals(rng, kv_dim, -5, 2)).collect();
    let h = |r: &Vec<F32>| r.iter().map(|v| v.to_f16_bits()).collect();
    Cache {
        k16: k32.iter().map(h).collect(),
        v16: v32.iter().map(h).collect(),
        k32,
        v32,
        f16,
    }
}

/// Exact Σ a_i·b_i of binary16 values, rounded once (independent reference).
fn exact16(a: &[u16], b: &[u16]) -> F32 {
    if a.iter().chain(b).any(|&x| !f16_finite(x)) {
        return F32::NAN;
    }
    let s: i128 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f16_scaled(x) * f16_scaled(y))
        .sum();
    F32::from_bits(round_2m48(s))
}

fn reference(
    q: &[F32],
    c: &Cache,
    n_ctx: usize,
    n_head: usize,
    n_kv: usize,
    hd: usize,
    scale: F32,
) -> Vec<u32> {
    let mut out = Vec::new();
    for h in 0..n_head {
        let kh = h / (n_head / n_kv);
        let qh = &q[h * hd..(h + 1) * hd];
        let mut s: Vec<F32> = (0..n_ctx)
            .map(|t| {
                if c.f16 {
                    let q16: Vec<u16> = qh.iter().map(|v| v.to_f16_bits()).collect();
                    exact16(&q16, &c.k16[t][kh * hd..(kh + 1) * hd])
                } else {
                    let mut acc = 0f32;
                    for (a, b) in qh.iter().zip(&c.k32[t][kh * hd..]) {
                        acc += hw(*a) * hw(*b);
                    }
                    sw(acc)
                }
            })
            .collect();
        softmax(&mut s, scale, n_ctx).unwrap();
        for d in 0..hd {
            out.push(if c.f16 {
                let p: Vec<u16> = s.iter().map(|v| v.to_f16_bits()).collect();
                let v: Vec<u16> = (0..n_ctx).map(|t| c.v16[t][kh * hd + d]).collect();
                canon(exact16(&p, &v).to_bits())
            } else {
                let mut acc = 0f32;
                for t in 0..n_ctx {
                    acc += hw(s[t]) * hw(c.v32[t][kh * hd + d]);
                }
                canon(acc.to_bits())
            });
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn attention_matches_reference(seed in any::<u64>(), n_ctx in 1usize..40, f16 in any::<bool>(), g in 1usize..4) {
        let (n_kv, hd) = (2, 16);
        let n_head = n_kv * g;
        let mut rng = Rng(seed);
        let c = cache(&mut rng, n_ctx, n_kv * hd, f16);
        let q = vals(&mut rng, n_head * hd, -3, 2);
        let scale = sw(0.25);
        let mut scores = vec![F32::ZERO; n_ctx + 3];
        let mut out = vec![F32::ZERO; n_head * hd];
        attention(&q, &c, n_ctx, n_head, n_kv, hd, scale, &mut scores, &mut out).unwrap();
        prop_assert_eq!(bits(&out), reference(&q, &c, n_ctx, n_head, n_kv, hd, scale));
    }
}

#[test]
fn attention_rejects_bad_shapes_without_writing() {
    let mut rng = Rng(1);
    let c = cache(&mut rng, 4, 32, true);
    let q = vals(&mut rng, 64, -3, 2);
    let mut scores = vec![F32::ZERO; 4];
    let mut out = vec![F32::NAN; 64];
    // 3 kv heads do not divide 4 heads; scores too short; rows too short.
    assert_eq!(
        attention(&q, &c, 4, 4, 3, 16, F32::ONE, &mut scores, &mut out),
        Err(Error::InvalidHeads {
            n_head: 4,
            n_kv_head: 3,
            head_dim: 16
        })
    );
    assert_eq!(
        attention(&q, &c, 5, 4, 2, 16, F32::ONE, &mut scores, &mut out),
        Err(Error::BufferTooSmall {
            needed: 5,
            available: 4
        })
    );
    assert!(attention(&q, &c, 4, 2, 1, 32, F32::ONE, &mut scores, &mut out).is_ok());
    let mut out2 = vec![F32::NAN; 64];
    assert_eq!(
        attention(&q, &c, 4, 4, 4, 16, F32::ONE, &mut scores, &mut out2),
        Err(Error::ShapeMismatch {
            expected: 64,
            found: 32
        })
    );
    assert!(out2.iter().all(|v| v.is_nan()));
}

#[test]
fn rope_pos0_is_identity_and_tail_is_copied() {
    let mut rng = Rng(2);
    let x = vals(&mut rng, 128, -3, 2);
    let mut y = x.clone();
    rope(
        &mut y,
        2,
        64,
        32,
        0,
        rope_theta_scale(sw(10000.0), 32),
        RopeStyle::Norm,
    )
    .unwrap();
    // theta = 0 for every pair at pos 0: cos = 1, sin = 0.
    assert_eq!(bits(&y), bits(&x));
    rope(
        &mut y,
        2,
        64,
        32,
        7,
        rope_theta_scale(sw(10000.0), 32),
        RopeStyle::Neox,
    )
    .unwrap();
    assert_eq!(bits(&y[32..64]), bits(&x[32..64]));
    assert_eq!(
        rope(&mut y, 2, 64, 66, 7, F32::ONE, RopeStyle::Norm),
        Err(Error::InvalidRope {
            n_rot: 66,
            head_dim: 64
        })
    );
}
