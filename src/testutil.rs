//! Helpers shared by the unit tests.

#![forbid(unsafe_code)]

/// A 64-bit linear congruential generator (Knuth's MMIX constants) from
/// `seed`, yielding the high 32 bits of each state: reproducible test data
/// without a dependency.
pub(crate) fn lcg(seed: u64) -> impl FnMut() -> u32 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 32) as u32
    }
}

/// A gated activation kernel's row function: `gate_i = act(gate_i) · up_i`.
pub(crate) type GatedFn = fn(&mut [crate::F32], &[crate::F32]);

/// Checks a gated activation kernel: its portable `body` and every SIMD
/// build equal `act(g) · u` element by element, on rows of every length up
/// to 200 with gate values of every kind (moderate, any bits, zeros,
/// subnormals, ±∞, NaN, ±100), elements past the row untouched.
pub(crate) fn check_gated_builds(
    body: GatedFn,
    simd: impl IntoIterator<Item = Option<GatedFn>> + Copy,
    act: fn(crate::F32) -> crate::F32,
    seed: u64,
) {
    use crate::F32;
    let mut next = lcg(seed);
    const N: usize = 200;
    for round in 0..400 {
        let n = round % (N + 1);
        let kind = round % 3;
        let g: [F32; N] = core::array::from_fn(|_| {
            let r = next();
            F32::from_bits(match (kind, r % 53) {
                (0, _) => r,
                (1, 0) => 0,
                (1, 1) => r & 0x807F_FFFF,
                (1, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                (1, 3) => 0x7FC0_0000,
                (1, 4) => (r & 0x8000_0000) | 0x42C8_0000, // ±100
                _ => (r & 0x8000_0000) | (0x3A00_0000 + r % 0x0900_0000),
            })
        });
        let u: [F32; N] = core::array::from_fn(|_| {
            let r = next();
            F32::from_bits((r & 0x8000_0000) | (0x3A00_0000 + r % 0x0900_0000))
        });
        let want: [F32; N] = core::array::from_fn(|i| if i < n { act(g[i]) * u[i] } else { g[i] });
        for f in core::iter::once(Some(body)).chain(simd).flatten() {
            let mut got = g;
            f(&mut got[..n], &u[..n]);
            assert!(
                got.map(F32::to_bits) == want.map(F32::to_bits),
                "round {round}"
            );
        }
    }
}
