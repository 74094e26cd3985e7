//! Sampler behaviour: greedy ties, reproducibility, the effect of each
//! filter, and the top-k selection against the full-sort reference
//! (`support::sample_ref`).
use crate::support;

use detllm::sample::{Sampler, SamplingParams, SplitMix64, argmax};
use detllm::{Arena, F32};
use proptest::prelude::*;
use support::sample_ref;

fn f(x: i32) -> F32 {
    F32::from_i32(x)
}

#[test]
fn splitmix64_reference_values() {
    // First outputs for seed 0, computed independently in Python:
    //   s = (s + 0x9E3779B97F4A7C15) % 2**64; z = s
    //   z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    //   z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64; out = z ^ (z >> 31)
    let mut r = SplitMix64::new(0);
    assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
    assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
}

#[test]
fn argmax_ties_go_to_lowest_id() {
    let v = [f(1), f(3), f(2), f(3)];
    assert_eq!(argmax(&v), Some(1));
    let v = [F32::NAN, f(-1), F32::NAN];
    assert_eq!(argmax(&v), Some(1));
    assert_eq!(argmax(&[]), None);
}

/// `argmax` against the definition written with `F32::gt` (first index
/// whose value no later value exceeds, NaN skipped) on rows with ties,
/// ±0, subnormals, ±∞ and NaN.
#[test]
fn argmax_matches_gt_definition() {
    let mut rng = SplitMix64::new(11);
    for round in 0..3000 {
        let n = 1 + round % 67;
        let v: Vec<F32> = (0..n)
            .map(|_| {
                let r = rng.next_u64();
                F32::from_bits(match r % 9 {
                    0 => 0x7FC0_0000 | (r >> 40) as u32,                  // NaN
                    1 => ((r >> 8) as u32) & 0x8000_0000,                 // ±0
                    2 => ((r >> 8) as u32) & 0x8000_00FF,                 // subnormal
                    3 => 0x7F80_0000 | (((r >> 8) as u32) & 0x8000_0000), // ±inf
                    4 => 0x4000_0000 | (((r >> 8) as u32) & 0x8000_0003), // ties
                    _ => (r >> 16) as u32,
                })
            })
            .collect();
        let mut want: Option<usize> = None;
        for (i, &x) in v.iter().enumerate() {
            if x.is_nan() {
                continue;
            }
            match want {
                Some(j) if !x.gt(v[j]) => {}
                _ => want = Some(i),
            }
        }
        let want = want.unwrap_or(0) as u32;
        assert_eq!(argmax(&v), Some(want), "round {round}: {v:?}");
    }
}

#[test]
fn greedy_and_top_k_one_agree() {
    let mut buf = vec![0u8; 1 << 16];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 1000).unwrap();
    let mut rng = SplitMix64::new(7);
    let logits: Vec<F32> = (0..1000).map(|i| f((i * 7919) % 1000)).collect();
    let g = s
        .sample(&logits, &SamplingParams::GREEDY, &[], &mut rng)
        .unwrap();
    let p = SamplingParams {
        temperature: F32::ONE,
        top_k: 1,
        ..SamplingParams::GREEDY
    };
    let k = s.sample(&logits, &p, &[], &mut rng).unwrap();
    assert_eq!(g, k);
    assert_eq!(logits[g as usize], f(999));
}

#[test]
fn seeded_runs_repeat_and_seeds_differ() {
    let mut buf = vec![0u8; 1 << 16];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 64).unwrap();
    let logits: Vec<F32> = (0..64).map(|i| F32::from_i32(i % 5)).collect();
    let p = SamplingParams {
        temperature: F32::ONE,
        ..SamplingParams::GREEDY
    };
    let run = |s: &mut Sampler, seed| {
        let mut rng = SplitMix64::new(seed);
        (0..50)
            .map(|_| s.sample(&logits, &p, &[], &mut rng).unwrap())
            .collect::<Vec<_>>()
    };
    let a = run(&mut s, 1);
    assert_eq!(a, run(&mut s, 1));
    assert_ne!(a, run(&mut s, 2));
}

/// Inverse of `x ^ (x >> k)` on 64 bits.
fn unxorshift(y: u64, k: u32) -> u64 {
    let mut x = y;
    for _ in 0..64 / k {
        x = y ^ (x >> k);
    }
    x
}

/// The inverse of an odd 64-bit multiplier (Newton's iteration).
fn inverse(c: u64) -> u64 {
    let mut inv = c;
    for _ in 0..6 {
        inv = inv.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(inv)));
    }
    inv
}

/// A seed whose first `next_unit()` is exactly `k · 2^-24`: SplitMix64's
/// output mix inverted (the sampler reads only the top 24 bits, so seeds
/// `seed_for_unit(0..2^24)` give it every random input it can see, once).
fn seed_for_unit(k: u32) -> u64 {
    let out = u64::from(k) << 40;
    let z = unxorshift(out, 31).wrapping_mul(inverse(0x94D0_49BB_1331_11EB));
    let z = unxorshift(z, 27).wrapping_mul(inverse(0xBF58_476D_1CE4_E5B9));
    unxorshift(z, 30).wrapping_sub(0x9E37_79B9_7F4A_7C15)
}

/// Over every random input the sampler can see (all 2^24 values of
/// `next_unit()`), how often each token is drawn, against the exact softmax
/// of the f32 logits (f64 arithmetic, independent of the library): each
/// token's count may differ from `2^24 · p` by at most `SLACK` values
/// (probability error ≤ 1e-6). The only inexactness is the sampler's own
/// f32 rounding of exp, of the running sums and of `u · sum`, each a few
/// ulps, which moves each boundary by a few of the 2^24 grid points.
fn exact_frequencies(logits: &[F32], temperature: F32) {
    const SLACK: f64 = 16.0;
    let n = logits.len();
    let mut buf = vec![0u8; 1 << 14];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, n).unwrap();
    let p = SamplingParams {
        temperature,
        ..SamplingParams::GREEDY
    };
    let mut counts = vec![0u64; n];
    for k in 0..1u32 << 24 {
        let mut rng = SplitMix64::new(seed_for_unit(k));
        counts[s.sample(logits, &p, &[], &mut rng).unwrap() as usize] += 1;
    }
    let t = f64::from(f32::from_bits(temperature.to_bits()));
    let l: Vec<f64> = logits
        .iter()
        .map(|x| f64::from(f32::from_bits(x.to_bits())) / t)
        .collect();
    let max = l.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = l.iter().map(|x| (x - max).exp()).sum();
    for (i, &c) in counts.iter().enumerate() {
        let want = (l[i] - max).exp() / sum * f64::from(1u32 << 24);
        assert!(
            (c as f64 - want).abs() <= SLACK,
            "token {i}: drawn {c} of 2^24 times, softmax says {want:.1} ({counts:?})"
        );
    }
}

#[test]
fn seed_for_unit_inverts_splitmix64() {
    for k in [0u32, 1, 2, 0x80_0000, 0xFF_FFFF, 0x12_3456] {
        let mut rng = SplitMix64::new(seed_for_unit(k));
        assert_eq!(rng.next_u64(), u64::from(k) << 40);
    }
}

#[test]
fn frequencies_follow_the_softmax() {
    // logits 0 and ln(3) (rounded): token 1 should be drawn ~75% of the time.
    let ln3 = F32::from_bits(0x3F8C_9F54); // 1.0986123
    exact_frequencies(&[F32::ZERO, ln3], F32::ONE);
    // Five tokens, unsorted, one tie, temperature 0.7.
    let t = F32::from_bits(0x3F33_3333);
    exact_frequencies(&[f(1), f(3), F32::HALF, f(3), f(-2)], t);
}

#[test]
fn top_p_and_min_p_cut_the_tail() {
    let mut buf = vec![0u8; 4096];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 4).unwrap();
    // Token 2 dominates; others are far below.
    let logits = [f(0), f(1), f(20), f(2)];
    for p in [
        SamplingParams {
            temperature: f(100),
            top_p: F32::HALF,
            ..SamplingParams::GREEDY
        },
        SamplingParams {
            temperature: f(100),
            min_p: F32::from_bits(0x3DCC_CCCD),
            ..SamplingParams::GREEDY
        },
    ] {
        let mut rng = SplitMix64::new(3);
        for _ in 0..200 {
            assert_eq!(s.sample(&logits, &p, &[], &mut rng).unwrap(), 2);
        }
    }
}

#[test]
fn repetition_penalty_changes_greedy_choice() {
    let mut buf = vec![0u8; 4096];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 3).unwrap();
    let logits = [f(10), f(9), f(1)];
    let p = SamplingParams {
        repeat_penalty: f(2),
        ..SamplingParams::GREEDY
    };
    let mut rng = SplitMix64::new(0);
    assert_eq!(s.sample(&logits, &p, &[0], &mut rng).unwrap(), 1);
    assert_eq!(s.sample(&logits, &p, &[2], &mut rng).unwrap(), 0);
}

#[test]
fn bad_parameters_are_errors() {
    let mut buf = vec![0u8; 4096];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 3).unwrap();
    let mut rng = SplitMix64::new(0);
    let p = SamplingParams {
        temperature: F32::NAN,
        ..SamplingParams::GREEDY
    };
    assert!(s.sample(&[f(1)], &p, &[], &mut rng).is_err());
    assert!(
        s.sample(&[f(1); 4], &SamplingParams::GREEDY, &[], &mut rng)
            .is_err()
    );
    assert!(
        s.sample(&[], &SamplingParams::GREEDY, &[], &mut rng)
            .is_err()
    );
}

/// A logit's bits: mostly ordinary values, with many ties, ±0, subnormals,
/// ±∞ and NaNs of both signs and any payload.
fn arb_logit() -> impl Strategy<Value = F32> {
    prop_oneof![
        4 => (-160i32..160).prop_map(|x| F32::from_bits((x as f32 / 8.0).to_bits())),
        2 => prop::sample::select(vec![-2.0f32, 0.5, 1.0, 3.0])
            .prop_map(|x| F32::from_bits(x.to_bits())),
        1 => any::<u32>().prop_map(|r| F32::from_bits(0x7F80_0001 | (r & 0x803F_FFFF))), // NaN
        1 => any::<bool>().prop_map(|neg| F32::from_bits(u32::from(neg) << 31)), // ±0
        1 => any::<bool>().prop_map(|neg| F32::from_bits((u32::from(neg) << 31) | 0x7F80_0000)), // ±∞
        1 => (any::<bool>(), 1u32..0x80_0000)
            .prop_map(|(neg, m)| F32::from_bits((u32::from(neg) << 31) | m)), // subnormal
        2 => any::<u32>().prop_map(F32::from_bits),
    ]
}

/// A valid non-negative finite parameter: the given specials or any value
/// in `[0, hi]`.
fn arb_param(specials: Vec<f32>, hi: f32) -> impl Strategy<Value = F32> {
    prop_oneof![prop::sample::select(specials), (0.0f32..=hi),]
        .prop_map(|x| F32::from_bits(x.to_bits()))
}

fn arb_params(n: usize) -> impl Strategy<Value = SamplingParams> {
    (
        arb_param(vec![0.0, 1e-3, 0.8, 1.0, 2.0], 4.0),
        prop_oneof![Just(0u32), Just(1), Just(40), 0..(n as u32 + 8)],
        arb_param(vec![0.0, 0.5, 0.95, 1.0, 1.5], 1.0),
        arb_param(vec![0.0, 0.05, 1.0, 2.0], 1.0),
        arb_param(vec![1.0, 1.1, 0.5], 3.0).prop_map(|x| if x.is_zero() { F32::ONE } else { x }),
        0usize..80,
        any::<u64>(),
    )
        .prop_map(
            |(temperature, top_k, top_p, min_p, repeat_penalty, penalty_last_n, seed)| {
                SamplingParams {
                    temperature,
                    top_k,
                    top_p,
                    min_p,
                    repeat_penalty,
                    penalty_last_n,
                    seed,
                }
            },
        )
}

/// A row, parameters valid for it, and a token history (ids up to a few
/// beyond the row, which the penalty skips).
fn arb_case() -> impl Strategy<Value = (Vec<F32>, SamplingParams, Vec<u32>)> {
    prop::collection::vec(arb_logit(), 1..600).prop_flat_map(|row| {
        let n = row.len();
        (
            Just(row),
            arb_params(n),
            prop::collection::vec(0..(n as u32 + 4), 0..100),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// The sampler picks the reference's token and leaves its generator in
    /// the reference's state, three draws in a row from one workspace.
    #[test]
    fn selection_equals_full_sort_reference((row, params, recent) in arb_case()) {
        let mut buf = vec![0u8; 16 << 10];
        let mut arena = Arena::new(&mut buf);
        let mut s = Sampler::new(&mut arena, 700).unwrap();
        let mut rng = SplitMix64::new(params.seed);
        let mut want_rng = rng;
        for _ in 0..3 {
            let got = s.sample(&row, &params, &recent, &mut rng).unwrap();
            let want = sample_ref::sample(&row, &params, &recent, &mut want_rng);
            prop_assert_eq!(got, want);
            prop_assert_eq!(rng, want_rng);
        }
    }
}

/// Full-size rows (SmolLM2's and Qwen2.5's vocabularies), with the defaults
/// and with top-k off: the same tokens as the reference.
#[test]
fn full_vocabulary_rows_equal_reference() {
    let mut rng = SplitMix64::new(2026);
    for (n, rounds) in [(49_152usize, 6), (151_936, 3)] {
        let mut buf = vec![0u8; Sampler::bytes_required(n).unwrap()];
        let mut arena = Arena::new(&mut buf);
        let mut s = Sampler::new(&mut arena, n).unwrap();
        for round in 0..rounds {
            // Logits in steps of 1/16 over [-16, 16): many exact ties.
            let row: Vec<F32> = (0..n)
                .map(|_| F32::from_i128_scaled((rng.next_u64() % 512) as i128 - 256, -4))
                .collect();
            for params in [
                SamplingParams::LLAMA_DEFAULTS,
                SamplingParams {
                    top_k: 0,
                    ..SamplingParams::LLAMA_DEFAULTS
                },
            ] {
                let params = SamplingParams {
                    seed: round,
                    ..params
                };
                let mut a = SplitMix64::new(round);
                let mut b = a;
                let got = s.sample(&row, &params, &[], &mut a).unwrap();
                let want = sample_ref::sample(&row, &params, &[], &mut b);
                assert_eq!(got, want, "vocab {n}, round {round}, {params:?}");
            }
        }
    }
}
