//! Algebraic facts about `F32` that hold exactly in IEEE-754 binary32 with
//! round-to-nearest-even, checked as proptest properties over random bits.
use detllm::F32;
use proptest::prelude::*;

const CANON_NAN: u32 = 0x7FC0_0000;

fn any_f32() -> impl Strategy<Value = F32> {
    prop_oneof![
        any::<u32>(),
        // Subnormals and zeros, and values near 1, are over-weighted.
        any::<u32>().prop_map(|b| b & 0x807F_FFFF),
        any::<u32>().prop_map(|b| (b & 0x807F_FFFF) | 0x3F80_0000),
    ]
    .prop_map(F32::from_bits)
}

fn finite_f32() -> impl Strategy<Value = F32> {
    any_f32().prop_filter("finite", |x| x.is_finite())
}

proptest! {
    // A failure is saved to tests/float/props.proptest-regressions and
    // replayed first on every later run (proptest's default persistence).
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn add_commutes(a in any_f32(), b in any_f32()) {
        prop_assert_eq!((a + b).to_bits(), (b + a).to_bits());
    }

    #[test]
    fn mul_commutes(a in any_f32(), b in any_f32()) {
        prop_assert_eq!((a * b).to_bits(), (b * a).to_bits());
    }

    #[test]
    fn sub_self_is_plus_zero(x in finite_f32()) {
        prop_assert_eq!((x - x).to_bits(), 0);
    }

    #[test]
    fn sub_is_add_neg(a in any_f32(), b in any_f32()) {
        prop_assert_eq!((a - b).to_bits(), (a + (-b)).to_bits());
    }

    #[test]
    fn mul_one_is_identity(x in any_f32()) {
        let want = if x.is_nan() { CANON_NAN } else { x.to_bits() };
        prop_assert_eq!((x * F32::ONE).to_bits(), want);
        prop_assert_eq!((x / F32::ONE).to_bits(), want);
    }

    #[test]
    fn nan_results_are_canonical(a in any_f32(), b in any_f32()) {
        for r in [a + b, a - b, a * b, a / b, a.sqrt()] {
            if r.is_nan() {
                prop_assert_eq!(r.to_bits(), CANON_NAN);
            }
        }
    }

    #[test]
    fn sqrt_monotone(a in any_f32(), b in any_f32()) {
        let (a, b) = (a.abs(), b.abs());
        prop_assume!(!a.is_nan() && !b.is_nan());
        let (lo, hi) = if a.le(b) { (a, b) } else { (b, a) };
        prop_assert!(lo.sqrt().le(hi.sqrt()), "{lo:?} {hi:?}");
    }

    #[test]
    fn sqrt_of_square_is_exact(e in 70u32..=180, m in 0u32..(1 << 11)) {
        // A 12-bit significand squares exactly (24 bits), in range: sqrt gives it back.
        let x = F32::from_bits((e << 23) | (m << 12));
        prop_assert_eq!((x * x).sqrt().to_bits(), x.to_bits());
    }

    #[test]
    fn f16_round_trip(h in any::<u16>()) {
        let f = F32::from_f16_bits(h);
        let is_nan = h & 0x7C00 == 0x7C00 && h & 0x3FF != 0;
        let want = if is_nan { detllm::float::F16_NAN } else { h };
        prop_assert_eq!(f.to_f16_bits(), want);
    }

    #[test]
    fn bf16_round_trip(h in any::<u16>()) {
        let f = F32::from_bf16_bits(h);
        let is_nan = h & 0x7F80 == 0x7F80 && h & 0x7F != 0;
        let want = if is_nan { detllm::float::BF16_NAN } else { h };
        prop_assert_eq!(f.to_bf16_bits(), want);
    }

    #[test]
    fn neg_and_abs_are_bit_ops(x in any_f32()) {
        prop_assert_eq!((-x).to_bits(), x.to_bits() ^ 0x8000_0000);
        prop_assert_eq!(x.abs().to_bits(), x.to_bits() & 0x7FFF_FFFF);
    }

    #[test]
    fn min_max_ignore_nan_and_order_zeros(a in any_f32(), b in any_f32()) {
        let (lo, hi) = (a.min(b), a.max(b));
        if a.is_nan() && b.is_nan() {
            prop_assert_eq!(lo.to_bits(), CANON_NAN);
            prop_assert_eq!(hi.to_bits(), CANON_NAN);
        } else if a.is_nan() || b.is_nan() {
            let v = if a.is_nan() { b } else { a };
            prop_assert_eq!(lo, v);
            prop_assert_eq!(hi, v);
        } else {
            prop_assert!(lo.total_cmp(hi).is_le());
            prop_assert!(lo == a || lo == b);
            prop_assert!(hi == a || hi == b);
        }
    }

    #[test]
    fn total_cmp_matches_partial_cmp(a in any_f32(), b in any_f32()) {
        if let Some(o) = a.partial_cmp(b) {
            if !(a.is_zero() && b.is_zero()) {
                prop_assert_eq!(o, a.total_cmp(b));
            }
        } else {
            prop_assert!(a.is_nan() || b.is_nan());
        }
    }
}

/// `sig · 2^exp` rounded to binary32 by the hardware: exact in f64 when
/// `|sig| < 2^53` (one rounding, subnormals included); otherwise `sig` is
/// first rounded to 24 bits (RNE) by hand, which is the whole rounding when
/// the result is normal.
fn scaled_ref(sig: i128, exp: i32) -> Option<u32> {
    let mag = sig.unsigned_abs();
    let (q, e) = if mag < 1 << 53 {
        (mag, exp)
    } else {
        let s = 128 - mag.leading_zeros() - 24;
        let (q, rem, half) = (mag >> s, mag & ((1u128 << s) - 1), 1u128 << (s - 1));
        let up = rem > half || (rem == half && q & 1 == 1);
        let r = (q + up as u128, exp + s as i32);
        // Normal results only: 2^23 ≤ q·2^e/2^… must be ≥ 2^-126.
        if r.1 + 23 < -126 {
            return None;
        }
        r
    };
    let v = q as f64 * 2f64.powi(e);
    let v = if sig < 0 { -v } else { v };
    Some((v as f32).to_bits())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20000))]
    /// `from_i128_scaled` (64-bit fast path and 128-bit path) equals the
    /// hardware rounding, from subnormal results to overflow.
    #[test]
    fn from_i128_scaled_matches_hardware(bits in 1u32..=127, raw in any::<u128>(), neg in any::<bool>(),
                                         exp in -300i32..200) {
        let mag = (raw >> (128 - bits)) | (1u128 << (bits - 1));
        let sig = if neg { -(mag as i128) } else { mag as i128 };
        if let Some(want) = scaled_ref(sig, exp) {
            prop_assert_eq!(F32::from_i128_scaled(sig, exp).to_bits(), want, "{} · 2^{}", sig, exp);
        }
    }
}
