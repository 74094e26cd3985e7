//! Regressions and magnitude sweeps for every `F32` → integer conversion and
//! round-to-integral function, checked bit for bit against the host's
//! hardware / `core` implementation (`f32::round`, `f32::round_ties_even`,
//! Rust's saturating `as i32`, which maps NaN to 0 as this profile does).
//!
//! The sweep is exhaustive over sign × all 256 biased exponents (zeros,
//! subnormals, every normal binade, ±∞, NaN) × a set of significand patterns
//! (edges, halves, walking bits, walking trailing ones, fixed-seed random
//! ones), so a shift that overflows or is capped in one binade cannot hide.
//!
//! Issue #2: `round_ties_away` returned wrong values for |x| >= 2^124 — the
//! integer split capped its left shift at 100, so the integral part of a
//! huge value came back as `sig << 100` instead of `sig << exp` and was
//! repacked to a value 2^(exp-100) times too small.
//!
//! `cargo test --release --test float regressions::`
use detllm::F32;
use proptest::prelude::*;

const CANON_NAN: u32 = 0x7FC0_0000;

/// Significand patterns (23-bit fields) crossing every rounding boundary.
fn sig_patterns() -> Vec<u32> {
    let mut v = vec![
        0, 1, 2, 3, 0x7F_FFFF, 0x7F_FFFE, 0x40_0000, 0x40_0001, 0x3F_FFFF, 0x20_0000, 0x60_0000,
        0x60_0001, 0x5F_FFFF, 0x55_5555, 0x2A_AAAA, 0x10_0000, 0x70_0000,
    ];
    for i in 0..23 {
        v.push(1 << i); // walking bit: a half / quarter / ... at some exponent
        v.push((1 << i) - 1); // walking trailing ones: just below it
        v.push(0x7F_FFFF ^ (1 << i));
        v.push((1 << i) | 1);
    }
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..64 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.push((s >> 20) as u32 & 0x7F_FFFF);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// Every pattern: sign × biased exponent 0..=255 × significand patterns.
fn sweep_bits() -> Vec<u32> {
    let sigs = sig_patterns();
    let mut out = Vec::new();
    for sign in [0u32, 0x8000_0000] {
        for e in 0u32..=255 {
            for &m in &sigs {
                out.push(sign | (e << 23) | m);
            }
        }
    }
    out
}

/// All mismatches of one input, empty when ours agrees with the host.
fn check(bits: u32) -> Vec<String> {
    let x = F32::from_bits(bits);
    let f = std::hint::black_box(f32::from_bits(bits));
    let mut bad = Vec::new();

    let r = x.round_ties_away().to_bits();
    let want = if f.is_nan() {
        CANON_NAN
    } else {
        f.round().to_bits()
    };
    if r != want {
        bad.push(format!(
            "round_ties_away({bits:#010x}) = {r:#010x}, host {want:#010x}"
        ));
    }
    for (name, ours, host) in [
        ("to_i32_trunc", x.to_i32_trunc(), f as i32),
        (
            "to_i32_round_ties_away",
            x.to_i32_round_ties_away(),
            f.round() as i32,
        ),
        (
            "to_i32_round_ties_even",
            x.to_i32_round_ties_even(),
            f.round_ties_even() as i32,
        ),
    ] {
        if ours != host {
            bad.push(format!("{name}({bits:#010x}) = {ours}, host {host}"));
        }
    }
    bad
}

fn assert_all(bits: impl IntoIterator<Item = u32>) {
    let mut bad = Vec::new();
    let mut n = 0u64;
    for b in bits {
        n += 1;
        bad.extend(check(b));
    }
    assert!(n > 0);
    assert!(
        bad.is_empty(),
        "{} mismatches in {n} inputs, first: {:#?}",
        bad.len(),
        &bad[..bad.len().min(20)]
    );
}

/// Issue #2 regression: `round_ties_away` for |x| >= 2^124 (biased exponent
/// >= 251) must return the value unchanged, like C `roundf`.
#[test]
fn regression_round_ties_away_huge_magnitudes_2pow124_and_up() {
    let cases = [
        0x7D80_0000u32, // 2^124
        0x7D80_0001,
        0x7DFF_FFFF,
        0x7E00_0000, // 2^125
        0x7E80_0000, // 2^126
        0x7F00_0000, // 2^127
        0x7F7F_FFFF, // MAX
        0x7D7F_FFFF, // just below 2^124 (already integral, was right)
    ];
    for c in cases {
        for b in [c, c | 0x8000_0000] {
            assert_eq!(
                F32::from_bits(b).round_ties_away().to_bits(),
                b,
                "round_ties_away({b:#010x})"
            );
            assert_eq!(
                F32::from_bits(b).round_ties_away().to_bits(),
                f32::from_bits(b).round().to_bits()
            );
        }
    }
    assert_all(cases.iter().flat_map(|&c| [c, c | 0x8000_0000]));
}

/// Saturation, NaN, ±∞ and the i32 edges of every conversion.
#[test]
fn int_conversion_edges() {
    let edges = [
        0x0000_0000u32, // +0
        0x8000_0000,    // -0
        0x0000_0001,    // smallest subnormal
        0x007F_FFFF,    // largest subnormal
        0x3EFF_FFFF,    // just below 0.5
        0x3F00_0000,    // 0.5
        0x3F00_0001,
        0x3FC0_0000, // 1.5
        0x4020_0000, // 2.5
        0x4B00_0000, // 2^23
        0x4AFF_FFFF, // 2^23 - 0.5
        0x4B7F_FFFF, // 2^24 - 1
        0x4EFF_FFFF, // 2^31 - 128 (largest f32 below 2^31)
        0x4F00_0000, // 2^31: saturates / -2^31 exact for negatives
        0x4F00_0001,
        0x5F00_0000, // 2^63
        0x7D80_0000, // 2^124
        0x7F7F_FFFF, // MAX
        0x7F80_0000, // +inf
        0x7F80_0001, // signalling NaN
        0x7FC0_0000, // quiet NaN
        0x7FFF_FFFF,
    ];
    assert_all(edges.iter().flat_map(|&e| [e, e | 0x8000_0000]));
    assert_eq!(F32::from_bits(0xCF00_0000).to_i32_trunc(), i32::MIN);
    assert_eq!(
        F32::from_bits(0x4F00_0000).to_i32_round_ties_away(),
        i32::MAX
    );
    assert_eq!(F32::INFINITY.to_i32_round_ties_even(), i32::MAX);
    assert_eq!(F32::NEG_INFINITY.to_i32_round_ties_away(), i32::MIN);
    assert_eq!(F32::NAN.to_i32_round_ties_away(), 0);
    assert_eq!(
        F32::from_bits(0xFFC0_0001).round_ties_away().to_bits(),
        CANON_NAN
    );
    assert_eq!(F32::NEG_INFINITY.round_ties_away(), F32::NEG_INFINITY);
    // Subnormals and |x| < 0.5 round to a zero of the same sign.
    assert_eq!(
        F32::from_bits(0x8000_0001).round_ties_away().to_bits(),
        0x8000_0000
    );
    assert_eq!(F32::from_bits(0x3EFF_FFFF).round_ties_away().to_bits(), 0);
}

/// The exhaustive sweep over every exponent of both signs.
#[test]
fn every_exponent_every_sign_significand_patterns() {
    let bits = sweep_bits();
    assert!(bits.len() >= 2 * 256 * 100, "{}", bits.len());
    assert_all(bits);
}

/// Whole binades exhaustively around the integer boundaries (2^-1 .. 2^32)
/// and the top binades (2^120 .. 2^128), both signs: 2 × 42 × 2^23 inputs.
#[test]
fn whole_binades_near_boundaries_and_at_the_top() {
    let mut bad = Vec::new();
    for sign in [0u32, 0x8000_0000] {
        for e in (125u32..=158).chain(247..=254) {
            for m in 0..=0x7F_FFFFu32 {
                let b = sign | (e << 23) | m;
                let v = check(b);
                if !v.is_empty() && bad.len() < 20 {
                    bad.extend(v);
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

proptest! {
    // A failure is saved to tests/float/regressions.proptest-regressions
    // and replayed first on every later run (proptest's default persistence).
    #![proptest_config(ProptestConfig::with_cases(200_000))]

    /// Random bits, with huge magnitudes and values near integers and
    /// halves over-weighted.
    #[test]
    fn conversions_match_host(bits in prop_oneof![
        any::<u32>(),
        any::<u32>().prop_map(|b| (b & 0x81FF_FFFF) | 0x7C00_0000), // |x| >= 2^121
        any::<u32>().prop_map(|b| (b & 0x87FF_FFFF) | 0x3800_0000), // 2^-15 .. 2^49
        any::<u32>().prop_map(|b| b & 0x807F_FFFF), // subnormals
    ]) {
        let bad = check(bits);
        prop_assert!(bad.is_empty(), "{:?}", bad);
    }
}
