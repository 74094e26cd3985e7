//! The machine's plain streaming-read bandwidth: the sum of the `u64`s of a
//! 256 MiB buffer (far larger than any cache), on one thread and split in
//! two halves over two threads. It is the yardstick for the weight bytes
//! per second of the one-input-row (decode) kernels, which read each
//! weight byte once: `cargo bench --bench kernels -- kquant_m1` reports
//! theirs in the same unit (criterion's `Throughput::Bytes`), so a
//! kernel at this figure is bound by memory, not by its arithmetic.
//!
//! The loop is the simplest one the compiler vectorizes (four independent
//! `u64` sums, 32 bytes a step); no prefetch hints, no non-temporal loads.
//!
//! Run: `cargo bench --bench stream`.

use criterion::{BenchmarkId, Criterion, Throughput, black_box};
use std::time::Duration;

/// Bytes streamed per iteration.
const BYTES: usize = 256 << 20;

/// The wrapping sum of `v` in four independent lanes.
fn sum(v: &[u64]) -> u64 {
    let mut s = [0u64; 4];
    for c in v.chunks_exact(4) {
        for (s, &x) in s.iter_mut().zip(c) {
            *s = s.wrapping_add(x);
        }
    }
    s.iter().fold(0, |a, &b| a.wrapping_add(b))
}

fn bench(c: &mut Criterion) {
    // Non-zero contents, so that no page is the shared zero page.
    let buf: Vec<u64> = (0..BYTES / 8)
        .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    let mut g = c.benchmark_group("stream_read");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .throughput(Throughput::Bytes(BYTES as u64));
    for threads in [1usize, 2] {
        g.bench_function(BenchmarkId::new("sum_u64", format!("{threads}t")), |b| {
            b.iter(|| {
                let part = buf.len() / threads;
                std::thread::scope(|s| {
                    let hs: Vec<_> = buf
                        .chunks(part)
                        .map(|p| s.spawn(move || sum(black_box(p))))
                        .collect();
                    hs.into_iter()
                        .fold(0u64, |a, h| a.wrapping_add(h.join().unwrap()))
                })
            })
        });
    }
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
