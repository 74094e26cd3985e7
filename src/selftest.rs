//! The determinism suite: SHA-256 digests of fixed computations, the same
//! functions on every target.
//!
//! Every [`Case`] in [`CASES`] runs a fixed computation and returns the
//! SHA-256 of its results. The host test (`tests/determinism.rs`), the
//! cross-target script (`scripts/cross-test.sh`: s390x, aarch64, i686,
//! wasm32, and the bare-metal Cortex-M4 and RISC-V examples under
//! `embedded/`) all call these same functions and compare the digests with
//! the committed goldens in `tests/golden/<group>.txt`, where `<group>` is
//! the part of the case name before the first `.`. One differing bit on one
//! target fails CI.
//!
//! Nothing here allocates: sweeps hash each result as it is produced, and a
//! case that needs buffers carves them from the caller's `scratch` (at least
//! [`SCRATCH_BYTES`]) through a fresh [`Arena`](crate::Arena), so cases do
//! not depend on each other or on their order.
//!
//! ## Inputs
//! Pseudo-random inputs come from the profile's [`SplitMix64`] seeded with
//! [`SEED`] (one fresh generator per case), so anyone can regenerate them:
//!
//! * unary `F32` sweeps ([`UnarySweep`]): the [`SPECIALS`] in order, then
//!   [`draw`] until [`SWEEP_LEN`] inputs;
//! * binary sweeps ([`BinarySweep`]): every (special, special) pair in
//!   row-major order, then pairs `(x, y)` with `x = draw()` and, one time in
//!   four, `y` a near neighbour of `±x` (cancellation in add/sub), otherwise
//!   `y = draw()`, until [`SWEEP_LEN`] pairs;
//! * integer sweeps ([`I32Sweep`]): [`I32_SPECIALS`], then random integers of
//!   random bit length;
//! * binary16 and bfloat16 sources: all 65536 bit patterns.
//!
//! ## Digest
//! SHA-256 over the concatenated little-endian encodings of the results, in
//! sweep order: 4 bytes per `F32` or `i32`, 2 per f16/bf16, nothing else (no
//! inputs, no names), so an independent implementation that produces the
//! same result bits (hardware IEEE arithmetic, CORE-MATH) reproduces the
//! digest; `tests/determinism.rs` checks exactly that on x86-64 hosts.
//!
//! ## Adding a case
//! Write `fn my_case(scratch: &mut [u8]) -> Result<Digest>`, add one line
//! `Case { name: "group.my_case", run: my_case }` to [`CASES`], raise
//! [`SCRATCH_BYTES`] if it needs more scratch, and run
//! `scripts/regen-goldens.sh`.

use crate::sample::SplitMix64;
use crate::{F32, Result};
use core::cmp::Ordering;
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// Seed of every case's input generator (`"detllmv1"` in ASCII).
pub const SEED: u64 = 0x6465_746C_6C6D_7631;

/// Inputs per `F32` sweep (specials included): 2^14, small enough for a
/// Cortex-M4 emulator to run every sweep in seconds.
pub const SWEEP_LEN: usize = 1 << 14;

/// Bytes of scratch memory the caller must pass to [`Case::run`] / [`all`]
/// (the largest need of any case in [`CASES`]).
pub const SCRATCH_BYTES: usize = crate::model::selftest::MODEL_SCRATCH_BYTES;

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

/// One case of the suite.
#[derive(Clone, Copy)]
pub struct Case {
    /// `group.name`; the group names the golden file `tests/golden/<group>.txt`.
    pub name: &'static str,
    /// Runs the case with at least [`SCRATCH_BYTES`] of scratch memory.
    pub run: fn(scratch: &mut [u8]) -> Result<Digest>,
}

impl Case {
    /// The golden-file group: the name up to the first `.`.
    pub fn group(&self) -> &'static str {
        match self.name.split_once('.') {
            Some((g, _)) => g,
            None => self.name,
        }
    }
}

/// Every case, in report order. New cases are one line each.
///
/// Groups: `f32` (the soft operations), `conv` (conversions), `math`
/// (elementary functions), `kernel` (every weight block format decoded and
/// multiplied; the f32 kernels: [`crate::kernels::selftest`]) and `model`
/// (synthetic-model schedules and seeded sampled generation).
pub const CASES: &[Case] = &[
    Case {
        name: "f32.add",
        run: f32_add,
    },
    Case {
        name: "f32.sub",
        run: f32_sub,
    },
    Case {
        name: "f32.mul",
        run: f32_mul,
    },
    Case {
        name: "f32.div",
        run: f32_div,
    },
    Case {
        name: "f32.sqrt",
        run: f32_sqrt,
    },
    Case {
        name: "f32.min_max",
        run: f32_min_max,
    },
    Case {
        name: "f32.cmp",
        run: f32_cmp,
    },
    Case {
        name: "conv.f16_to_f32",
        run: conv_f16_to_f32,
    },
    Case {
        name: "conv.f32_to_f16",
        run: conv_f32_to_f16,
    },
    Case {
        name: "conv.bf16_to_f32",
        run: conv_bf16_to_f32,
    },
    Case {
        name: "conv.f32_to_bf16",
        run: conv_f32_to_bf16,
    },
    Case {
        name: "conv.i32_to_f32",
        run: conv_i32_to_f32,
    },
    Case {
        name: "conv.f32_to_i32_trunc",
        run: conv_to_i32_trunc,
    },
    Case {
        name: "conv.f32_to_i32_ties_away",
        run: conv_to_i32_ties_away,
    },
    Case {
        name: "conv.f32_to_i32_ties_even",
        run: conv_to_i32_ties_even,
    },
    Case {
        name: "conv.round_ties_away",
        run: conv_round_ties_away,
    },
    Case {
        name: "math.exp",
        run: math_exp,
    },
    Case {
        name: "math.exp2",
        run: math_exp2,
    },
    Case {
        name: "math.ln",
        run: math_ln,
    },
    Case {
        name: "math.sin",
        run: math_sin,
    },
    Case {
        name: "math.cos",
        run: math_cos,
    },
    Case {
        name: "math.sin_cos",
        run: math_sin_cos,
    },
    Case {
        name: "math.powf",
        run: math_powf,
    },
    Case {
        name: "math.silu",
        run: math_silu,
    },
    Case {
        name: "kernel.matmul",
        run: crate::kernels::selftest::case_matmul,
    },
    Case {
        name: "kernel.ops",
        run: crate::kernels::selftest::case_ops,
    },
    Case {
        name: "model.schedules",
        run: crate::model::selftest::schedules,
    },
    Case {
        name: "model.sampled",
        run: crate::model::selftest::sampled,
    },
];

/// Runs every case in [`CASES`] order with the caller's scratch memory,
/// yielding `(case, digest or error)`. Allocates nothing.
pub fn all<'s>(
    scratch: &'s mut [u8],
) -> impl Iterator<Item = (&'static Case, Result<Digest>)> + 's {
    CASES.iter().map(move |c| (c, (c.run)(scratch)))
}

/// The case named `name`, if any.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// Lower-case hex of a digest, for printing without `alloc`.
pub fn hex(d: &Digest) -> [u8; 64] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (pair, &b) in out.chunks_exact_mut(2).zip(d.iter()) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// A digest displayed as lower-case hex.
pub struct Hex<'d>(pub &'d Digest);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- helpers

fn finish(h: Sha256) -> Result<Digest> {
    Ok(h.finalize().into())
}

fn unary_f32(op: fn(F32) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_bits().to_le_bytes());
    }
    finish(h)
}

fn binary_f32(op: fn(F32, F32) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update(op(x, y).to_bits().to_le_bytes());
    }
    finish(h)
}

fn unary_i32(op: fn(F32) -> i32) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_le_bytes());
    }
    finish(h)
}

fn unary_u16(op: fn(F32) -> u16) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_le_bytes());
    }
    finish(h)
}

fn all_u16(op: fn(u16) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for v in 0..=u16::MAX {
        h.update(op(v).to_bits().to_le_bytes());
    }
    finish(h)
}

/// `Ordering` (or unordered) as one byte: 0 less, 1 equal, 2 greater, 3 unordered.
pub fn ordering_byte(o: Option<Ordering>) -> u8 {
    match o {
        Some(Ordering::Less) => 0,
        Some(Ordering::Equal) => 1,
        Some(Ordering::Greater) => 2,
        None => 3,
    }
}

// ------------------------------------------------------------ group f32

fn f32_add(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x + y)
}

fn f32_sub(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x - y)
}

fn f32_mul(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x * y)
}

fn f32_div(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x / y)
}

fn f32_sqrt(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::sqrt)
}

/// Per pair: `min(x, y)` then `max(x, y)`.
fn f32_min_max(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update(x.min(y).to_bits().to_le_bytes());
        h.update(x.max(y).to_bits().to_le_bytes());
    }
    finish(h)
}

/// Per pair: [`ordering_byte`] of `partial_cmp`, then of `total_cmp`.
fn f32_cmp(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update([
            ordering_byte(x.partial_cmp(y)),
            ordering_byte(Some(x.total_cmp(y))),
        ]);
    }
    finish(h)
}

// ----------------------------------------------------------- group conv

fn conv_f16_to_f32(_: &mut [u8]) -> Result<Digest> {
    all_u16(F32::from_f16_bits)
}

fn conv_f32_to_f16(_: &mut [u8]) -> Result<Digest> {
    unary_u16(F32::to_f16_bits)
}

fn conv_bf16_to_f32(_: &mut [u8]) -> Result<Digest> {
    all_u16(F32::from_bf16_bits)
}

fn conv_f32_to_bf16(_: &mut [u8]) -> Result<Digest> {
    unary_u16(F32::to_bf16_bits)
}

fn conv_i32_to_f32(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for v in I32Sweep::new() {
        h.update(F32::from_i32(v).to_bits().to_le_bytes());
    }
    finish(h)
}

fn conv_to_i32_trunc(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_trunc)
}

fn conv_to_i32_ties_away(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_round_ties_away)
}

fn conv_to_i32_ties_even(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_round_ties_even)
}

fn conv_round_ties_away(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::round_ties_away)
}

// ----------------------------------------------------------- group math

fn math_exp(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::exp)
}

fn math_exp2(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::exp2)
}

fn math_ln(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::ln)
}

fn math_sin(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::sin)
}

fn math_cos(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::cos)
}

/// Per input: `sin` then `cos` from the shared reduction.
fn math_sin_cos(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        let (s, c) = x.sin_cos();
        h.update(s.to_bits().to_le_bytes());
        h.update(c.to_bits().to_le_bytes());
    }
    finish(h)
}

fn math_powf(_: &mut [u8]) -> Result<Digest> {
    binary_f32(F32::powf)
}

fn math_silu(_: &mut [u8]) -> Result<Digest> {
    unary_f32(crate::math::silu)
}
