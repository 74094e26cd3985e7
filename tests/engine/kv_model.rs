//! Random operation schedules against the reference model (see
//! `tests/support/kv.rs` for what is checked after every operation), for
//! both caches, both element types, random shapes, page sizes and pool sizes;
//! and paged (random page size) == contiguous, row for row.
use crate::support;

use detllm::kv::{KvConfig, KvType};
use proptest::prelude::*;
use support::kv::{Op, config_from_bytes, ops_from_bytes, with_contiguous, with_paged};

fn op() -> impl Strategy<Value = Op> {
    (
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
        any::<u64>(),
    )
        .prop_map(|(k, a, b, c, s)| Op::from_raw(k, a, b, c, s))
}

/// Shapes with a small pool (often too small: reservations fail).
fn config() -> impl Strategy<Value = KvConfig> {
    (
        1usize..4,
        1usize..6,
        any::<bool>(),
        1usize..6,
        1usize..48,
        1usize..10,
        0usize..64,
    )
        .prop_map(
            |(n_layers, kv_dim, f16, max_seqs, max_seq_len, page_size, pool)| {
                let pps = max_seq_len.div_ceil(page_size);
                KvConfig {
                    n_layers,
                    kv_dim,
                    elem: if f16 { KvType::F16 } else { KvType::F32 },
                    max_seqs,
                    max_seq_len,
                    page_size,
                    n_pages: pool % (max_seqs * pps + 2),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn paged_matches_model(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        with_paged(cfg, |mut h| h.run(&ops));
    }

    #[test]
    fn contiguous_matches_model(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        with_contiguous(cfg, |mut h| h.run(&ops));
    }

    /// With a pool that can never run out, the same schedule on both caches
    /// gives the same handles, lengths, rooms and committed rows.
    #[test]
    fn paged_equals_contiguous(cfg in config(), ops in prop::collection::vec(op(), 1..120)) {
        let cfg = KvConfig { n_pages: cfg.max_seqs * cfg.pages_per_seq(), ..cfg };
        with_paged(cfg, |mut p| {
            with_contiguous(cfg, |mut c| {
                for op in &ops {
                    p.apply(op);
                    c.apply(op);
                    p.check();
                    c.check();
                    assert_eq!(p.model.seqs.len(), c.model.seqs.len());
                    assert_eq!(p.committed(), c.committed());
                    for (a, b) in p.model.seqs.iter().zip(&c.model.seqs) {
                        assert_eq!((a.id, a.len, a.cells.len()), (b.id, b.len, b.cells.len()));
                    }
                }
                p.free_all();
                c.free_all();
            })
        });
    }

    /// The fuzz target's byte decoder, driven by random bytes.
    #[test]
    fn fuzz_decoder_schedules(head in any::<[u8; 8]>(), body in prop::collection::vec(any::<u8>(), 0..800)) {
        let cfg = config_from_bytes(&head);
        let ops = ops_from_bytes(&body);
        with_paged(cfg, |mut h| h.run(&ops));
        with_contiguous(cfg, |mut h| h.run(&ops));
    }
}

/// The random schedules above do reach the paths that matter: copy-on-write,
/// pool exhaustion (also of multi-sequence steps), forks of partly filled
/// tail pages, truncation into a shared page, failing calls. Fixed seeds, so
/// this is deterministic; it fails if the operation mix stops covering one.
/// With `KV_FUZZ_CORPUS_DIR=dir` it also writes these 300 inputs (in the
/// fuzz target's byte format) as the `kv_ops` seed corpus.
#[test]
fn schedules_cover_the_interesting_paths() {
    use support::kv::{Stats, mix};
    let mut total = Stats::default();
    for case in 0..300u64 {
        let h = mix(case);
        let cfg = config_from_bytes(&h.to_le_bytes());
        let body: Vec<u8> = (0..640).map(|i| mix(h ^ i) as u8).collect();
        if let Some(dir) = std::env::var_os("KV_FUZZ_CORPUS_DIR") {
            let mut input = h.to_le_bytes().to_vec();
            input.extend_from_slice(&body);
            std::fs::write(
                std::path::Path::new(&dir).join(format!("seed{case:03}")),
                input,
            )
            .unwrap();
        }
        let ops = ops_from_bytes(&body);
        let s = with_paged(cfg, |mut hs| {
            hs.run(&ops);
            hs.stats
        });
        total.reserves += s.reserves;
        total.cow_copies += s.cow_copies;
        total.exhausted += s.exhausted;
        total.batch_exhausted += s.batch_exhausted;
        total.forks_partial_tail += s.forks_partial_tail;
        total.truncate_into_shared += s.truncate_into_shared;
        total.failures_checked += s.failures_checked;
    }
    println!("{total:?}");
    assert!(total.reserves > 1000, "{total:?}");
    assert!(total.cow_copies > 100, "{total:?}");
    assert!(total.exhausted > 100, "{total:?}");
    assert!(total.batch_exhausted > 20, "{total:?}");
    assert!(total.forks_partial_tail > 100, "{total:?}");
    assert!(total.truncate_into_shared > 20, "{total:?}");
    assert!(total.failures_checked > 1000, "{total:?}");
}
