//! Final rounding shared by every operation that produces a binary32.

use super::F32;

/// Rounds `(-1)^neg · sig · 2^exp` to the nearest binary32, ties to even.
///
/// Handles every range: zero, subnormal, normal and overflow to ±∞. A caller
/// with bits below `sig` that it dropped should append a sticky bit first
/// (`(sig << 1) | sticky`, `exp - 1`); a sticky bit below the rounding
/// position changes only the tie decision, which it must.
#[inline]
pub fn round_pack(neg: bool, sig: u128, exp: i32) -> F32 {
    let sign = if neg { 0x8000_0000u32 } else { 0 };
    if sig == 0 {
        return F32(sign);
    }
    // Bit length of sig; the value's leading bit sits at 2^(n - 1 + exp).
    let n = 128 - sig.leading_zeros() as i32;
    // Keep 24 bits for a normal result; never go below the quantum 2^-149.
    let shift = if (n - 24) > (-149 - exp) {
        n - 24
    } else {
        -149 - exp
    };
    let (q, lsb_exp) = if shift <= 0 {
        // Exact: fewer bits than the result holds. lsb_exp >= -149 here.
        (sig << (-shift) as u32, exp.saturating_add(shift))
    } else if shift > n {
        // Below half the smallest quantum: rounds to zero.
        return F32(sign);
    } else {
        let s = shift as u32;
        let (q, rem) = if s == 128 {
            (0u128, sig)
        } else {
            (sig >> s, sig & ((1u128 << s) - 1))
        };
        let half = 1u128 << (s - 1);
        let up = rem > half || (rem == half && q & 1 == 1);
        (q + up as u128, exp.saturating_add(shift))
    };
    // Overflow before encoding (q < 2^25 when lsb_exp is in range).
    if lsb_exp > 104 {
        return F32(sign | 0x7F80_0000);
    }
    // q in [2^23, 2^24] for normals, [0, 2^23] for subnormals; adding q to
    // (biased_exp - 1) << 23 lets a rounding carry bump the exponent.
    let bits = (((lsb_exp + 149) as u32) << 23).wrapping_add(q as u32);
    if bits >= 0x7F80_0000 {
        F32(sign | 0x7F80_0000)
    } else {
        F32(sign | bits)
    }
}
