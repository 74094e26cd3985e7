//! The grouped f16 attention path (heads sharing a KV head done together,
//! used when the scores buffer holds `group · n_ctx`) gives the same bits as
//! the per-head path (scores buffer of exactly `n_ctx`).
use detllm::F32;
use detllm::kernels::attention;
use detllm::kv::{KvRead, KvSlice};
use proptest::prelude::*;

struct Rows {
    k: Vec<Vec<u16>>,
    v: Vec<Vec<u16>>,
}

impl KvRead for Rows {
    fn k(&self, pos: usize) -> KvSlice<'_> {
        KvSlice::F16(&self.k[pos])
    }
    fn v(&self, pos: usize) -> KvSlice<'_> {
        KvSlice::F16(&self.v[pos])
    }
}

fn f16_of(bits: u32, exp_range: u32) -> u16 {
    // Finite halves of varied magnitude (subnormals included), random sign.
    let e = (bits >> 10) % exp_range;
    ((bits & 0x8000) as u16) | ((e as u16) << 10) | (bits as u16 & 0x3FF)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn grouped_equals_per_head(
        n_kv in 1usize..3, group in 1usize..5, hd_blocks in 1usize..5, n_ctx in 1usize..40,
        seed in any::<u64>(), exp_range in 1u32..31,
    ) {
        let hd = hd_blocks * 8;
        let n_head = n_kv * group;
        let mut s = seed;
        let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 32) as u32 };
        let rows = Rows {
            k: (0..n_ctx).map(|_| (0..n_kv * hd).map(|_| f16_of(next(), exp_range)).collect()).collect(),
            v: (0..n_ctx).map(|_| (0..n_kv * hd).map(|_| f16_of(next(), exp_range)).collect()).collect(),
        };
        let q: Vec<F32> = (0..n_head * hd).map(|_| F32::from_f16_bits(f16_of(next(), exp_range))).collect();
        let scale = F32::from_bits(0x3E00_0000); // 0.125
        let mut small = vec![F32::ZERO; n_ctx];
        let mut big = vec![F32::ZERO; n_ctx * group];
        let mut a = vec![F32::ZERO; n_head * hd];
        let mut b = vec![F32::ZERO; n_head * hd];
        attention(&q, &rows, n_ctx, n_head, n_kv, hd, scale, &mut small, &mut a).unwrap();
        attention(&q, &rows, n_ctx, n_head, n_kv, hd, scale, &mut big, &mut b).unwrap();
        prop_assert_eq!(a, b);
    }
}
