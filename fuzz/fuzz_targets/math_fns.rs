//! Fuzz target for the elementary functions: no input panics, NaN results
//! are canonical, `sin_cos` equals `(sin, cos)`, `silu` is its formula, and
//! the results respect their ranges. (Correct rounding itself is checked
//! exhaustively against CORE-MATH by `tests/math_*.rs`.)
#![no_main]

use detllm::F32;
use libfuzzer_sys::fuzz_target;

fn canonical(v: F32) -> bool {
    !v.is_nan() || v.to_bits() == 0x7FC0_0000
}

fuzz_target!(|data: [u8; 8]| {
    let x = F32::from_bits(u32::from_le_bytes([data[0], data[1], data[2], data[3]]));
    let y = F32::from_bits(u32::from_le_bytes([data[4], data[5], data[6], data[7]]));
    let e = x.exp();
    let e2 = x.exp2();
    let l = x.ln();
    let (s, c) = x.sin_cos();
    let p = x.powf(y);
    for v in [e, e2, l, s, c, p] {
        assert!(canonical(v));
    }
    assert_eq!(s.to_bits(), x.sin().to_bits());
    assert_eq!(c.to_bits(), x.cos().to_bits());
    if !x.is_nan() {
        assert!(!e.is_sign_negative() && !e2.is_sign_negative());
        assert!(s.abs().le(F32::ONE) || s.is_nan());
        assert!(c.abs().le(F32::ONE) || c.is_nan());
    }
    let silu = detllm::math::silu(x);
    assert_eq!(silu.to_bits(), (x / (F32::ONE + (-x).exp())).to_bits());
});
