//! Hand-written KV cache scenarios with concrete expected values: sharing and
//! copy-on-write page accounting, a failing multi-sequence step, truncation
//! into a shared page, handles, sizing, f16 rounding on write.
use detllm::kv::{ContiguousCache, KvConfig, KvRead, KvSlice, KvStore, KvType, PagedCache, SeqId};
use detllm::{Arena, Error, F32};

fn cfg(elem: KvType, page_size: usize, n_pages: usize) -> KvConfig {
    KvConfig {
        n_layers: 2,
        kv_dim: 3,
        elem,
        max_seqs: 4,
        max_seq_len: 16,
        page_size,
        n_pages,
    }
}

fn paged(buf: &mut Vec<u8>, c: KvConfig) -> PagedCache<'_> {
    *buf = vec![0u8; PagedCache::bytes_required(&c).unwrap()];
    PagedCache::new(&mut Arena::new(buf), c).unwrap()
}

/// Row value for (tag ≤ 3, pos < 16, layer < 2, kv, j < 3): an integer
/// below 2048, so exact in f16.
fn val(tag: u32, pos: usize, layer: usize, kv: usize, j: usize) -> F32 {
    F32::from_u32(tag * 512 + pos as u32 * 32 + layer as u32 * 8 + kv as u32 * 4 + j as u32)
}

fn row(tag: u32, pos: usize, layer: usize, kv: usize) -> Vec<F32> {
    (0..3).map(|j| val(tag, pos, layer, kv, j)).collect()
}

/// reserve + write + set_len of `n` tokens tagged `tag`.
fn append<C: KvStore>(c: &mut C, s: SeqId, n: usize, tag: u32) {
    c.reserve(&[(s, n)]).unwrap();
    let len = c.len(s).unwrap();
    for pos in len..len + n {
        for layer in 0..2 {
            c.write(
                s,
                layer,
                pos,
                &row(tag, pos, layer, 0),
                &row(tag, pos, layer, 1),
            )
            .unwrap();
        }
    }
    c.set_len(s, len + n).unwrap();
}

fn read(v: KvSlice<'_>) -> Vec<F32> {
    (0..v.len()).map(|i| v.get(i).unwrap()).collect()
}

/// Asserts rows [0, len) of `s` carry the given tag per position.
fn assert_rows<C: KvStore>(c: &C, s: SeqId, tags: &[u32]) {
    assert_eq!(c.len(s).unwrap(), tags.len());
    for layer in 0..2 {
        let v = c.view(s, layer).unwrap();
        for (pos, &t) in tags.iter().enumerate() {
            assert_eq!(
                read(v.k(pos)),
                row(t, pos, layer, 0),
                "K pos {pos} layer {layer}"
            );
            assert_eq!(
                read(v.v(pos)),
                row(t, pos, layer, 1),
                "V pos {pos} layer {layer}"
            );
        }
    }
}

#[test]
fn fork_shares_pages_and_append_copies_the_tail_once() {
    let mut buf = Vec::new();
    let mut c = paged(&mut buf, cfg(KvType::F16, 4, 8));
    let a = c.new_seq().unwrap();
    append(&mut c, a, 6, 1); // pages: [0 full, 1 half]
    assert_eq!(c.free_pages(), 6);
    let b = c.fork(a).unwrap();
    assert_eq!(c.free_pages(), 6, "fork copies nothing");
    assert_eq!(c.page_table(a).unwrap(), c.page_table(b).unwrap());
    for &p in c.page_table(a).unwrap() {
        assert_eq!(c.refcount(p), Some(2));
    }
    // b appends 1: its half-full shared tail page is copied; page 0 stays shared.
    append(&mut c, b, 1, 2);
    assert_eq!(c.free_pages(), 5);
    let (ta, tb) = (c.page_table(a).unwrap(), c.page_table(b).unwrap());
    assert_eq!(ta[0], tb[0]);
    assert_ne!(ta[1], tb[1]);
    assert_eq!(c.refcount(ta[0]), Some(2));
    assert_eq!((c.refcount(ta[1]), c.refcount(tb[1])), (Some(1), Some(1)));
    assert_rows(&c, a, &[1; 6]);
    assert_rows(&c, b, &[1, 1, 1, 1, 1, 1, 2]);
    // a appends 3: its tail is private now; positions 6, 7 fill it, 8 takes a fresh page.
    append(&mut c, a, 3, 3);
    assert_eq!(c.free_pages(), 4);
    assert_rows(&c, a, &[1, 1, 1, 1, 1, 1, 3, 3, 3]);
    assert_rows(&c, b, &[1, 1, 1, 1, 1, 1, 2]);
    assert!(c.audit());
    c.free(a).unwrap();
    c.free(b).unwrap();
    assert_eq!(c.free_pages(), 8);
    assert!(c.audit());
}

#[test]
fn a_batch_of_all_sharers_keeps_the_original_for_the_last() {
    let mut buf = Vec::new();
    let mut c = paged(&mut buf, cfg(KvType::F32, 4, 3));
    let a = c.new_seq().unwrap();
    append(&mut c, a, 2, 1);
    let b = c.fork(a).unwrap();
    assert_eq!(c.free_pages(), 2);
    // Both sharers append 1 in one step: a copies, b keeps the original.
    c.reserve(&[(a, 1), (b, 1)]).unwrap();
    assert_eq!(c.free_pages(), 1);
    // With a third sharer outside the batch, both must copy: 2 pages needed.
    let mut buf2 = Vec::new();
    let mut c2 = paged(&mut buf2, cfg(KvType::F32, 4, 3));
    let a = c2.new_seq().unwrap();
    append(&mut c2, a, 2, 1);
    let b = c2.fork(a).unwrap();
    let _third = c2.fork(a).unwrap();
    c2.reserve(&[(a, 1), (b, 1)]).unwrap();
    assert_eq!(c2.free_pages(), 0);
    assert!(c.audit() && c2.audit());
}

#[test]
fn a_failing_multi_sequence_step_changes_nothing() {
    let mut buf = Vec::new();
    let mut c = paged(&mut buf, cfg(KvType::F16, 2, 6));
    let a = c.new_seq().unwrap();
    append(&mut c, a, 3, 1); // 2 pages, tail half full
    let b = c.fork(a).unwrap();
    let d = c.new_seq().unwrap();
    c.reserve(&[(d, 1)]).unwrap(); // d holds 1 page, room 1, len 0
    assert_eq!(c.free_pages(), 3);
    let state = |c: &PagedCache<'_>| {
        let mut s = Vec::new();
        for id in [a, b, d] {
            s.push((c.len(id), c.room(id), c.page_table(id).unwrap().to_vec()));
        }
        let rc: Vec<_> = (0..6).map(|p| c.refcount(p)).collect();
        let rows: Vec<Vec<F32>> = [a, b, d]
            .iter()
            .flat_map(|&id| {
                let room = c.room(id).unwrap();
                (0..2).flat_map(move |l| (0..room).map(move |p| (id, l, p)))
            })
            .map(|(id, l, p)| read(c.view(id, l).unwrap().k(p)))
            .collect();
        (s, rc, rows, c.free_pages())
    };
    let before = state(&c);
    // a: copy tail + 1 fresh = 2; b: tail still shared at the count -> keeps it
    // (last sharer) + 1 fresh = 1; d: room 1 -> 3 needs 1 fresh. Total 4 > 3.
    let e = c.reserve(&[(a, 2), (b, 2), (d, 3)]).unwrap_err();
    assert_eq!(e, Error::KvPagesExhausted { needed: 4, free: 3 });
    assert_eq!(state(&c), before);
    // Without d it fits, and uses exactly the 3 pages counted.
    c.reserve(&[(a, 2), (b, 2)]).unwrap();
    assert_eq!(c.free_pages(), 0);
    assert!(c.audit());
}

#[test]
fn truncating_into_a_shared_page_does_not_touch_the_other_owner() {
    for elem in [KvType::F16, KvType::F32] {
        let mut buf = Vec::new();
        let mut c = paged(&mut buf, cfg(elem, 4, 8));
        let a = c.new_seq().unwrap();
        append(&mut c, a, 10, 1); // pages 0, 1, 2 (half)
        let b = c.fork(a).unwrap();
        c.truncate(b, 5).unwrap(); // b drops page 2, keeps page 1 (shared, b owns 4..5)
        assert_eq!(c.page_table(b).unwrap().len(), 2);
        assert_eq!(c.free_pages(), 5);
        append(&mut c, b, 4, 2); // rewrites 5..9 of its own copy
        assert_rows(&c, a, &[1; 10]);
        assert_rows(&c, b, &[1, 1, 1, 1, 1, 2, 2, 2, 2]);
        assert!(c.audit());
        // Rollback on a as for rejected speculative tokens.
        c.truncate(a, 3).unwrap();
        append(&mut c, a, 2, 3);
        assert_rows(&c, a, &[1, 1, 1, 3, 3]);
        assert_rows(&c, b, &[1, 1, 1, 1, 1, 2, 2, 2, 2]);
        c.free(b).unwrap();
        c.free(a).unwrap();
        assert_eq!(c.free_pages(), 8);
    }
}

#[test]
fn contiguous_fork_copies_and_matches_paged() {
    fn script<C: KvStore>(c: &mut C) -> [SeqId; 2] {
        let a = c.new_seq().unwrap();
        append(c, a, 7, 1);
        let b = c.fork(a).unwrap();
        append(c, b, 2, 2);
        c.truncate(a, 4).unwrap();
        append(c, a, 1, 3);
        assert_rows(c, a, &[1, 1, 1, 1, 3]);
        assert_rows(c, b, &[1, 1, 1, 1, 1, 1, 1, 2, 2]);
        [a, b]
    }
    let c0 = cfg(KvType::F16, 3, 24);
    let mut cbuf = vec![0u8; ContiguousCache::bytes_required(&c0).unwrap()];
    let mut c = ContiguousCache::new(&mut Arena::new(&mut cbuf), c0).unwrap();
    let mut pbuf = Vec::new();
    let mut p = paged(&mut pbuf, c0);
    let (ic, ip) = (script(&mut c), script(&mut p));
    assert_eq!(ic, ip);
    for s in ic {
        for l in 0..2 {
            let (vc, vp) = (c.view(s, l).unwrap(), p.view(s, l).unwrap());
            for pos in 0..c.len(s).unwrap() {
                assert_eq!(read(vc.k(pos)), read(vp.k(pos)));
                assert_eq!(read(vc.v(pos)), read(vp.v(pos)));
            }
        }
    }
}

#[test]
fn handles_are_checked() {
    let mut buf = Vec::new();
    let mut c = paged(&mut buf, cfg(KvType::F16, 4, 8));
    let ids: Vec<SeqId> = (0..4).map(|_| c.new_seq().unwrap()).collect();
    assert_eq!(c.new_seq(), Err(Error::TooManySequences { max: 4 }));
    assert_eq!(c.fork(ids[0]), Err(Error::TooManySequences { max: 4 }));
    c.free(ids[1]).unwrap();
    let again = c.new_seq().unwrap();
    assert_eq!(again.index(), 1);
    assert_ne!(again, ids[1]);
    assert_eq!(c.len(ids[1]), Err(Error::UnknownSequence { index: 1 }));
    assert_eq!(c.free(ids[1]), Err(Error::UnknownSequence { index: 1 }));
    assert_eq!(
        c.reserve(&[(ids[0], 1), (ids[0], 1)]),
        Err(Error::DuplicateSequence { index: 0 })
    );
    assert_eq!(
        c.reserve(&[(ids[0], 17)]),
        Err(Error::SequenceTooLong { len: 17, max: 16 })
    );
    // Writes only in [len, room); set_len only forward within room.
    let one = [F32::ONE; 3];
    assert_eq!(
        c.write(ids[0], 0, 0, &one, &one),
        Err(Error::KvOutOfRange {
            pos: 0,
            len: 0,
            room: 0
        })
    );
    c.reserve(&[(ids[0], 2)]).unwrap();
    c.write(ids[0], 0, 1, &one, &one).unwrap();
    assert_eq!(
        c.write(ids[0], 2, 1, &one, &one),
        Err(Error::KvLayerOutOfRange {
            layer: 2,
            n_layers: 2
        })
    );
    assert_eq!(
        c.write(ids[0], 0, 1, &one, &one[..2]),
        Err(Error::ShapeMismatch {
            expected: 3,
            found: 2
        })
    );
    assert_eq!(
        c.set_len(ids[0], 3),
        Err(Error::KvOutOfRange {
            pos: 3,
            len: 0,
            room: 2
        })
    );
    c.set_len(ids[0], 2).unwrap();
    assert_eq!(
        c.write(ids[0], 0, 1, &one, &one),
        Err(Error::KvOutOfRange {
            pos: 1,
            len: 2,
            room: 2
        })
    );
    assert_eq!(
        c.truncate(ids[0], 3),
        Err(Error::KvOutOfRange {
            pos: 3,
            len: 2,
            room: 2
        })
    );
    // Views: rows past room are empty.
    let v = c.view(ids[0], 0).unwrap();
    assert_eq!(v.k(1).len(), 3);
    assert!(v.k(2).is_empty() && v.v(usize::MAX).is_empty());
}

#[test]
fn f16_rows_round_to_nearest_even() {
    let mut buf = Vec::new();
    let mut c = paged(
        &mut buf,
        KvConfig {
            kv_dim: 6,
            ..cfg(KvType::F16, 4, 2)
        },
    );
    let s = c.new_seq().unwrap();
    c.reserve(&[(s, 1)]).unwrap();
    // 1 + 2^-11 (tie -> even 1.0), 1 + 3·2^-11 (tie -> up), 65520 (tie -> ∞),
    // 2^-25 (tie -> +0), 3·2^-25 (tie between 1 and 2 quanta of 2^-24 -> 2), NaN.
    let k = [
        0x3F80_1000,
        0x3F80_3000,
        0x477F_F000,
        0x3300_0000,
        0x33C0_0000,
        0x7FC1_2345,
    ]
    .map(F32::from_bits);
    c.write(s, 0, 0, &k, &k).unwrap();
    let v = c.view(s, 0).unwrap();
    let KvSlice::F16(h) = v.k(0) else {
        panic!("f16 cache")
    };
    assert_eq!(h, &[0x3C00, 0x3C02, 0x7C00, 0x0000, 0x0002, 0x7E00]);
}

#[test]
fn sizing_is_exact_enough_and_configs_are_checked() {
    for c0 in [
        cfg(KvType::F16, 3, 10),
        cfg(KvType::F32, 16, 1),
        cfg(KvType::F16, 1, 0),
    ] {
        let need = PagedCache::bytes_required(&c0).unwrap();
        let need_c = ContiguousCache::bytes_required(&c0).unwrap();
        // Any alignment of the buffer start works with exactly `need` bytes.
        let mut big = vec![0u8; need.max(need_c) + 16];
        for off in 0..8 {
            let b = &mut big[off..off + need];
            assert!(PagedCache::new(&mut Arena::new(b), c0).is_ok());
            let b = &mut big[off..off + need_c];
            assert!(ContiguousCache::new(&mut Arena::new(b), c0).is_ok());
        }
        let mut small = vec![0u8; need / 2];
        assert!(matches!(
            PagedCache::new(&mut Arena::new(&mut small), c0),
            Err(Error::ArenaExhausted { .. })
        ));
    }
    let good = cfg(KvType::F16, 4, 4);
    for bad in [
        KvConfig {
            n_layers: 0,
            ..good
        },
        KvConfig { kv_dim: 0, ..good },
        KvConfig {
            max_seqs: 0,
            ..good
        },
        KvConfig {
            max_seq_len: 0,
            ..good
        },
        KvConfig {
            page_size: 0,
            ..good
        },
    ] {
        assert_eq!(PagedCache::bytes_required(&bad), None);
        let mut b = vec![0u8; 4096];
        assert!(matches!(
            PagedCache::new(&mut Arena::new(&mut b), bad),
            Err(Error::InvalidLimit { value: 0, .. })
        ));
    }
    let huge = KvConfig {
        n_pages: usize::MAX / 2,
        ..good
    };
    assert_eq!(PagedCache::bytes_required(&huge), None);
    let huge = KvConfig {
        max_seq_len: usize::MAX,
        ..good
    };
    assert_eq!(ContiguousCache::bytes_required(&huge), None);
}

#[test]
fn views_are_sync_and_copy() {
    fn sync_copy<T: Sync + Copy>() {}
    sync_copy::<detllm::kv::PagedView<'static>>();
    sync_copy::<detllm::kv::ContiguousView<'static>>();
}
