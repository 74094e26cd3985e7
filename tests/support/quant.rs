//! Independent references shared by the quant/kernel tests (hardware floats
//! and plain integer code written separately from the library's kernels).

use detllm::F32;

/// binary16 → f64 through the textbook formula (exact).
pub fn f16_to_f64(h: u16) -> f64 {
    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 31) as i32;
    let f = (h & 1023) as f64;
    if e == 31 {
        return if f == 0.0 {
            s * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    if e == 0 {
        s * f * 2f64.powi(-24)
    } else {
        s * (1.0 + f / 1024.0) * 2f64.powi(e - 15)
    }
}

/// A finite binary16 as an exact integer multiple of 2^-24.
pub fn f16_scaled(h: u16) -> i128 {
    let v = f16_to_f64(h) * 2f64.powi(24);
    assert!(v.is_finite() && v == v.trunc());
    v as i128
}

pub fn f16_finite(h: u16) -> bool {
    f16_to_f64(h).is_finite()
}

/// `v · 2^-48` rounded to nearest-even binary32, written independently of
/// the library's `round_pack` (bit length, shift, tie test, hardware scaling
/// by an exact power of two). Valid for |v| < 2^127.
pub fn round_2m48(v: i128) -> u32 {
    if v == 0 {
        return 0;
    }
    let neg = v < 0;
    let mag = v.unsigned_abs();
    let n = 128 - mag.leading_zeros() as i32;
    let (q, shift) = if n <= 24 {
        (mag, 0)
    } else {
        let shift = (n - 24) as u32;
        let q = mag >> shift;
        let rem = mag & ((1u128 << shift) - 1);
        let half = 1u128 << (shift - 1);
        let q = if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        };
        (q, shift as i32)
    };
    // q ≤ 2^24 is exact in f32; the power of two scaling is exact (result normal).
    let r = (q as f64 * 2f64.powi(shift - 48)) as f32;
    let r = if neg { -r } else { r };
    r.to_bits()
}

pub fn hw(x: F32) -> f32 {
    f32::from_bits(x.to_bits())
}

pub fn sw(x: f32) -> F32 {
    F32::from_bits(x.to_bits())
}

/// Bits with NaN canonicalised.
pub fn canon(b: u32) -> u32 {
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        0x7FC0_0000
    } else {
        b
    }
}

/// SplitMix64 for deterministic test data.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn bytes(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
    /// A "model-like" f32: normal around 2^e with e in lo..hi.
    pub fn f32_in(&mut self, lo: i32, hi: i32) -> f32 {
        let r = self.next();
        let e = lo + (r % ((hi - lo) as u64 + 1)) as i32;
        let m = 1.0 + ((r >> 8) & 0xFFFFFF) as f32 / 16777216.0;
        let s = if (r >> 40) & 1 == 1 { -1.0 } else { 1.0 };
        s * m * 2f32.powi(e)
    }
    /// An f16 scale: mostly normal positive, sometimes subnormal, zero,
    /// negative, and (if `specials`) ±∞/NaN.
    pub fn f16_scale(&mut self, specials: bool) -> u16 {
        let r = self.next();
        match r % 64 {
            0 => 0,
            1..=4 => (r >> 8) as u16 & 0x03FF, // subnormal
            5 if specials => 0x7C00,
            6 if specials => 0x7E01,
            7..=9 => 0x8000 | ((r >> 8) as u16 % 0x7C00), // negative finite
            _ => (r >> 8) as u16 % 0x7C00,
        }
    }
}

/// A minimal GGUF v3 tensor-table parser (test-local): name → (type, data offset).
pub fn gguf_tensors(bytes: &[u8]) -> Vec<(String, u32, u64)> {
    let mut p = 0usize;
    let u32_ = |p: &mut usize| {
        let v = u32::from_le_bytes(bytes[*p..*p + 4].try_into().unwrap());
        *p += 4;
        v
    };
    let u64_ = |p: &mut usize| {
        let v = u64::from_le_bytes(bytes[*p..*p + 8].try_into().unwrap());
        *p += 8;
        v
    };
    assert_eq!(&bytes[0..4], b"GGUF");
    p += 4;
    let _version = u32_(&mut p);
    let n_t = u64_(&mut p);
    let n_kv = u64_(&mut p);
    fn skip_val(bytes: &[u8], p: &mut usize, ty: u32) {
        let fixed = [1usize, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];
        match ty {
            8 => {
                let n = u64::from_le_bytes(bytes[*p..*p + 8].try_into().unwrap()) as usize;
                *p += 8 + n;
            }
            9 => {
                let et = u32::from_le_bytes(bytes[*p..*p + 4].try_into().unwrap());
                let n = u64::from_le_bytes(bytes[*p + 4..*p + 12].try_into().unwrap());
                *p += 12;
                for _ in 0..n {
                    skip_val(bytes, p, et);
                }
            }
            t => *p += fixed[t as usize],
        }
    }
    for _ in 0..n_kv {
        let kl = u64_(&mut p) as usize;
        p += kl;
        let ty = u32_(&mut p);
        skip_val(bytes, &mut p, ty);
    }
    let mut out = Vec::new();
    for _ in 0..n_t {
        let nl = u64_(&mut p) as usize;
        let name = String::from_utf8(bytes[p..p + nl].to_vec()).unwrap();
        p += nl;
        let nd = u32_(&mut p);
        p += 8 * nd as usize;
        let ty = u32_(&mut p);
        let off = u64_(&mut p);
        out.push((name, ty, off));
    }
    let data_start = p.next_multiple_of(32) as u64;
    out.into_iter()
        .map(|(n, t, o)| (n, t, o + data_start))
        .collect()
}
