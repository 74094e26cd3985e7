//! Sampler behaviour: greedy ties, reproducibility, the effect of each filter.
use detllm::sample::{Sampler, SamplingParams, SplitMix64, argmax};
use detllm::{Arena, F32};

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

#[test]
fn frequencies_follow_the_softmax() {
    // logits 0 and ln(3) (rounded): token 1 should be drawn ~75% of the time.
    let mut buf = vec![0u8; 4096];
    let mut arena = Arena::new(&mut buf);
    let mut s = Sampler::new(&mut arena, 2).unwrap();
    let ln3 = F32::from_bits(0x3F8C_9F54); // 1.0986123
    let logits = [F32::ZERO, ln3];
    let p = SamplingParams {
        temperature: F32::ONE,
        ..SamplingParams::GREEDY
    };
    let mut rng = SplitMix64::new(42);
    let n = 20000;
    let ones = (0..n)
        .filter(|_| s.sample(&logits, &p, &[], &mut rng).unwrap() == 1)
        .count();
    assert!((14_500..15_500).contains(&ones), "{ones}");
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
