//! The attention kernel over a paged sequence gives the same bits as over a
//! contiguous one, for random page sizes, element types and GQA shapes; and a
//! forked sequence (copy-on-write) gives the same bits as one prefilled from
//! scratch with the same rows.
use detllm::kernels::attention::attention;
use detllm::kv::{ContiguousCache, KvConfig, KvRead, KvStore, KvType, PagedCache, SeqId};
use detllm::{Arena, F32};
use proptest::prelude::*;

/// Moderate random values (no overflow in the scores): sign, exponent in
/// [2^-8, 2^2), random mantissa.
fn value(h: u64) -> F32 {
    let sign = (h & 1) as u32;
    let exp = 119 + ((h >> 1) % 10) as u32;
    let man = (h >> 16) as u32 & 0x7F_FFFF;
    F32::from_bits(sign << 31 | exp << 23 | man)
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn row(seed: u64, pos: usize, layer: usize, kv: usize, dim: usize) -> Vec<F32> {
    (0..dim)
        .map(|j| {
            value(mix(seed
                ^ ((pos * 64 + layer * 4 + kv) as u64) << 16
                ^ j as u64))
        })
        .collect()
}

/// Appends positions `[len, len + n)` with rows from `seed`.
fn append<C: KvStore>(c: &mut C, s: SeqId, n: usize, seed: u64) {
    let cfg = *c.config();
    c.reserve(&[(s, n)]).unwrap();
    let len = c.len(s).unwrap();
    for pos in len..len + n {
        for l in 0..cfg.n_layers {
            let (k, v) = (
                row(seed, pos, l, 0, cfg.kv_dim),
                row(seed, pos, l, 1, cfg.kv_dim),
            );
            c.write(s, l, pos, &k, &v).unwrap();
        }
    }
    c.set_len(s, len + n).unwrap();
}

struct Shape {
    n_head: usize,
    n_kv_head: usize,
    head_dim: usize,
}

/// Attention of `q` over positions `0..n_ctx` of `view` (scale 0.25), as bits.
fn attend<V: KvRead>(view: &V, n_ctx: usize, q: &[F32], sh: &Shape) -> Vec<u32> {
    let mut scores = vec![F32::ZERO; n_ctx];
    let mut out = vec![F32::ZERO; sh.n_head * sh.head_dim];
    let scale = F32::from_bits(0x3E80_0000); // 0.25
    attention(
        q,
        view,
        n_ctx,
        sh.n_head,
        sh.n_kv_head,
        sh.head_dim,
        scale,
        &mut scores,
        &mut out,
    )
    .unwrap();
    out.iter().map(|x| x.to_bits()).collect()
}

/// The same script on both caches: a prompt, a fork, appends to both, a
/// rollback on the parent, and a sequence prefilled from scratch with the
/// fork's rows. Returns (parent, fork, from-scratch) handles.
fn script<C: KvStore>(c: &mut C, prompt: usize, extra: [usize; 3], seed: u64) -> [SeqId; 3] {
    let a = c.new_seq().unwrap();
    append(c, a, prompt, seed);
    let b = c.fork(a).unwrap();
    append(c, b, extra[0], seed ^ 1);
    append(c, a, extra[1], seed ^ 2);
    let keep = c.len(a).unwrap().saturating_sub(extra[2]);
    c.truncate(a, keep).unwrap();
    append(c, a, 1, seed ^ 3);
    // From scratch: the fork's rows, prefilled with no sharing.
    let d = c.new_seq().unwrap();
    c.reserve(&[(d, prompt + extra[0])]).unwrap();
    for pos in 0..prompt + extra[0] {
        let s = if pos < prompt { seed } else { seed ^ 1 };
        for l in 0..c.config().n_layers {
            let kv_dim = c.config().kv_dim;
            let (k, v) = (row(s, pos, l, 0, kv_dim), row(s, pos, l, 1, kv_dim));
            c.write(d, l, pos, &k, &v).unwrap();
        }
    }
    c.set_len(d, prompt + extra[0]).unwrap();
    [a, b, d]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn paged_attention_equals_contiguous(
        n_kv_head in 1usize..3,
        group in 1usize..3,
        head_dim in 1usize..9,
        f16 in any::<bool>(),
        page_size in 1usize..12,
        prompt in 1usize..20,
        extra in [0usize..8, 0usize..8, 0usize..8],
        seed in any::<u64>(),
    ) {
        let sh = Shape { n_head: n_kv_head * group, n_kv_head, head_dim };
        let max_seq_len = 40;
        let cfg = KvConfig {
            n_layers: 2,
            kv_dim: n_kv_head * head_dim,
            elem: if f16 { KvType::F16 } else { KvType::F32 },
            max_seqs: 3,
            max_seq_len,
            page_size,
            n_pages: 3 * max_seq_len.div_ceil(page_size),
        };
        let mut pbuf = vec![0u8; PagedCache::bytes_required(&cfg).unwrap()];
        let mut p = PagedCache::new(&mut Arena::new(&mut pbuf), cfg).unwrap();
        let mut cbuf = vec![0u8; ContiguousCache::bytes_required(&cfg).unwrap()];
        let mut c = ContiguousCache::new(&mut Arena::new(&mut cbuf), cfg).unwrap();
        let ids = script(&mut p, prompt, extra, seed);
        prop_assert_eq!(ids, script(&mut c, prompt, extra, seed));
        let q: Vec<F32> = (0..sh.n_head * head_dim).map(|j| value(mix(seed ^ 0xABCD ^ j as u64))).collect();
        for &s in &ids {
            let n = p.len(s).unwrap();
            for l in 0..2 {
                for n_ctx in [1, n / 2 + 1, n] {
                    let a = attend(&p.view(s, l).unwrap(), n_ctx, &q, &sh);
                    let b = attend(&c.view(s, l).unwrap(), n_ctx, &q, &sh);
                    prop_assert_eq!(a, b, "seq {:?} layer {} n_ctx {}", s, l, n_ctx);
                }
            }
        }
        // The fork (copy-on-write, paged) equals the from-scratch sequence.
        let (b, d) = (ids[1], ids[2]);
        let n = p.len(b).unwrap();
        prop_assert_eq!(n, p.len(d).unwrap());
        for l in 0..2 {
            let a = attend(&p.view(b, l).unwrap(), n, &q, &sh);
            let e = attend(&p.view(d, l).unwrap(), n, &q, &sh);
            prop_assert_eq!(a, e);
        }
    }
}
