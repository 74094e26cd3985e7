//! Soft binary32 speed: detllm's `F32` against the host hardware,
//! compiler-builtins' soft-float routines (`__addsf3`, `__mulsf3`,
//! `__divsf3`, linked into every Rust binary on x86_64 Linux) and Berkeley
//! SoftFloat (with feature `oracle`), all in one run.
//!
//! * `tp/<op>/<impl>`: throughput over 1024-element arrays (time per
//!   iteration / 1024 = ns per op; criterion prints it as elements/s).
//! * `lat/<op>/<impl>`: latency of a dependent chain of 1024 ops; each input
//!   takes 16 low bits from the previous result so values stay random.
//!
//! Run: `cargo bench --features std,oracle --bench float`.
use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main,
};
use detllm::F32;
use std::time::Duration;

const N: usize = 1024;

#[cfg(all(feature = "oracle", target_arch = "x86_64", target_os = "linux"))]
mod builtins {
    unsafe extern "C" {
        fn __addsf3(a: f32, b: f32) -> f32;
        fn __mulsf3(a: f32, b: f32) -> f32;
        fn __divsf3(a: f32, b: f32) -> f32;
    }
    #[inline]
    pub fn add(a: u32, b: u32) -> u32 {
        // SAFETY: a pure function of two floats.
        unsafe { __addsf3(f32::from_bits(a), f32::from_bits(b)) }.to_bits()
    }
    pub fn mul(a: u32, b: u32) -> u32 {
        // SAFETY: a pure function of two floats.
        unsafe { __mulsf3(f32::from_bits(a), f32::from_bits(b)) }.to_bits()
    }
    pub fn div(a: u32, b: u32) -> u32 {
        // SAFETY: a pure function of two floats.
        unsafe { __divsf3(f32::from_bits(a), f32::from_bits(b)) }.to_bits()
    }
}

#[cfg(all(feature = "oracle", target_arch = "x86_64", target_os = "linux"))]
mod sf {
    use softfloat_wrapper::{F32, Float, RoundingMode::TiesToEven as RNE};
    pub fn add(a: u32, b: u32) -> u32 {
        F32::from_bits(a).add(F32::from_bits(b), RNE).to_bits()
    }
    pub fn mul(a: u32, b: u32) -> u32 {
        F32::from_bits(a).mul(F32::from_bits(b), RNE).to_bits()
    }
    pub fn div(a: u32, b: u32) -> u32 {
        F32::from_bits(a).div(F32::from_bits(b), RNE).to_bits()
    }
    pub fn sqrt(a: u32, _: u32) -> u32 {
        F32::from_bits(a).sqrt(RNE).to_bits()
    }
}

mod ours {
    use detllm::F32;
    #[inline]
    pub fn add(a: u32, b: u32) -> u32 {
        (F32::from_bits(a) + F32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn mul(a: u32, b: u32) -> u32 {
        (F32::from_bits(a) * F32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn div(a: u32, b: u32) -> u32 {
        (F32::from_bits(a) / F32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn sqrt(a: u32, _: u32) -> u32 {
        F32::from_bits(a).sqrt().to_bits()
    }
}

/// The previous `F32::sqrt` (commit a792450: linearly interpolated
/// reciprocal-sqrt table, one Newton step, final fix), copied here so one
/// run compares it with the current quadratic-table version. Positive
/// normal inputs only take its fast path; the rest go to `F32::sqrt`.
mod sqrt_v1 {
    static RSQRT: [u64; 512] = rsqrt_table();

    const fn rsqrt_table() -> [u64; 512] {
        let mut t = [0u64; 512];
        let mut i = 128;
        while i < 512 {
            let a = ((1u128 << 67) / i as u128).isqrt() as u64;
            let b = ((1u128 << 67) / (i as u128 + 1)).isqrt() as u64;
            t[i] = a | ((a - b) << 32);
            i += 1;
        }
        t
    }

    #[inline(always)]
    fn sqrt_half_round(m: u64) -> u32 {
        let entry = RSQRT[(m >> 41) as usize & 511];
        let frac = (m >> 25) & 0xFFFF;
        let y = (entry & 0xFFFF_FFFF) - (((entry >> 32) * frac) >> 16);
        let mi = m as i64;
        let s = (((m >> 20) * y) >> 34) as i64;
        let s = (s + (((mi - s * s) * (y >> 8) as i64) >> 47)) as u64;
        let t = s | 1;
        ((s >> 1) + (t * t <= m) as u64) as u32
    }

    #[inline]
    pub fn sqrt(x: u32, _: u32) -> u32 {
        if x.wrapping_sub(0x80_0000) < 0x7F80_0000 - 0x80_0000 {
            let m = (x & 0x7F_FFFF) | 0x80_0000;
            let e = (x >> 23) as i32 - 150;
            let odd = (e & 1) as u32;
            let q = sqrt_half_round((m as u64) << (26 - odd));
            let field = ((((e + 1) >> 1) + 137) as u32) << 23;
            return field + q;
        }
        detllm::F32::from_bits(x).sqrt().to_bits()
    }
}

mod hw {
    #[inline]
    pub fn add(a: u32, b: u32) -> u32 {
        (f32::from_bits(a) + f32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn mul(a: u32, b: u32) -> u32 {
        (f32::from_bits(a) * f32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn div(a: u32, b: u32) -> u32 {
        (f32::from_bits(a) / f32::from_bits(b)).to_bits()
    }
    #[inline]
    pub fn sqrt(a: u32, _: u32) -> u32 {
        f32::from_bits(a).sqrt().to_bits()
    }
}

/// Normal operands with random signs and exponents in 2^-16..2^16
/// (positive for sqrt): the common case a model's arithmetic hits.
fn operands(seed: u64, positive: bool) -> Vec<u32> {
    let mut s = seed;
    (0..N)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (s >> 32) as u32;
            let sign = if positive { 0 } else { r & 0x8000_0000 };
            let e = 111 + (r >> 23) % 32;
            sign | (e << 23) | (r & 0x7F_FFFF)
        })
        .collect()
}

/// CPU time of the benchmarking thread (`CLOCK_THREAD_CPUTIME_ID`), reported
/// per element: on a shared machine wall time counts other processes' turns.
/// Off Unix it falls back to wall time.
struct OpTime;

#[cfg(unix)]
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass and nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(not(unix))]
fn now_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

impl Measurement for OpTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        now_ns()
    }
    fn end(&self, t0: u64) -> u64 {
        now_ns() - t0
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &PerOp
    }
}

/// Prints nanoseconds per element (every benchmark here does `N` ops).
struct PerOp;

impl ValueFormatter for PerOp {
    fn scale_values(&self, _typical: f64, values: &mut [f64]) -> &'static str {
        for v in values {
            *v /= N as f64;
        }
        "ns/op"
    }
    fn scale_throughputs(&self, _typical: f64, t: &Throughput, values: &mut [f64]) -> &'static str {
        let n = match t {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => *n,
        };
        for v in values {
            *v = n as f64 * 1e3 / *v;
        }
        "Mop/s"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

/// Throughput: `out[i] = f(a[i], b[i])` over the arrays.
fn tp_one<F: Fn(u32, u32) -> u32>(
    g: &mut BenchmarkGroup<'_, OpTime>,
    name: &str,
    (a, b): (&[u32], &[u32]),
    f: F,
) {
    let mut out = vec![0u32; N];
    g.bench_function(BenchmarkId::from_parameter(name), |bench| {
        bench.iter(|| {
            let (a, b) = (black_box(a), black_box(b));
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f(x, y);
            }
            black_box(&out);
        })
    });
}

/// Latency: each op's first input depends on the previous result.
fn lat_one<F: Fn(u32, u32) -> u32>(
    g: &mut BenchmarkGroup<'_, OpTime>,
    name: &str,
    (a, b): (&[u32], &[u32]),
    f: F,
) {
    g.bench_function(BenchmarkId::from_parameter(name), |bench| {
        bench.iter(|| {
            let (a, b) = (black_box(a), black_box(b));
            let mut x = 0u32;
            for (&p, &q) in a.iter().zip(b) {
                x = f(p ^ (x & 0xFFFF), q);
            }
            black_box(x)
        })
    });
}

/// Both groups for one op; every implementation is a distinct function item,
/// so each loop is monomorphised and inlined (no call through a pointer).
macro_rules! bench_op {
    ($c:expr, $op:ident, $($name:literal => $f:path),+ $(,)?) => {{
        let op = stringify!($op);
        let a = operands(1, op == "sqrt");
        let b = operands(2, false);
        let mut g = $c.benchmark_group(format!("tp/{op}"));
        g.throughput(Throughput::Elements(N as u64));
        $( tp_one(&mut g, $name, (&a, &b), $f); )+
        g.finish();
        let mut g = $c.benchmark_group(format!("lat/{op}"));
        g.throughput(Throughput::Elements(N as u64));
        $( lat_one(&mut g, $name, (&a, &b), $f); )+
        g.finish();
    }};
}

#[cfg(all(feature = "oracle", target_arch = "x86_64", target_os = "linux"))]
fn benches(c: &mut Criterion<OpTime>) {
    bench_op!(c, add, "detllm" => ours::add, "hardware" => hw::add,
        "compiler-builtins" => builtins::add, "softfloat" => sf::add);
    bench_op!(c, mul, "detllm" => ours::mul, "hardware" => hw::mul,
        "compiler-builtins" => builtins::mul, "softfloat" => sf::mul);
    bench_op!(c, div, "detllm" => ours::div, "hardware" => hw::div,
        "compiler-builtins" => builtins::div, "softfloat" => sf::div);
    bench_op!(c, sqrt, "detllm" => ours::sqrt, "detllm-v1" => sqrt_v1::sqrt,
        "hardware" => hw::sqrt, "softfloat" => sf::sqrt);
    black_box(F32::ONE);
}

/// Without the oracles (or off x86_64 Linux): detllm against the hardware.
#[cfg(not(all(feature = "oracle", target_arch = "x86_64", target_os = "linux")))]
fn benches(c: &mut Criterion<OpTime>) {
    bench_op!(c, add, "detllm" => ours::add, "hardware" => hw::add);
    bench_op!(c, mul, "detllm" => ours::mul, "hardware" => hw::mul);
    bench_op!(c, div, "detllm" => ours::div, "hardware" => hw::div);
    bench_op!(c, sqrt, "detllm" => ours::sqrt, "detllm-v1" => sqrt_v1::sqrt,
        "hardware" => hw::sqrt);
    black_box(F32::ONE);
}

criterion_group! {
    name = float;
    config = Criterion::default()
        .with_measurement(OpTime)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200))
        .sample_size(20);
    targets = benches
}
criterion_main!(float);
