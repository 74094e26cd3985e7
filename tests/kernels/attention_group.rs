//! The grouped f16 attention path (heads sharing a KV head done together,
//! at most `MAX_GROUP` at a time, used when the scores buffer holds
//! `min(group, MAX_GROUP) · n_ctx`) gives the same bits as the per-head path
//! (scores buffer of exactly `n_ctx`), for groups above `MAX_GROUP` too
//! (Qwen2.5's 7 query heads per KV head).
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

/// A finite binary16 of exponent field `lo..lo + span` (capped at 30; 0 is
/// subnormal or zero), random sign and fraction.
fn f16_of(bits: u32, lo: u32, span: u32) -> u16 {
    let e = (lo + (bits >> 16) % span.max(1)).min(30);
    ((bits & 0x8000) as u16) | ((e as u16) << 10) | (bits as u16 & 0x3FF)
}

/// A row of `n` values: usually of one exponent range drawn for the row
/// (narrow ones take the fixed-point path, wide ones the class path), now
/// and then a zero, or (if `nonfinite`) ±∞/NaN.
fn row(next: &mut dyn FnMut() -> u32, n: usize, wide: u32, nonfinite: bool) -> Vec<u16> {
    let span = 1 + next() % wide;
    row_of_span(next, n, span, nonfinite)
}

/// A row of `n` values of exponent range `span` (see [`row`]).
fn row_of_span(next: &mut dyn FnMut() -> u32, n: usize, span: u32, nonfinite: bool) -> Vec<u16> {
    let lo = next() % (32 - span);
    (0..n)
        .map(|_| match next() % 200 {
            0 if nonfinite => 0x7C00 | (next() as u16 & 0x83FF),
            1 => 0,
            _ => f16_of(next(), lo, span),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn grouped_equals_per_head(
        n_kv in 1usize..3, group in 1usize..9, hd_blocks in 1usize..9, n_ctx in 1usize..120,
        seed in any::<u64>(), wide in 1u32..31, nonfinite in proptest::bool::weighted(0.1),
        q_scale in 0u32..20, q_wide in 1u32..24, k_misses in 0u32..5,
    ) {
        let hd = hd_blocks * 8;
        let n_head = n_kv * group;
        let mut s = seed;
        let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 32) as u32 };
        let rows = Rows {
            // A share `k_misses / 4` of the K rows spans 28 binades, more than
            // the fixed-point window of any head_dim: enough misses that the
            // grouped path sends them to the class sums in several batches.
            k: (0..n_ctx)
                .map(|_| if next() % 4 < k_misses {
                    row_of_span(&mut next, n_kv * hd, 28, nonfinite)
                } else {
                    row(&mut next, n_kv * hd, wide, nonfinite)
                })
                .collect(),
            v: (0..n_ctx).map(|_| row(&mut next, n_kv * hd, wide, nonfinite)).collect(),
        };
        let q: Vec<F32> = (0..n_head * hd)
            .map(|_| F32::from_f16_bits(f16_of(next(), q_scale, q_wide)))
            .collect();
        let scale = F32::from_bits(0x3E00_0000); // 0.125
        let mut small = vec![F32::ZERO; n_ctx];
        let mut big = vec![F32::ZERO; n_ctx * group.min(detllm::kernels::attention::MAX_GROUP)];
        let mut a = vec![F32::ZERO; n_head * hd];
        let mut b = vec![F32::ZERO; n_head * hd];
        attention(&q, &rows, n_ctx, n_head, n_kv, hd, scale, &mut small, &mut a).unwrap();
        attention(&q, &rows, n_ctx, n_head, n_kv, hd, scale, &mut big, &mut b).unwrap();
        let bits = |v: &[F32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&a), bits(&b));
    }
}
