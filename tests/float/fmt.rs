//! `Display`/`Debug` of `F32` against the standard library's exact float
//! formatting (the oracle): the same nine correctly rounded significant
//! digits, and the text parses back to the same bits.
use detllm::F32;

/// Digits and decimal exponent of `{:.8e}` output, trailing zeros trimmed.
fn std_digits(x: f32) -> (String, i32) {
    let s = format!("{:.8e}", x.abs());
    let (mant, exp) = s.split_once('e').unwrap();
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = digits.trim_end_matches('0').to_string();
    (digits, exp.parse().unwrap())
}

/// Digits and decimal exponent (of the first digit) of our text.
fn our_digits(s: &str) -> (String, i32) {
    let s = s.trim_start_matches('-');
    let (mant, exp) = match s.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap()),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all: String = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all
        .trim_start_matches('0')
        .trim_end_matches('0')
        .to_string();
    (digits, exp + int.len() as i32 - 1 - lead as i32)
}

fn check(bits: u32) {
    let x = F32::from_bits(bits);
    let f = f32::from_bits(bits);
    let s = x.to_string();
    if f.is_nan() {
        assert_eq!(s, "NaN");
        return;
    }
    if f.is_infinite() {
        assert_eq!(s, if f < 0.0 { "-inf" } else { "inf" });
        return;
    }
    let back: f32 = s.parse().unwrap_or_else(|_| panic!("{bits:#x}: {s}"));
    assert_eq!(back.to_bits(), bits, "{bits:#x}: {s} does not round-trip");
    if f != 0.0 {
        assert_eq!(our_digits(&s), std_digits(f), "{bits:#x}: {s}");
        assert!(s.len() <= 20, "{s}");
    }
}

#[test]
fn display_matches_std_digits() {
    let mut state = 0x1234_5678_9ABC_DEF0u64;
    for _ in 0..300_000 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (state >> 32) as u32;
        check(r);
        check(r & 0x807F_FFFF); // subnormals
        check(r & 0x0000_00FF);
    }
    for e in 0..=255u32 {
        for m in [0, 1, 0x40_0000, 0x7F_FFFF, 0x7F_FFFE] {
            check((e << 23) | m);
            check(0x8000_0000 | (e << 23) | m);
        }
    }
}

#[test]
fn display_examples() {
    let cases = [
        (0x0000_0000, "0"),
        (0x8000_0000, "-0"),
        (0x3F80_0000, "1"),
        (0xBFC0_0000, "-1.5"),
        (0x3DCC_CCCD, "0.100000001"),
        (0x4B80_0000, "16777216"),
        (0x7F7F_FFFF, "3.40282347e38"),
        (0x0080_0000, "1.17549435e-38"),
        (0x0000_0001, "1.40129846e-45"),
        (0x38D1_B717, "0.0000999999975"),
        (0x7F80_0000, "inf"),
        (0xFF80_0000, "-inf"),
        (0x7FC0_0000, "NaN"),
    ];
    for (bits, want) in cases {
        assert_eq!(F32::from_bits(bits).to_string(), want, "{bits:#x}");
    }
    assert_eq!(format!("{:>6}", F32::ONE), "     1");
    assert_eq!(format!("{:?}", F32::HALF), "F32(0.5, 0x3f000000)");
}
