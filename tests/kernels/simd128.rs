//! The wasm32 SIMD128 build of the Q4_1 chunk kernel
//! (`src/quant/fast/wasm32/`) equal to the per-cell reference, bit for bit,
//! on random weights and inputs. It needs no threads, so it runs under
//! Node's WASI where `matmul.rs`'s pool cannot: `scripts/browser-test.sh`
//! runs it for wasm32-wasip1 with `+simd128`, where the `Auto` path is that
//! build. On other targets `Auto` is their own best build and the property
//! holds the same.

use detllm::quant::fast::{KernelPath, rows_kernel_with};
use detllm::quant::{ActKind, GgmlType, QActs, QMatrix};
use detllm::{Arena, F32};
use proptest::prelude::*;

/// A finite f16 with exponent field in `8..=20`: a chunk's scales then
/// span less than the kernel's limits (`LIM_Q4_1_D`), so the chunk kernel,
/// not the exact per-block fallback, computes the cells.
fn f16_bits(r: u64) -> u16 {
    ((r & 0x8000) as u16) | ((8 + (r >> 16) % 13) as u16) << 10 | (r >> 32) as u16 & 0x3ff
}

/// Q4_1 weights, `n_out` rows of `n_in`: random scales, mins and nibbles.
fn weights(seed: u64, n_in: usize, n_out: usize) -> Vec<u8> {
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (s ^ (s >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^ (z >> 27)
    };
    let mut out = Vec::with_capacity(n_out * n_in / 32 * 20);
    for _ in 0..n_out * n_in / 32 {
        out.extend_from_slice(&f16_bits(next()).to_le_bytes());
        out.extend_from_slice(&f16_bits(next()).to_le_bytes());
        for _ in 0..16 {
            out.push(next() as u8);
        }
    }
    out
}

/// The cells of `path`, `(n_out, m)`, as bits.
fn cells(w: &QMatrix, x: &[F32], m: usize, path: KernelPath) -> Vec<u32> {
    let kind = ActKind::for_weight(w.ty);
    let mut buf = vec![0u8; QActs::bytes_for(kind, m, w.n_in).unwrap()];
    let mut arena = Arena::new(&mut buf);
    let mut a = QActs::new(&mut arena, kind, m, w.n_in).unwrap();
    a.quantize(x).unwrap();
    let mut out = vec![F32::ZERO; m * w.n_out];
    rows_kernel_with(w, 0, &a, &mut out, path);
    out.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn q4_1_auto_equals_reference(seed in any::<u64>(), kb in 1usize..72, n_out in 1usize..24,
                                  m in 1usize..5, xs in prop::collection::vec(any::<u32>(), 64)) {
        let n_in = 32 * kb;
        let wb = weights(seed, n_in, n_out);
        let w = QMatrix::new(GgmlType::Q4_1, n_in, n_out, &wb).unwrap();
        // Finite inputs of varied magnitude (exponents 120..=135).
        let x: Vec<F32> = (0..m * n_in)
            .map(|i| {
                let r = xs[i % xs.len()].rotate_left(i as u32 % 32);
                F32::from_bits((r & 0x807f_ffff) | (120 + (r >> 8) % 16) << 23)
            })
            .collect();
        prop_assert_eq!(cells(&w, &x, m, KernelPath::Auto), cells(&w, &x, m, KernelPath::Reference));
    }
}
