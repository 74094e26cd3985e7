//! `F32` against two independent oracles, bit for bit.
//!
//! * Berkeley SoftFloat 3e (`softfloat-wrapper`, RISC-V specialisation: every
//!   NaN result is the canonical `0x7FC00000`, so results compare as bits,
//!   NaNs included);
//! * the host's IEEE hardware (SSE on x86_64; F16C through `half` for f16),
//!   where a NaN result only has to be a NaN (hardware keeps payloads).
//!
//! bf16 has no SoftFloat or exact hardware conversion here; its oracles are
//! `half`'s software conversion and a naive nearest-candidate search written
//! below (distances compared exactly in f64).
//!
//! Operand generation follows Berkeley TestFloat's level-2 scheme: a fixed
//! set of operands (sign × exponent class × significand pattern) used as a
//! full cross product, plus weighted random pairs. The default run checks
//! more than 7 million pairs per operation; the `#[ignore]`d tests are the
//! extended runs (100 million random pairs per op, all 2^32 inputs for the
//! unary operations), run with
//!
//! ```text
//! cargo test --release --features std,oracle --test float -- --ignored oracle::
//! ```
//!
//! Their results are recorded in `docs/sections/float.md`.
#![cfg(feature = "oracle")]

use detllm::F32;
use softfloat_wrapper::{F16 as SF16, F32 as SF32, F64 as SF64, Float, RoundingMode};
use std::hint::black_box;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

const RNE: RoundingMode = RoundingMode::TiesToEven;
const CANON_NAN: u32 = 0x7FC0_0000;

fn is_nan_bits(b: u32) -> bool {
    b & 0x7FFF_FFFF > 0x7F80_0000
}

// ---------------------------------------------------------------- generator

/// Biased exponents of the level-2 operand set: both ends of the range, the
/// subnormal boundary, values around 1 and around the overflow threshold.
const EXPONENTS: [u32; 23] = [
    0x00, 0x01, 0x02, 0x03, 0x0B, 0x16, 0x17, 0x18, 0x19, 0x3E, 0x66, 0x67, 0x7D, 0x7E, 0x7F, 0x80,
    0x81, 0x97, 0xBF, 0xE6, 0xFD, 0xFE, 0xFF,
];

/// Significand patterns: zero, every single bit, runs of leading ones, runs
/// of trailing ones, all ones minus one (duplicates removed).
fn sig_patterns() -> Vec<u32> {
    let mut v = vec![0u32, 0x7F_FFFE];
    for i in 0..23 {
        v.push(1 << i); // single bit
        v.push((0x7F_FFFF << i) & 0x7F_FFFF); // leading ones, 23 - i of them
        v.push(0x7F_FFFF >> i); // trailing ones
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The fixed operand set: sign × exponent × significand pattern.
fn level2_operands() -> Vec<u32> {
    let sigs = sig_patterns();
    let mut v = Vec::new();
    for sign in [0u32, 0x8000_0000] {
        for &e in &EXPONENTS {
            for &m in &sigs {
                v.push(sign | (e << 23) | m);
            }
        }
    }
    v
}

/// A small PCG-style generator (deterministic, seedable).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        (((x >> 22) ^ x) >> ((x >> 61) + 22)) as u32 ^ (x >> 32) as u32
    }
    fn below(&mut self, n: u32) -> u32 {
        ((self.next() as u64 * n as u64) >> 32) as u32
    }
    /// A significand: a pattern (shifted or complemented) or random bits.
    fn sig(&mut self) -> u32 {
        let k = self.below(23);
        match self.below(6) {
            0 => 1 << k,
            1 => (0x7F_FFFF << k) & 0x7F_FFFF,
            2 => 0x7F_FFFF >> k,
            3 => 0x7F_FFFF ^ (1 << k),
            _ => self.next() & 0x7F_FFFF,
        }
    }
    /// One weighted random operand.
    fn float(&mut self) -> u32 {
        let sign = self.next() & 0x8000_0000;
        match self.below(16) {
            0 => sign | (self.sig() >> self.below(24)), // subnormal or zero
            1 => {
                [
                    0,
                    0x7F80_0000,
                    0x7FC0_0000,
                    0x7F80_0001,
                    0x7FFF_FFFF,
                    0x7F7F_FFFF,
                    1,
                    0x0080_0000,
                    0x007F_FFFF,
                    0x3F80_0000,
                ][self.below(10) as usize]
                    | sign
            }
            2..=4 => sign | ((0x70 + self.below(32)) << 23) | self.sig(), // near 1
            5 => {
                let e = [1, 2, 3, 4, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE][self.below(9) as usize];
                sign | (e << 23) | self.sig()
            }
            6 | 7 => sign | (self.below(256) << 23) | self.sig(),
            _ => self.next(),
        }
    }
    /// A pair shaped for `op` ('+', '-', '*', '/'): random, cancelling
    /// (close magnitudes), or with result exponents at the subnormal and
    /// overflow boundaries.
    fn pair(&mut self, op: char) -> (u32, u32) {
        let a = self.float();
        match self.below(8) {
            0 | 1 => {
                // b close to ±a: cancellation, quotients near 1, squares.
                let flip = self.next() >> (8 + self.below(24));
                let shift = (self.below(5) as i32 - 2) << 23;
                let b = ((a & 0x7FFF_FFFF) ^ flip).wrapping_add_signed(shift) & 0x7FFF_FFFF;
                let b = b.min(0x7F80_0000) | (self.next() & 0x8000_0000);
                (a, b)
            }
            2 => {
                // Result exponent near the subnormal range or the overflow.
                let ea = ((a >> 23) & 0xFF) as i32;
                let target = if self.below(2) == 0 {
                    self.below(30) as i32 - 26
                } else {
                    250 + self.below(8) as i32
                };
                let eb = match op {
                    '*' => target - ea + 127,
                    '/' => ea - target + 127,
                    _ => ea - self.below(30) as i32,
                };
                let eb = eb.clamp(0, 254) as u32;
                (a, (self.next() & 0x8000_0000) | (eb << 23) | self.sig())
            }
            _ => (a, self.float()),
        }
    }
}

// ------------------------------------------------------------------ oracles

fn hw_bin(op: char, a: u32, b: u32) -> u32 {
    let (x, y) = (black_box(f32::from_bits(a)), black_box(f32::from_bits(b)));
    let r = match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        _ => x / y,
    };
    black_box(r).to_bits()
}

fn sf_bin(op: char, a: u32, b: u32) -> u32 {
    let (x, y) = (SF32::from_bits(a), SF32::from_bits(b));
    match op {
        '+' => x.add(y, RNE),
        '-' => x.sub(y, RNE),
        '*' => x.mul(y, RNE),
        _ => x.div(y, RNE),
    }
    .to_bits()
}

fn ours_bin(op: char, a: u32, b: u32) -> u32 {
    let (x, y) = (F32::from_bits(a), F32::from_bits(b));
    match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        _ => x / y,
    }
    .to_bits()
}

/// Hardware agrees: same bits, or both NaN.
fn hw_agrees(ours: u32, hw: u32) -> bool {
    ours == hw || (is_nan_bits(hw) && ours == CANON_NAN)
}

/// `None` if `a op b` matches both oracles, else a description.
fn check_bin(op: char, a: u32, b: u32) -> Option<String> {
    let ours = ours_bin(op, a, b);
    let sf = sf_bin(op, a, b);
    let hw = hw_bin(op, a, b);
    if ours == sf && hw_agrees(ours, hw) {
        None
    } else {
        Some(format!(
            "{a:#010x} {op} {b:#010x}: ours {ours:#010x} softfloat {sf:#010x} hardware {hw:#010x}"
        ))
    }
}

/// Mismatch counter keeping the first few messages.
#[derive(Default)]
struct Tally {
    checked: AtomicU64,
    bad: AtomicU64,
    first: Mutex<Vec<String>>,
}
impl Tally {
    fn record(&self, r: Option<String>) {
        self.checked.fetch_add(1, Ordering::Relaxed);
        if let Some(msg) = r {
            self.bad.fetch_add(1, Ordering::Relaxed);
            let mut f = self.first.lock().unwrap();
            if f.len() < 10 {
                f.push(msg);
            }
        }
    }
    fn assert_clean(&self, what: &str, min_checked: u64) {
        let checked = self.checked.load(Ordering::Relaxed);
        let bad = self.bad.load(Ordering::Relaxed);
        println!("{what}: {checked} cases, {bad} mismatches");
        let first = self.first.lock().unwrap();
        assert!(bad == 0, "{what}: {bad} mismatches, first: {first:#?}");
        assert!(checked >= min_checked, "{what}: only {checked} cases");
    }
}

fn threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// Runs `check` on every `u32` in `[0, 2^32)`, split across threads.
fn sweep_all(what: &str, check: impl Fn(u32) -> Option<String> + Sync) {
    let tally = Tally::default();
    let t = threads() as u64;
    std::thread::scope(|s| {
        for k in 0..t {
            let (tally, check) = (&tally, &check);
            s.spawn(move || {
                let lo = (k << 32) / t;
                let hi = ((k + 1) << 32) / t;
                let mut bad = 0u64;
                for x in lo..hi {
                    if let Some(m) = check(x as u32) {
                        bad += 1;
                        tally.record(Some(m));
                    }
                }
                tally.checked.fetch_add(hi - lo - bad, Ordering::Relaxed);
            });
        }
    });
    tally.assert_clean(what, 1 << 32);
}

// ------------------------------------------------- default binary-op suite

/// Level-2 cross product plus one million weighted random pairs.
fn level2_suite(op: char) {
    let ops = level2_operands();
    let tally = Tally::default();
    let mut bad = 0;
    for &a in &ops {
        for &b in &ops {
            if let Some(m) = check_bin(op, a, b) {
                bad += 1;
                tally.record(Some(m));
            }
        }
    }
    tally
        .checked
        .fetch_add((ops.len() * ops.len()) as u64 - bad, Ordering::Relaxed);
    let mut rng = Rng(0x5EED_0000 + op as u64);
    for _ in 0..1_000_000 {
        let (a, b) = rng.pair(op);
        tally.record(check_bin(op, a, b));
    }
    tally.assert_clean(&format!("level-2 {op}"), 7_000_000);
}

#[test]
fn add_level2() {
    level2_suite('+');
}

#[test]
fn sub_level2() {
    level2_suite('-');
}

#[test]
fn mul_level2() {
    level2_suite('*');
}

#[test]
fn div_level2() {
    level2_suite('/');
}

// ------------------------------------------------------------------- unary

fn check_sqrt(a: u32) -> Option<String> {
    let ours = F32::from_bits(a).sqrt().to_bits();
    let sf = SF32::from_bits(a).sqrt(RNE).to_bits();
    let hw = black_box(black_box(f32::from_bits(a)).sqrt()).to_bits();
    if ours == sf && hw_agrees(ours, hw) {
        None
    } else {
        Some(format!(
            "sqrt {a:#010x}: ours {ours:#010x} softfloat {sf:#010x} hardware {hw:#010x}"
        ))
    }
}

fn check_to_f16(a: u32) -> Option<String> {
    let ours = F32::from_bits(a).to_f16_bits();
    let sf = {
        let r = SF32::from_bits(a).to_f16(RNE);
        r.to_bits()
    };
    let hw = half::f16::from_f32(f32::from_bits(a)).to_bits();
    let hw_ok = ours == hw || (hw & 0x7FFF > 0x7C00 && ours == detllm::float::F16_NAN);
    if ours == sf && hw_ok {
        None
    } else {
        Some(format!(
            "to_f16 {a:#010x}: ours {ours:#06x} softfloat {sf:#06x} hardware {hw:#06x}"
        ))
    }
}

/// bf16 by brute force: the two candidates around `x` and exact distances.
fn naive_bf16(x: u32) -> u16 {
    if is_nan_bits(x) {
        return detllm::float::BF16_NAN;
    }
    let lo = x & 0xFFFF_0000; // magnitude rounded down
    if lo == x {
        return (x >> 16) as u16;
    }
    let hi = lo + 0x1_0000; // next magnitude up, possibly ∞
    let v = |b: u32| -> f64 {
        if b & 0x7FFF_FFFF == 0x7F80_0000 {
            2f64.powi(128) // the value ∞ stands for when rounding
        } else {
            f32::from_bits(b & 0x7FFF_FFFF) as f64
        }
    };
    let ax = v(x);
    let (dl, dh) = (ax - v(lo), v(hi) - ax); // exact: few bits apart
    let pick_hi = dh < dl || (dh == dl && (lo >> 16) & 1 == 1);
    ((if pick_hi { hi } else { lo }) >> 16) as u16
}

fn check_to_bf16(a: u32) -> Option<String> {
    let ours = F32::from_bits(a).to_bf16_bits();
    let naive = naive_bf16(a);
    let h = half::bf16::from_f32(f32::from_bits(a)).to_bits();
    let h_ok = ours == h || (h & 0x7FFF > 0x7F80 && ours == detllm::float::BF16_NAN);
    if ours == naive && h_ok {
        None
    } else {
        Some(format!(
            "to_bf16 {a:#010x}: ours {ours:#06x} naive {naive:#06x} half {h:#06x}"
        ))
    }
}

fn check_to_i32(a: u32) -> Option<String> {
    let x = F32::from_bits(a);
    let f = black_box(f32::from_bits(a));
    let nan = is_nan_bits(a);
    let sf = SF32::from_bits(a);
    let mut out = Vec::new();
    let modes = [
        (
            "trunc",
            x.to_i32_trunc(),
            f as i32,
            RoundingMode::TowardZero,
        ),
        (
            "ties_away",
            x.to_i32_round_ties_away(),
            f.round() as i32,
            RoundingMode::TiesToAway,
        ),
        (
            "ties_even",
            x.to_i32_round_ties_even(),
            f.round_ties_even() as i32,
            RoundingMode::TiesToEven,
        ),
    ];
    for (name, ours, hw, mode) in modes {
        // SoftFloat's RISC-V NaN conversion gives i32::MAX; ours is 0 (like Rust `as`).
        let sfv = if nan { 0 } else { sf.to_i32(mode, false) };
        if ours != hw || ours != sfv {
            out.push(format!(
                "{name} {a:#010x}: ours {ours} softfloat {sfv} rust {hw}"
            ));
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out.join("; "))
    }
}

fn check_from_i32(i: i32) -> Option<String> {
    let ours = F32::from_i32(i).to_bits();
    let sf = SF32::from_i32(i, RNE).to_bits();
    let hw = (black_box(i) as f32).to_bits();
    (ours != sf || ours != hw)
        .then(|| format!("from_i32 {i}: ours {ours:#x} sf {sf:#x} hw {hw:#x}"))
}

fn check_from_u32(u: u32) -> Option<String> {
    let ours = F32::from_u32(u).to_bits();
    let sf = SF32::from_u32(u, RNE).to_bits();
    let hw = (black_box(u) as f32).to_bits();
    (ours != sf || ours != hw)
        .then(|| format!("from_u32 {u}: ours {ours:#x} sf {sf:#x} hw {hw:#x}"))
}

fn check_from_i64(i: i64) -> Option<String> {
    let ours = F32::from_i64(i).to_bits();
    let sf = SF32::from_i64(i, RNE).to_bits();
    let hw = (black_box(i) as f32).to_bits();
    (ours != sf || ours != hw)
        .then(|| format!("from_i64 {i}: ours {ours:#x} sf {sf:#x} hw {hw:#x}"))
}

/// An integer with a random magnitude class, for the conversions.
fn random_i64(rng: &mut Rng) -> i64 {
    let v = ((rng.next() as u64) << 32 | rng.next() as u64) as i64;
    let shift = rng.below(64);
    match rng.below(4) {
        0 => v >> shift,
        1 => (1i64 << (shift % 63)) + (rng.below(5) as i64 - 2), // near powers of two
        2 => ((v as u64) >> shift) as i64 | (1 << 24) | 1,       // ties and sticky bits
        _ => v,
    }
}

/// `(-1)^neg · mag · 2^exp` rounded to binary32 by SoftFloat: `mag` cut to
/// its top 53 bits with the bits below ORed into the last (a sticky bit at
/// least 29 bits below any binary32 rounding position), the exponent
/// clamped to where the answer no longer changes (below 2^53 · 2^-300 it
/// rounds to zero, from 2^200 it overflows), the value formed exactly as
/// a binary64 (`from_u64` times a power of two) and rounded once to binary32.
fn sf_scaled(neg: bool, mag: u128, exp: i32) -> u32 {
    let cut = (128 - mag.leading_zeros()).saturating_sub(53);
    let kept = (mag >> cut) as u64 | u64::from(mag & ((1u128 << cut) - 1) != 0);
    let e = (i64::from(exp) + i64::from(cut)).clamp(-300, 200);
    let scale = SF64::from_bits(((e + 1023) as u64) << 52);
    let v = SF64::from_u64(kept, RNE)
        .mul(scale, RNE)
        .to_f32(RNE)
        .to_bits();
    v | if neg { 0x8000_0000 } else { 0 }
}

/// `F32::from_i128_scaled` (both its 64- and 128-bit paths) against
/// SoftFloat for exponents over all of `i32`: the 256 at each end (where
/// `-149 - exp` used to overflow: +0 instead of +∞ in a release build), the
/// edges of the binary32 range for the significand's length (zero, the
/// subnormals, the smallest normal, overflow), and random ones.
#[test]
fn from_i128_scaled_every_exponent() {
    let mut rng = Rng(0x5CA1_ED00);
    for i in 0..1_000_000u32 {
        let len = 1 + rng.below(127); // 1..=127 bits
        let raw = (rng.next() as u128) << 96
            | (rng.next() as u128) << 64
            | (rng.next() as u128) << 32
            | rng.next() as u128;
        let mag = match i % 3 {
            0 => raw,
            1 => u128::MAX,                                       // carries
            _ => raw & !(u128::MAX >> 24) | 1 << 103 | (raw & 1), // ties, sticky
        } >> (128 - len)
            | 1 << (len - 1);
        let neg = i % 2 == 1;
        let sig = if neg { -(mag as i128) } else { mag as i128 };
        let top = len as i32 - 1;
        let d = rng.below(256) as i32;
        let exp = match i % 4 {
            0 => i32::MIN + d,
            1 => i32::MAX - d,
            2 => [-152, -129, 125][(d % 3) as usize] + d % 8 - top,
            _ => rng.next() as i32,
        };
        let (ours, sf) = (
            F32::from_i128_scaled(sig, exp).to_bits(),
            sf_scaled(neg, mag, exp),
        );
        assert_eq!(ours, sf, "{sig} · 2^{exp}: ours {ours:#010x} sf {sf:#010x}");
    }
}

#[test]
fn unary_random() {
    let tally = Tally::default();
    let mut rng = Rng(0xC0FFEE);
    for a in level2_operands() {
        tally.record(check_sqrt(a));
        tally.record(check_to_f16(a));
        tally.record(check_to_bf16(a));
        tally.record(check_to_i32(a));
    }
    for _ in 0..1_000_000 {
        let a = rng.float();
        tally.record(check_sqrt(a));
        tally.record(check_to_f16(a));
        tally.record(check_to_bf16(a));
        tally.record(check_to_i32(a));
        // Values just around f16 and integer rounding boundaries.
        let near = ((0x66 + rng.below(0x30)) << 23) | rng.sig() | (rng.next() & 0x8000_0000);
        tally.record(check_to_f16(near));
        tally.record(check_to_i32(near));
        let i = random_i64(&mut rng);
        tally.record(check_from_i64(i));
        tally.record(check_from_i32(i as i32));
        tally.record(check_from_u32(i as u32));
    }
    tally.assert_clean("unary random", 9_000_000);
}

#[test]
fn from_f16_and_bf16_all() {
    let tally = Tally::default();
    for h in 0..=u16::MAX {
        let ours = F32::from_f16_bits(h).to_bits();
        let sf = SF16::from_bits(h).to_f32(RNE).to_bits();
        let hw = half::f16::from_bits(h).to_f32().to_bits();
        let ok = ours == sf && hw_agrees(ours, hw);
        tally.record((!ok).then(|| format!("from_f16 {h:#06x}: {ours:#x} {sf:#x} {hw:#x}")));

        let ours = F32::from_bf16_bits(h).to_bits();
        let plain = (h as u32) << 16; // bf16 is the top half of a binary32
        let hb = half::bf16::from_bits(h).to_f32().to_bits();
        let ok = hw_agrees(ours, plain) && hw_agrees(ours, hb);
        tally.record((!ok).then(|| format!("from_bf16 {h:#06x}: {ours:#x} {hb:#x}")));
    }
    tally.assert_clean("from f16/bf16, all 2^16", 1 << 17);
}

// ----------------------------------------------------------- extended runs

/// 100 million weighted random pairs of `op`, split across threads.
fn extended_random(op: char) {
    const N: u64 = 100_000_000;
    let tally = Tally::default();
    let t = threads() as u64;
    std::thread::scope(|s| {
        for k in 0..t {
            let tally = &tally;
            s.spawn(move || {
                let mut rng = Rng(0xE7E7_0000 ^ (k << 40) ^ op as u64);
                let n = N / t + u64::from(k < N % t);
                let mut bad = 0;
                for _ in 0..n {
                    let (a, b) = rng.pair(op);
                    if let Some(m) = check_bin(op, a, b) {
                        bad += 1;
                        tally.record(Some(m));
                    }
                }
                tally.checked.fetch_add(n - bad, Ordering::Relaxed);
            });
        }
    });
    tally.assert_clean(&format!("extended random {op}"), N);
}

#[test]
#[ignore = "extended run: 100M pairs (about a minute)"]
fn extended_add() {
    extended_random('+');
}

#[test]
#[ignore = "extended run: 100M pairs (about a minute)"]
fn extended_sub() {
    extended_random('-');
}

#[test]
#[ignore = "extended run: 100M pairs (about a minute)"]
fn extended_mul() {
    extended_random('*');
}

#[test]
#[ignore = "extended run: 100M pairs (about a minute)"]
fn extended_div() {
    extended_random('/');
}

#[test]
#[ignore = "extended run: all 2^32 inputs"]
fn exhaustive_sqrt() {
    sweep_all("sqrt, all 2^32", check_sqrt);
}

#[test]
#[ignore = "extended run: all 2^32 inputs"]
fn exhaustive_to_f16() {
    sweep_all("to_f16, all 2^32", check_to_f16);
}

#[test]
#[ignore = "extended run: all 2^32 inputs"]
fn exhaustive_to_bf16() {
    sweep_all("to_bf16, all 2^32", check_to_bf16);
}

#[test]
#[ignore = "extended run: all 2^32 inputs, three rounding modes"]
fn exhaustive_to_i32() {
    sweep_all("to_i32 (3 modes), all 2^32", check_to_i32);
}

#[test]
#[ignore = "extended run: all 2^32 inputs, as i32 and as u32"]
fn exhaustive_from_i32_u32() {
    sweep_all("from_i32 and from_u32, all 2^32", |x| {
        check_from_i32(x as i32).or_else(|| check_from_u32(x))
    });
}

#[test]
#[ignore = "extended run: 100M random i64"]
fn extended_from_i64() {
    let tally = Tally::default();
    let mut rng = Rng(0x1264);
    for _ in 0..100_000_000u64 {
        tally.record(check_from_i64(random_i64(&mut rng)));
    }
    tally.assert_clean("from_i64, 100M random", 100_000_000);
}
