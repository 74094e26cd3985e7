//! Quick cross-check of the soft binary32 operations against the host's IEEE
//! hardware on random and special inputs (the full oracle suite is in
//! `tests/float/oracle.rs`).
use detllm::F32;

/// Hardware result with NaN canonicalised (checked on the bits, so the
/// optimiser cannot reason about the float).
fn hw(x: f32) -> u32 {
    let b = x.to_bits();
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        0x7FC0_0000
    } else {
        b
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let x = self.0;
        ((x ^ (x >> 33)) >> 16) as u32
    }
    fn float(&mut self) -> u32 {
        let r = self.next();
        match r % 8 {
            0 => r & 0x807F_FFFF, // subnormal
            1 => [
                0,
                0x8000_0000,
                0x7F80_0000,
                0xFF80_0000,
                0x7FC0_0001,
                0x7F7F_FFFF,
                1,
                0x0080_0000,
            ][(r >> 8) as usize % 8],
            2 => (r & 0x80FF_FFFF) | 0x3F00_0000, // near one
            _ => r,
        }
    }
}

#[test]
fn ops_match_hardware() {
    let mut rng = Rng(1);
    for _ in 0..2_000_000 {
        let (a, b) = (rng.float(), rng.float());
        let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
        let (sa, sb) = (F32::from_bits(a), F32::from_bits(b));
        assert_eq!((sa + sb).to_bits(), hw(fa + fb), "add {a:#x} {b:#x}");
        assert_eq!((sa - sb).to_bits(), hw(fa - fb), "sub {a:#x} {b:#x}");
        assert_eq!((sa * sb).to_bits(), hw(fa * fb), "mul {a:#x} {b:#x}");
        assert_eq!((sa / sb).to_bits(), hw(fa / fb), "div {a:#x} {b:#x}");
        assert_eq!(sa.sqrt().to_bits(), hw(fa.sqrt()), "sqrt {a:#x}");
        assert_eq!(sa.to_i32_trunc(), fa as i32, "trunc {a:#x}");
        assert_eq!(
            sa.to_i32_round_ties_away(),
            fa.round() as i32,
            "round {a:#x}"
        );
        assert_eq!(
            sa.to_i32_round_ties_even(),
            fa.round_ties_even() as i32,
            "rte {a:#x}"
        );
        let i = rng.next() as i32 >> (rng.next() % 31);
        assert_eq!(F32::from_i32(i).to_bits(), (i as f32).to_bits());
    }
}

#[test]
fn f16_round_trip_all() {
    for h in 0..=u16::MAX {
        let f = F32::from_f16_bits(h);
        let back = f.to_f16_bits();
        let is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
        if is_nan {
            assert_eq!(f, F32::NAN);
            assert_eq!(back, 0x7E00);
        } else {
            assert_eq!(back, h, "{h:#x}");
        }
    }
}
