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
