//! Shared helpers of the `math_*` oracle tests.

/// Canonical NaN (the oracle may return any NaN).
pub fn canon(b: u32) -> u32 {
    if b & 0x7FFF_FFFF > 0x7F80_0000 {
        0x7FC0_0000
    } else {
        b
    }
}

/// splitmix64 step: a seeded, portable pseudo-random sequence.
pub fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Inputs of the default sample: every special class, every exponent with
/// edge significands, a dense sweep around 1, and 2^21 random bit patterns.
pub fn sample_inputs() -> Vec<u32> {
    let mut v = Vec::new();
    for e in 0u32..256 {
        for s in [0u32, 1, 2, 0x40_0000, 0x7F_FFFE, 0x7F_FFFF, 0x12_3456] {
            v.push((e << 23) | s);
            v.push(0x8000_0000 | (e << 23) | s);
        }
    }
    for d in 0u32..65536 {
        v.push(0x3F80_0000 + d);
        v.push(0x3F80_0000 - d);
    }
    let mut s = 0x5EED_u64;
    for _ in 0..(1 << 21) {
        v.push(splitmix(&mut s) as u32);
    }
    v
}

/// (input, got, want) for every sample input where `f` and `oracle` differ.
pub fn sample_mismatches(f: fn(u32) -> u32, oracle: fn(u32) -> u32) -> Vec<(u32, u32, u32)> {
    sample_inputs()
        .into_iter()
        .filter_map(|x| {
            let (g, w) = (f(x), oracle(x));
            (g != w).then_some((x, g, w))
        })
        .take(20)
        .collect()
}

/// Compares `f` with `oracle` on all 2^32 inputs over 2 threads; prints and
/// returns the mismatch count (and the first few mismatches).
pub fn exhaustive(name: &str, f: fn(u32) -> u32, oracle: fn(u32) -> u32) -> u64 {
    let threads = 2u64;
    let chunk = (1u64 << 32) / threads;
    let start = std::time::Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut bad = 0u64;
                for x in t * chunk..(t + 1) * chunk {
                    let x = x as u32;
                    let (g, w) = (f(x), oracle(x));
                    if g != w {
                        if bad < 8 {
                            eprintln!("mismatch x={x:#010x} got={g:#010x} want={w:#010x}");
                        }
                        bad += 1;
                    }
                }
                bad
            })
        })
        .collect();
    let bad: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!(
        "{name}: {bad} mismatches over 2^32 inputs ({:.0} s)",
        start.elapsed().as_secs_f64()
    );
    bad
}
