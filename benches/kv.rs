//! KV cache costs, as ratios within one run:
//! * `view/*`: reading every K and V row of one layer of a 1024-token
//!   sequence through a view — a plain slice walk (baseline), the contiguous
//!   view, paged views with 16- and 1-token pages (one page-table lookup per
//!   row).
//! * `attention/*`: the attention kernel (SmolLM2 shape: 9 heads, 3 kv heads,
//!   head_dim 64, f16 cache) over 512 positions, contiguous vs paged — the
//!   end-to-end effect of the page-table lookup.
//! * `reserve/*`: fork (or create) 8 sequences, one `reserve` of 1 token for
//!   all 8, free: forks copy their shared tail page, new sequences take a
//!   zeroed fresh page.
//!
//! Run: `cargo bench --bench kv`.

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use detllm::kernels::attention::attention;
use detllm::kv::{ContiguousCache, KvConfig, KvRead, KvSlice, KvStore, KvType, PagedCache, SeqId};
use detllm::{Arena, F32};

const N: usize = 1024;

fn cfg(page_size: usize) -> KvConfig {
    KvConfig {
        n_layers: 2,
        kv_dim: 192,
        elem: KvType::F16,
        max_seqs: 9,
        max_seq_len: N,
        page_size,
        n_pages: 9 * N.div_ceil(page_size),
    }
}

fn fill<C: KvStore>(c: &mut C, n: usize) -> SeqId {
    let s = c.new_seq().unwrap();
    c.reserve(&[(s, n)]).unwrap();
    for pos in 0..n {
        for l in 0..2 {
            let k: Vec<F32> = (0..192)
                .map(|j| {
                    F32::from_bits(0x3C00_0000 + ((pos * 193 + j * 7 + l) as u32 % 0x0100_0000))
                })
                .collect();
            c.write(s, l, pos, &k, &k).unwrap();
        }
    }
    c.set_len(s, n).unwrap();
    s
}

fn walk<V: KvRead>(v: &V, n: usize) -> u32 {
    let mut acc = 0u32;
    for pos in 0..n {
        for r in [v.k(pos), v.v(pos)] {
            if let KvSlice::F16(h) = r {
                acc = acc
                    .wrapping_add(h[0] as u32)
                    .wrapping_add(h[h.len() - 1] as u32);
            }
        }
    }
    acc
}

fn bench(c: &mut Criterion) {
    let mut cb = vec![0u8; ContiguousCache::bytes_required(&cfg(16)).unwrap()];
    let mut cc = ContiguousCache::new(&mut Arena::new(&mut cb), cfg(16)).unwrap();
    let sc = fill(&mut cc, N);
    let mut pb16 = vec![0u8; PagedCache::bytes_required(&cfg(16)).unwrap()];
    let mut p16 = PagedCache::new(&mut Arena::new(&mut pb16), cfg(16)).unwrap();
    let s16 = fill(&mut p16, N);
    let mut pb1 = vec![0u8; PagedCache::bytes_required(&cfg(1)).unwrap()];
    let mut p1 = PagedCache::new(&mut Arena::new(&mut pb1), cfg(1)).unwrap();
    let s1 = fill(&mut p1, N);

    // Baseline: the same rows as one plain slice.
    let plain: Vec<u16> = (0..2 * N * 192).map(|i| i as u16).collect();
    let mut g = c.benchmark_group("view");
    g.bench_function("slice_baseline", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for r in black_box(&plain).chunks_exact(192) {
                acc = acc.wrapping_add(r[0] as u32).wrapping_add(r[191] as u32);
            }
            acc
        })
    });
    g.bench_function("contiguous", |b| {
        b.iter(|| walk(&cc.view(black_box(sc), 1).unwrap(), N))
    });
    g.bench_function("paged16", |b| {
        b.iter(|| walk(&p16.view(black_box(s16), 1).unwrap(), N))
    });
    g.bench_function("paged1", |b| {
        b.iter(|| walk(&p1.view(black_box(s1), 1).unwrap(), N))
    });
    g.finish();

    let q: Vec<F32> = (0..9 * 64)
        .map(|j| F32::from_bits(0x3D00_0000 + j as u32 * 4099))
        .collect();
    let scale = F32::from_bits(0x3E00_0000); // 1/8
    let mut scores = vec![F32::ZERO; N];
    let mut out = vec![F32::ZERO; 9 * 64];
    let mut g = c.benchmark_group("attention");
    let mut run = |name: &str, v: &dyn Fn(&mut [F32], &mut [F32])| {
        g.bench_function(name, |b| b.iter(|| v(&mut scores, &mut out)));
    };
    let vc = cc.view(sc, 0).unwrap();
    let v16 = p16.view(s16, 0).unwrap();
    run("contiguous", &|s, o| {
        attention(&q, &vc, 512, 9, 3, 64, scale, s, o).unwrap()
    });
    run("paged16", &|s, o| {
        attention(&q, &v16, 512, 9, 3, 64, scale, s, o).unwrap()
    });
    g.finish();

    // A decode step's reserve for 8 sequences, then free: 8 forks of a
    // 1001-token prompt (each copies its shared tail page) vs 8 new sequences
    // (each takes a zeroed fresh page).
    let mut buf = vec![0u8; PagedCache::bytes_required(&cfg(16)).unwrap()];
    let mut p = PagedCache::new(&mut Arena::new(&mut buf), cfg(16)).unwrap();
    let root = fill(&mut p, 1001);
    let mut g = c.benchmark_group("reserve");
    g.bench_function("forked8_cow", |b| {
        b.iter(|| {
            let ids: Vec<SeqId> = (0..8).map(|_| p.fork(root).unwrap()).collect();
            let reqs: Vec<(SeqId, usize)> = ids.iter().map(|&s| (s, 1)).collect();
            p.reserve(&reqs).unwrap();
            ids.into_iter().for_each(|s| p.free(s).unwrap());
        })
    });
    g.bench_function("new8_fresh", |b| {
        b.iter(|| {
            let ids: Vec<SeqId> = (0..8).map(|_| p.new_seq().unwrap()).collect();
            let reqs: Vec<(SeqId, usize)> = ids.iter().map(|&s| (s, 1)).collect();
            p.reserve(&reqs).unwrap();
            ids.into_iter().for_each(|s| p.free(s).unwrap());
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
