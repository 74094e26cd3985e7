//! Inputs of the determinism suite: the seed, the special values, [`draw`]
//! and the sweeps every case hashes (see [`crate::selftest`] for the
//! contract). Depends on nothing else in `selftest`.

#![forbid(unsafe_code)]

use crate::F32;
use crate::sample::SplitMix64;

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// Seed of every case's input generator (`"detllmv1"` in ASCII).
pub const SEED: u64 = 0x6465_746C_6C6D_7631;

/// Inputs per `F32` sweep (specials included): 2^14, small enough for a
/// Cortex-M4 emulator to run every sweep in seconds.
pub const SWEEP_LEN: usize = 1 << 14;

/// Special binary32 inputs every sweep starts with.
pub const SPECIALS: [u32; 32] = [
    0x0000_0000, // +0
    0x8000_0000, // -0
    0x3F80_0000, // 1
    0xBF80_0000, // -1
    0x7F80_0000, // +inf
    0xFF80_0000, // -inf
    0x7FC0_0000, // canonical quiet NaN
    0xFFC0_0001, // negative quiet NaN with payload
    0x7F80_0001, // signalling NaN
    0x7FBF_FFFF, // signalling NaN, full payload
    0x0000_0001, // smallest subnormal
    0x807F_FFFF, // -largest subnormal
    0x007F_FFFF, // largest subnormal
    0x0080_0000, // smallest normal
    0x7F7F_FFFF, // largest finite
    0xFF7F_FFFF, // most negative finite
    0x3F00_0000, // 0.5
    0x4000_0000, // 2
    0x3FFF_FFFF, // just below 2
    0x3F7F_FFFF, // just below 1
    0x3F80_0001, // just above 1
    0x40490FDB,  // pi
    0x42B1_7218, // ~88.72: exp overflow threshold
    0xC2CF_F1B5, // ~-103.97: exp underflow threshold
    0x4B00_0000, // 2^23: integers start
    0x4EFF_FFFF, // largest float below 2^31
    0xCF00_0000, // -2^31
    0x4F00_0000, // 2^31
    0x3EFF_FFFF, // just below 0.5
    0x3FC0_0000, // 1.5 (a rounding tie after integer conversion)
    0xC020_0000, // -2.5 (a tie, even and away differ)
    0x3400_0000, // machine epsilon
];

/// Special `i32` inputs of the integer sweep.
pub const I32_SPECIALS: [i32; 12] = [
    0,
    1,
    -1,
    i32::MAX,
    i32::MIN,
    i32::MIN + 1,
    (1 << 24) + 1, // first integer binary32 cannot hold
    (1 << 24) + 3, // rounds up (tie to even)
    -(1 << 24) - 1,
    0x7FFF_FFC0, // ties between two binary32 values near 2^31
    0x7FFF_FF80,
    16_777_217 * 2 + 2,
];

/// One pseudo-random binary32 bit pattern, from one `next_u64`.
///
/// With `r` the 64 random bits, `bits = r mod 2^32`, `pick = r >> 32`, the
/// top two bits of `r` choose the kind:
/// * `0`: `bits` itself (every pattern: NaNs, subnormals, huge values);
/// * `1`: sign and significand from `bits`, biased exponent
///   `96 + pick mod 64` (`|x|` in `[2^-31, 2^33)`);
/// * `2`: the same with exponent `119 + pick mod 16` (`|x|` in `[2^-8, 2^8)`);
/// * `3`: a neighbour of a special: `SPECIALS[pick mod 32]` plus
///   `(pick >> 8) mod 8 - 3` (wrapping, in bit-pattern units).
pub fn draw(rng: &mut SplitMix64) -> u32 {
    let r = rng.next_u64();
    let bits = r as u32;
    let pick = (r >> 32) as u32;
    const SIGN_SIG: u32 = 0x807F_FFFF;
    match r >> 62 {
        0 => bits,
        1 => (bits & SIGN_SIG) | ((96 + pick % 64) << 23),
        2 => (bits & SIGN_SIG) | ((119 + pick % 16) << 23),
        _ => {
            let base = SPECIALS[(pick % 32) as usize];
            base.wrapping_add((pick >> 8) % 8).wrapping_sub(3)
        }
    }
}

/// The unary sweep: [`SPECIALS`], then [`draw`]s; [`SWEEP_LEN`] inputs.
pub struct UnarySweep {
    rng: SplitMix64,
    i: usize,
}

impl UnarySweep {
    /// The sweep from its first input.
    pub const fn new() -> Self {
        UnarySweep {
            rng: SplitMix64::new(SEED),
            i: 0,
        }
    }
}

impl Default for UnarySweep {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for UnarySweep {
    type Item = F32;
    fn next(&mut self) -> Option<F32> {
        if self.i >= SWEEP_LEN {
            return None;
        }
        let bits = match SPECIALS.get(self.i) {
            Some(&s) => s,
            None => draw(&mut self.rng),
        };
        self.i += 1;
        Some(F32::from_bits(bits))
    }
}

/// The binary sweep: all special pairs, then random pairs (see the module
/// docs); [`SWEEP_LEN`] pairs.
pub struct BinarySweep {
    rng: SplitMix64,
    i: usize,
}

impl BinarySweep {
    /// The sweep from its first pair.
    pub const fn new() -> Self {
        BinarySweep {
            rng: SplitMix64::new(SEED),
            i: 0,
        }
    }
}

impl Default for BinarySweep {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for BinarySweep {
    type Item = (F32, F32);
    fn next(&mut self) -> Option<(F32, F32)> {
        const N: usize = SPECIALS.len();
        if self.i >= SWEEP_LEN {
            return None;
        }
        let pair = match (SPECIALS.get(self.i / N), SPECIALS.get(self.i % N)) {
            (Some(&x), Some(&y)) => (x, y),
            _ => {
                let x = draw(&mut self.rng);
                let r = self.rng.next_u64();
                let y = if r & 3 == 0 {
                    // Same sign-flipped-or-not exponent, random low 20 bits.
                    let sign = ((r >> 2) as u32) & 0x8000_0000;
                    ((x & 0xFFF0_0000) ^ sign) | ((r >> 8) as u32 & 0x000F_FFFF)
                } else {
                    draw(&mut self.rng)
                };
                (x, y)
            }
        };
        self.i += 1;
        Some((F32::from_bits(pair.0), F32::from_bits(pair.1)))
    }
}

/// The `i32` sweep: [`I32_SPECIALS`], then `(r as i32) >> (r >> 59)`
/// (random values of random magnitude); [`SWEEP_LEN`] values.
pub struct I32Sweep {
    rng: SplitMix64,
    i: usize,
}

impl I32Sweep {
    /// The sweep from its first value.
    pub const fn new() -> Self {
        I32Sweep {
            rng: SplitMix64::new(SEED),
            i: 0,
        }
    }
}

impl Default for I32Sweep {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for I32Sweep {
    type Item = i32;
    fn next(&mut self) -> Option<i32> {
        if self.i >= SWEEP_LEN {
            return None;
        }
        let v = match I32_SPECIALS.get(self.i) {
            Some(&s) => s,
            None => {
                let r = self.rng.next_u64();
                (r as u32 as i32) >> (r >> 59)
            }
        };
        self.i += 1;
        Some(v)
    }
}
