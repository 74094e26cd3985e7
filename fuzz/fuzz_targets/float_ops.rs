//! Every `F32` operation against the host's IEEE-754 hardware, bit for bit
//! (a NaN result must be the canonical `0x7FC00000`; hardware NaNs are
//! compared as "is NaN"): add, sub, mul, div, sqrt, comparisons, min/max
//! (IEEE 754-2019 minimumNumber/maximumNumber), f16/bf16 conversions both
//! ways (the `half` crate), integer conversions (Rust's `as`, which
//! saturates and maps NaN to 0, as the profile does) and round-ties-away.
//!
//! Input: arbitrary bytes, read as consecutive 8-byte pairs `(x, y)` of
//! little-endian `u32` bit patterns (a trailing partial pair is ignored).
#![no_main]

use detllm::F32;
use libfuzzer_sys::fuzz_target;

const CANON: u32 = 0x7FC0_0000;

fn same(op: &str, x: u32, y: u32, got: F32, want: f32) {
    if want.is_nan() {
        assert_eq!(got.to_bits(), CANON, "{op}({x:#010x}, {y:#010x}): want NaN");
    } else {
        assert_eq!(got.to_bits(), want.to_bits(), "{op}({x:#010x}, {y:#010x})");
    }
}

fn min_num(x: f32, y: f32) -> f32 {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => f32::NAN,
        (true, false) => y,
        (false, true) => x,
        _ if x < y => x,
        _ if y < x => y,
        _ if x.is_sign_negative() => x,
        _ => y,
    }
}

fn max_num(x: f32, y: f32) -> f32 {
    match (x.is_nan(), y.is_nan()) {
        (true, true) => f32::NAN,
        (true, false) => y,
        (false, true) => x,
        _ if x > y => x,
        _ if y > x => y,
        _ if x.is_sign_positive() => x,
        _ => y,
    }
}

fuzz_target!(|data: &[u8]| {
    for pair in data.chunks_exact(8) {
        let xb = u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]);
        let yb = u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]);
        check_pair(xb, yb);
    }
});

fn check_pair(xb: u32, yb: u32) {
    let (x, y) = (F32::from_bits(xb), F32::from_bits(yb));
    let (hx, hy) = (f32::from_bits(xb), f32::from_bits(yb));

    same("add", xb, yb, x + y, hx + hy);
    same("sub", xb, yb, x - y, hx - hy);
    same("mul", xb, yb, x * y, hx * hy);
    same("div", xb, yb, x / y, hx / hy);
    same("sqrt", xb, 0, x.sqrt(), hx.sqrt());
    same("min", xb, yb, x.min(y), min_num(hx, hy));
    same("max", xb, yb, x.max(y), max_num(hx, hy));
    same("round_ties_away", xb, 0, x.round_ties_away(), hx.round());
    assert_eq!((-x).to_bits(), xb ^ 0x8000_0000, "neg({xb:#010x})");
    assert_eq!(x.abs().to_bits(), xb & 0x7FFF_FFFF, "abs({xb:#010x})");

    assert_eq!(
        x.partial_cmp(y),
        hx.partial_cmp(&hy),
        "partial_cmp({xb:#010x}, {yb:#010x})"
    );
    assert_eq!(
        x.total_cmp(y),
        hx.total_cmp(&hy),
        "total_cmp({xb:#010x}, {yb:#010x})"
    );
    assert_eq!(x.lt(y), hx < hy);
    assert_eq!(x.le(y), hx <= hy);
    assert_eq!(x.gt(y), hx > hy);
    assert_eq!(x.ge(y), hx >= hy);
    assert_eq!(x.ieee_eq(y), hx == hy);

    assert_eq!(x.to_i32_trunc(), hx as i32, "to_i32_trunc({xb:#010x})");
    assert_eq!(
        x.to_i32_round_ties_away(),
        hx.round() as i32,
        "ties_away({xb:#010x})"
    );
    assert_eq!(
        x.to_i32_round_ties_even(),
        hx.round_ties_even() as i32,
        "ties_even({xb:#010x})"
    );
    same(
        "from_i32",
        xb,
        0,
        F32::from_i32(xb as i32),
        xb as i32 as f32,
    );
    same("from_u32", xb, 0, F32::from_u32(xb), xb as f32);
    let wide = (u64::from(xb) << 32 | u64::from(yb)) as i64;
    same("from_i64", xb, yb, F32::from_i64(wide), wide as f32);

    let want16 = if hx.is_nan() {
        0x7E00
    } else {
        half::f16::from_f32(hx).to_bits()
    };
    assert_eq!(x.to_f16_bits(), want16, "to_f16({xb:#010x})");
    let wantb = if hx.is_nan() {
        0x7FC0
    } else {
        half::bf16::from_f32(hx).to_bits()
    };
    assert_eq!(x.to_bf16_bits(), wantb, "to_bf16({xb:#010x})");
    let h = xb as u16;
    same(
        "from_f16",
        u32::from(h),
        0,
        F32::from_f16_bits(h),
        half::f16::from_bits(h).to_f32(),
    );
    same(
        "from_bf16",
        u32::from(h),
        0,
        F32::from_bf16_bits(h),
        half::bf16::from_bits(h).to_f32(),
    );
}
