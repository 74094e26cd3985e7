//! Sampling one logits row: the sampler against the full-sort reference it
//! replaced (`tests/support/sample_ref.rs`, the same tokens, tested there),
//! at SmolLM2's vocabulary (49,152) and Qwen2.5's (151,936):
//! * `defaults/*`: llama.cpp's default chain (`SamplingParams::LLAMA_DEFAULTS`:
//!   temperature 0.8, top-k 40, top-p 0.95, min-p 0.05) — the bounded-heap
//!   selection of 40 against a sort of every candidate;
//! * `no_top_k/*`: the same without top-k (every candidate ordered either
//!   way: an integer-key sort against a comparator sort).
//!
//! * `logprobs/*`: [`detllm::sched::logprobs`] of one sampled token with the
//!   top 5 (what the server computes per token when a request asks for
//!   logprobs), at temperature 1 and 0.8.
//!
//! The row is pseudo-random logits shaped like a model's (most mass in a
//! bell around 0, a few dozen tokens well above it). Both variants run in
//! the same process; read the result as the ratio of their times.
//!
//! Run: `cargo bench --bench sample`.

use criterion::{BenchmarkId, Criterion, black_box, criterion_group, criterion_main};
use detllm::sample::{Sampler, SamplingParams, SplitMix64};
use detllm::sched::{TopLogprob, logprobs};
use detllm::{Arena, F32};
use std::time::Duration;

#[path = "../tests/support/sample_ref.rs"]
#[allow(dead_code)]
mod sample_ref;

/// `n` logits: a sum of four uniforms in [-4, 4) (a bell around 0) plus,
/// for one token in 1024, a boost of up to 8.
fn row(n: usize) -> Vec<F32> {
    let mut rng = SplitMix64::new(n as u64);
    (0..n)
        .map(|_| {
            let mut sig: i128 = 0;
            for _ in 0..4 {
                sig += (rng.next_u64() >> 52) as i128 - 2048; // [-2048, 2048)
            }
            let r = rng.next_u64();
            if r.is_multiple_of(1024) {
                sig += ((r >> 20) % 8192) as i128 * 4;
            }
            F32::from_i128_scaled(sig, -11)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    for n in [49_152usize, 151_936] {
        let logits = row(n);
        let mut buf = vec![0u8; Sampler::bytes_required(n).unwrap()];
        let mut arena = Arena::new(&mut buf);
        let mut sampler = Sampler::new(&mut arena, n).unwrap();
        for (name, params) in [
            ("defaults", SamplingParams::LLAMA_DEFAULTS),
            (
                "no_top_k",
                SamplingParams {
                    top_k: 0,
                    ..SamplingParams::LLAMA_DEFAULTS
                },
            ),
        ] {
            let mut g = c.benchmark_group(name);
            g.measurement_time(Duration::from_secs(3)).sample_size(20);
            g.bench_function(BenchmarkId::new("reference", n), |b| {
                let mut rng = SplitMix64::new(1);
                b.iter(|| sample_ref::sample(black_box(&logits), &params, &[], &mut rng))
            });
            g.bench_function(BenchmarkId::new("sampler", n), |b| {
                let mut rng = SplitMix64::new(1);
                b.iter(|| {
                    sampler
                        .sample(black_box(&logits), &params, &[], &mut rng)
                        .unwrap()
                })
            });
            g.finish();
        }
        let mut g = c.benchmark_group("logprobs");
        g.measurement_time(Duration::from_secs(3)).sample_size(20);
        let mut work = vec![F32::ZERO; n];
        let mut top = [TopLogprob::default(); 5];
        for (name, temperature) in [("t1", F32::ONE), ("t0.8", F32::from_bits(0x3F4C_CCCD))] {
            let params = SamplingParams {
                temperature,
                ..SamplingParams::LLAMA_DEFAULTS
            };
            g.bench_function(BenchmarkId::new(name, n), |b| {
                b.iter(|| {
                    logprobs(black_box(&logits), &params, &[], 7, &mut work, &mut top).unwrap()
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
