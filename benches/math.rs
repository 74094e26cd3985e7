//! ns/op of the elementary functions: detllm (integer fixed point) against
//! `libm` (pure Rust, hardware floats), the host's libm through `std`
//! (glibc on Linux) and CORE-MATH (hardware doubles). Each benchmark maps
//! 1024 inputs of the range the model uses; divide the time by 1024.
//!
//! Run: `cargo bench --features std,oracle --bench math`

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use detllm::F32;

const N: usize = 1024;

/// `N` inputs evenly spread over `[lo, hi]`, as bits.
fn spread(lo: f32, hi: f32) -> Vec<u32> {
    (0..N)
        .map(|i| (lo + (hi - lo) * (i as f32 + 0.37) / N as f32).to_bits())
        .collect()
}

type Fns = (
    &'static str,
    Vec<u32>,
    fn(F32) -> F32,
    fn(f32) -> f32,
    fn(f32) -> f32,
    fn(f32) -> f32,
);

fn bench(c: &mut Criterion) {
    let cases: Vec<Fns> = vec![
        (
            "exp",
            spread(-30.0, 10.0),
            F32::exp,
            libm::expf,
            f32::exp,
            core_math::expf,
        ),
        (
            "exp2",
            spread(-30.0, 10.0),
            F32::exp2,
            libm::exp2f,
            f32::exp2,
            core_math::exp2f,
        ),
        (
            "ln",
            spread(1e-3, 1e3),
            F32::ln,
            libm::logf,
            f32::ln,
            core_math::logf,
        ),
        (
            "sin",
            spread(0.0, 4096.0),
            F32::sin,
            libm::sinf,
            f32::sin,
            core_math::sinf,
        ),
        (
            "cos",
            spread(0.0, 4096.0),
            F32::cos,
            libm::cosf,
            f32::cos,
            core_math::cosf,
        ),
    ];
    for (name, xs, ours, lm, st, cm) in cases {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(N as u64));
        g.bench_function(BenchmarkId::new("detllm", N), |b| {
            b.iter(|| {
                let mut acc = 0u32;
                for &x in black_box(&xs) {
                    acc ^= ours(F32::from_bits(x)).to_bits();
                }
                acc
            })
        });
        for (label, f) in [("libm", lm), ("std", st), ("core-math", cm)] {
            g.bench_function(BenchmarkId::new(label, N), |b| {
                b.iter(|| {
                    let mut acc = 0u32;
                    for &x in black_box(&xs) {
                        acc ^= f(f32::from_bits(x)).to_bits();
                    }
                    acc
                })
            });
        }
        g.finish();
    }
    // sin_cos: one reduction for both.
    let xs = spread(0.0, 4096.0);
    let mut g = c.benchmark_group("sin_cos");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("detllm", N), |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &x in black_box(&xs) {
                let (s, c) = F32::from_bits(x).sin_cos();
                acc ^= s.to_bits() ^ c.to_bits();
            }
            acc
        })
    });
    g.bench_function(BenchmarkId::new("core-math", N), |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &x in black_box(&xs) {
                let (s, c) = core_math::sincosf(f32::from_bits(x));
                acc ^= s.to_bits() ^ c.to_bits();
            }
            acc
        })
    });
    g.finish();
    // powf at the RoPE use and at generic arguments.
    let pairs: Vec<(u32, u32)> = (0..N)
        .map(|i| {
            let x = 0.01 + 100.0 * (i as f32 + 0.5) / N as f32;
            let y = -8.0 + 16.0 * ((i * 7919 % N) as f32 + 0.5) / N as f32;
            (x.to_bits(), y.to_bits())
        })
        .collect();
    let mut g = c.benchmark_group("powf");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("detllm", N), |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &(x, y) in black_box(&pairs) {
                acc ^= F32::from_bits(x).powf(F32::from_bits(y)).to_bits();
            }
            acc
        })
    });
    for (label, f) in [
        ("libm", libm::powf as fn(f32, f32) -> f32),
        ("std", f32::powf),
        ("core-math", core_math::powf),
    ] {
        g.bench_function(BenchmarkId::new(label, N), |b| {
            b.iter(|| {
                let mut acc = 0u32;
                for &(x, y) in black_box(&pairs) {
                    acc ^= f(f32::from_bits(x), f32::from_bits(y)).to_bits();
                }
                acc
            })
        });
    }
    g.finish();
    // silu over the activation range.
    let xs = spread(-20.0, 20.0);
    let mut g = c.benchmark_group("silu");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function(BenchmarkId::new("detllm", N), |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &x in black_box(&xs) {
                acc ^= detllm::math::silu(F32::from_bits(x)).to_bits();
            }
            acc
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
