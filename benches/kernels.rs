//! Matmul speed per weight format: detllm's exact kernels (`detllm`: the
//! best path; `detllm_reference`: `dot_row` per cell, the path every format
//! without a blocked kernel takes) against a hardware-f32 implementation of
//! llama.cpp's per-block formula (`llama_f32`, generic C path: integer block
//! sum, `sumf += (dx*dy)*sumi + m*s` / `sumi*(dx*dy)`), single thread,
//! M = 1 and M = 8 (Q4_K and Q6_K also M = 32). Q4_1 and Q8_0 on SmolLM2-135M shapes, Q5_0 on
//! Qwen2.5-0.5B shapes (most of its Q4_K_M file is Q5_0), Q4_K, Q5_K and Q6_K on
//! the FFN-down shapes of Qwen2.5-0.5B and Gemma 3 270M (the K-quant
//! formula is written per 32-sub-block against the same 32-blocks of x,
//! not llama.cpp's 256-element Q8_K activations). Throughput is in
//! multiply-adds (M · n_in · n_out) per second; ns/MAC = 1 / throughput.
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench --features std --bench kernels`
//! (`DETLLM_BENCH_FILTER=q4_1` etc. goes to criterion as a filter argument).
#![allow(clippy::needless_range_loop)] // the baseline mirrors the C loops
use criterion::{BenchmarkId, Criterion, Throughput, black_box};
use detllm::quant::fast::{KernelPath, rows_kernel_with};
use detllm::quant::{ActKind, GgmlType, QActs, QMatrix};
use detllm::{Arena, F32, Serial, kernels::matmul};
use std::time::Duration;

const SMOL_SHAPES: [(usize, usize); 5] = [
    (576, 576),
    (576, 192),
    (576, 1536),
    (1536, 576),
    (576, 49152),
];

/// K-quant rows (a multiple of 256): Qwen2.5-0.5B's FFN down, Gemma 3
/// 270M's FFN down.
const K_SHAPES: [(usize, usize); 2] = [(4864, 896), (2048, 640)];

/// Qwen2.5-0.5B: q/o, k/v, FFN up/gate, FFN down.
const QWEN_SHAPES: [(usize, usize); 4] = [(896, 896), (896, 128), (896, 4864), (4864, 896)];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

fn f16(x: f32) -> u16 {
    F32::from_bits(x.to_bits()).to_f16_bits()
}

/// Model-like weights: d ≈ 0.01·(1..2), m ≈ −8d for Q4_1.
fn weights(ty: GgmlType, n_in: usize, n_out: usize, rng: &mut Rng) -> Vec<u8> {
    let mut w = vec![0u8; ty.row_bytes(n_in).unwrap() * n_out];
    for b in w.chunks_mut(ty.type_size()) {
        for x in b.iter_mut() {
            *x = rng.next() as u8;
        }
        let d = 0.01 * (1.5 + 0.5 * rng.unit());
        let at = if ty == GgmlType::Q6_K { 208 } else { 0 };
        b[at..at + 2].copy_from_slice(&f16(d).to_le_bytes());
        if ty == GgmlType::Q4_1 {
            b[2..4].copy_from_slice(&f16(-8.0 * d).to_le_bytes());
        }
        if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
            b[2..4].copy_from_slice(&f16(0.5 * d).to_le_bytes());
        }
    }
    w
}

/// llama.cpp's generic dot, hardware f32, f16 scales from a lookup table.
struct Llama {
    lut: Vec<f32>,
}

impl Llama {
    fn new() -> Self {
        let lut = (0..=u16::MAX)
            .map(|h| f32::from_bits(F32::from_f16_bits(h).to_bits()))
            .collect();
        Llama { lut }
    }
    fn h(&self, b: &[u8]) -> f32 {
        self.lut[u16::from_le_bytes([b[0], b[1]]) as usize]
    }
    /// Q8_1 blocks of x, hardware f32 reference quantizer: (d, s, qs).
    fn quantize(&self, x: &[f32]) -> Vec<(f32, f32, [i8; 32])> {
        x.chunks(32)
            .map(|b| {
                let amax = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                let mut qs = [0i8; 32];
                let mut sum = 0;
                for (q, v) in qs.iter_mut().zip(b) {
                    *q = (v * id).round() as i8;
                    sum += *q as i32;
                }
                let dh = self.lut[f16(d) as usize];
                (dh, self.lut[f16(sum as f32 * d) as usize], qs)
            })
            .collect()
    }
    /// The K-quant formula per 32-sub-block `j` against the 32-blocks of
    /// x: Q4_K (Q5_K with 5-bit `q`) `sumf += d·dy·sc·Σ q·y − dmin·dy·mn·Σ y`, Q6_K
    /// `sumf += d·dy·(sc_2j·Σ_16 q·y + sc_2j+1·Σ_16 q·y)`.
    fn kquant_dot(&self, ty: GgmlType, row: &[u8], x: &[(f32, f32, [i8; 32])]) -> f32 {
        let mut sumf = 0f32;
        for (b, ys) in row.chunks(ty.type_size()).zip(x.chunks(8)) {
            for (j, y) in ys.iter().enumerate() {
                if ty != GgmlType::Q6_K {
                    let s = &b[4..16];
                    let (sc, mn) = if j < 4 {
                        (s[j] & 63, s[j + 4] & 63)
                    } else {
                        (
                            (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4),
                            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
                        )
                    };
                    // Q5_K: qh at 16 (bit j of qh[l] adds 16), nibbles at 48.
                    let q5 = ty == GgmlType::Q5_K;
                    let at = if q5 { 48 } else { 16 } + 32 * (j / 2);
                    let q = &b[at..at + 32];
                    let (mut sumq, mut bs) = (0i32, 0i32);
                    for l in 0..32 {
                        let mut v = if j % 2 == 0 { q[l] & 15 } else { q[l] >> 4 };
                        if q5 {
                            v |= ((b[16 + l] >> j) & 1) << 4;
                        }
                        sumq += v as i32 * y.2[l] as i32;
                        bs += y.2[l] as i32;
                    }
                    sumf += self.h(b) * y.0 * (sc as i32 * sumq) as f32
                        - self.h(&b[2..]) * y.0 * (mn as i32 * bs) as f32;
                } else {
                    let (h, k) = (j / 4, j % 4);
                    let mut sumi = 0i32;
                    for g in 0..2 {
                        let mut sq = 0i32;
                        for l in 16 * g..16 * g + 16 {
                            let ql = b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2)) & 15;
                            let qh = (b[128 + 32 * h + l] >> (2 * k)) & 3;
                            sq += ((ql | qh << 4) as i32 - 32) * y.2[l] as i32;
                        }
                        sumi += b[192 + 2 * j + g] as i8 as i32 * sq;
                    }
                    sumf += self.h(&b[208..]) * y.0 * sumi as f32;
                }
            }
        }
        sumf
    }

    fn matmul(
        &self,
        ty: GgmlType,
        w: &[u8],
        n_in: usize,
        xq: &[Vec<(f32, f32, [i8; 32])>],
        out: &mut [f32],
    ) {
        let rb = ty.row_bytes(n_in).unwrap();
        let n_out = w.len() / rb;
        for (o, row) in w.chunks(rb).enumerate() {
            for (m, x) in xq.iter().enumerate() {
                if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
                    out[m * n_out + o] = self.kquant_dot(ty, row, x);
                    continue;
                }
                let mut sumf = 0f32;
                for (b, y) in row.chunks(ty.type_size()).zip(x) {
                    if ty == GgmlType::Q5_0 {
                        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
                        let mut sumi = 0i32;
                        for j in 0..16 {
                            let lo = (b[6 + j] & 15) as i32 | (((qh >> j) & 1) << 4) as i32;
                            let hi = (b[6 + j] >> 4) as i32 | (((qh >> (j + 16)) & 1) << 4) as i32;
                            sumi += (lo - 16) * y.2[j] as i32 + (hi - 16) * y.2[j + 16] as i32;
                        }
                        sumf += sumi as f32 * (self.h(b) * y.0);
                    } else if ty == GgmlType::Q4_1 {
                        let qs = &b[4..20];
                        let mut sumi = 0i32;
                        for j in 0..16 {
                            sumi += (qs[j] & 15) as i32 * y.2[j] as i32
                                + (qs[j] >> 4) as i32 * y.2[j + 16] as i32;
                        }
                        sumf += (self.h(b) * y.0) * sumi as f32 + self.h(&b[2..]) * y.1;
                    } else {
                        let mut sumi = 0i32;
                        for j in 0..32 {
                            sumi += b[2 + j] as i8 as i32 * y.2[j] as i32;
                        }
                        sumf += sumi as f32 * (self.h(b) * y.0);
                    }
                }
                out[m * n_out + o] = sumf;
            }
        }
    }
}

/// A weight format, its group name and its shapes `(n_in, n_out)`.
type Format = (GgmlType, &'static str, &'static [(usize, usize)]);

fn bench(c: &mut Criterion) {
    let llama = Llama::new();
    let mut rng = Rng(1);
    let mut arena_buf = vec![0u8; 1 << 20];
    let formats: [Format; 6] = [
        (GgmlType::Q4_1, "q4_1", &SMOL_SHAPES),
        (GgmlType::Q8_0, "q8_0", &SMOL_SHAPES),
        (GgmlType::Q5_0, "q5_0", &QWEN_SHAPES),
        (GgmlType::Q4_K, "q4_k", &K_SHAPES),
        (GgmlType::Q5_K, "q5_k", &K_SHAPES),
        (GgmlType::Q6_K, "q6_k", &K_SHAPES),
    ];
    for (ty, name, shapes) in formats {
        let mut g = c.benchmark_group(format!("matmul_{name}"));
        g.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1200))
            .sample_size(10);
        for &(n_in, n_out) in shapes {
            let w = weights(ty, n_in, n_out, &mut rng);
            let qm = QMatrix::new(ty, n_in, n_out, &w).unwrap();
            for m in [1usize, 8, 32] {
                let x: Vec<f32> = (0..m * n_in).map(|_| rng.unit()).collect();
                let xs: Vec<F32> = x.iter().map(|v| F32::from_bits(v.to_bits())).collect();
                let mut arena = Arena::new(&mut arena_buf);
                let mut acts = QActs::new(&mut arena, ActKind::Q8, m, n_in).unwrap();
                acts.quantize(&xs).unwrap();
                let mut out = vec![F32::ZERO; m * n_out];
                let mut scratch = vec![F32::ZERO; matmul::matmul_scratch_len(m, n_out)];
                g.throughput(Throughput::Elements((m * n_in * n_out) as u64));
                let id = format!("{n_in}x{n_out}/M{m}");
                g.bench_function(BenchmarkId::new("detllm", &id), |b| {
                    b.iter(|| {
                        matmul::matmul(&Serial, &qm, black_box(&acts), &mut out, &mut scratch)
                            .unwrap()
                    })
                });
                let mut rout = vec![F32::ZERO; m * n_out];
                g.bench_function(BenchmarkId::new("detllm_reference", &id), |b| {
                    b.iter(|| {
                        rows_kernel_with(&qm, 0, black_box(&acts), &mut rout, KernelPath::Reference)
                    })
                });
                let xq: Vec<_> = x.chunks(n_in).map(|r| llama.quantize(r)).collect();
                let mut lout = vec![0f32; m * n_out];
                g.bench_function(BenchmarkId::new("llama_f32", &id), |b| {
                    b.iter(|| llama.matmul(ty, &w, n_in, black_box(&xq), &mut lout))
                });
            }
        }
        g.finish();
    }
}

/// The K-quant one-input-row (decode) kernels in weight bytes per second,
/// to set against `benches/stream.rs`'s plain streaming read: Q4_K, Q5_K and
/// Q6_K at M = 1 over Qwen2.5-1.5B's FFN shapes (1536 → 8960, 8960 →
/// 1536), the best path (`auto`) and the portable body (`portable`), one
/// thread. Each iteration takes the next of [`STREAM_COPIES`] copies of the
/// matrix (together larger than the last-level cache), so the weights come
/// from memory as in a model's decode step.
fn bench_kquant_m1(c: &mut Criterion) {
    const STREAM_COPIES: usize = 8;
    let mut rng = Rng(7);
    let mut arena_buf = vec![0u8; 1 << 20];
    let mut g = c.benchmark_group("kquant_m1");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    let formats = [
        (GgmlType::Q4_K, "q4_k"),
        (GgmlType::Q5_K, "q5_k"),
        (GgmlType::Q6_K, "q6_k"),
    ];
    for (ty, name) in formats {
        for (n_in, n_out) in [(1536usize, 8960usize), (8960, 1536)] {
            let copies: Vec<Vec<u8>> = (0..STREAM_COPIES)
                .map(|_| weights(ty, n_in, n_out, &mut rng))
                .collect();
            let qms: Vec<QMatrix<'_>> = copies
                .iter()
                .map(|w| QMatrix::new(ty, n_in, n_out, w).unwrap())
                .collect();
            let xs: Vec<F32> = (0..n_in)
                .map(|_| F32::from_bits(rng.unit().to_bits()))
                .collect();
            let mut arena = Arena::new(&mut arena_buf);
            let mut acts = QActs::new(&mut arena, ActKind::Q8, 1, n_in).unwrap();
            acts.quantize(&xs).unwrap();
            let mut out = vec![F32::ZERO; n_out];
            g.throughput(Throughput::Bytes(copies[0].len() as u64));
            for (path, pname) in [
                (KernelPath::Auto, "auto"),
                (KernelPath::Portable, "portable"),
            ] {
                let id = format!("{name}/{n_in}x{n_out}");
                let mut k = 0;
                g.bench_function(BenchmarkId::new(pname, &id), |b| {
                    b.iter(|| {
                        k = (k + 1) % STREAM_COPIES;
                        rows_kernel_with(&qms[k], 0, black_box(&acts), &mut out, path)
                    })
                });
            }
        }
    }
    g.finish();
}

/// The K-quant kernels with several input rows, weights streamed from
/// memory as in [`bench_kquant_m1`] (Q4_K and Q6_K, 1536 → 8960, one
/// thread): `m1x8`, eight calls of one input row each (eight single-row
/// decode steps), against `m2`, `m4`, `m8`, one call of two, four, eight
/// (a batched decode or speculative verify step: every weight load shared
/// by them), and `m64`, one call of 64 (a prefill chunk); throughput in
/// multiply-adds (input rows × weights).
fn bench_kquant_rows(c: &mut Criterion) {
    const STREAM_COPIES: usize = 8;
    let (n_in, n_out) = (1536usize, 8960usize);
    let mut rng = Rng(9);
    let mut arena_buf = vec![0u8; 1 << 20];
    let mut g = c.benchmark_group("kquant_rows");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    for (ty, name) in [(GgmlType::Q4_K, "q4_k"), (GgmlType::Q6_K, "q6_k")] {
        let copies: Vec<Vec<u8>> = (0..STREAM_COPIES)
            .map(|_| weights(ty, n_in, n_out, &mut rng))
            .collect();
        let qms: Vec<QMatrix<'_>> = copies
            .iter()
            .map(|w| QMatrix::new(ty, n_in, n_out, w).unwrap())
            .collect();
        let runs = [
            (1usize, 8usize, "m1x8"),
            (2, 1, "m2"),
            (4, 1, "m4"),
            (8, 1, "m8"),
            (64, 1, "m64"),
        ];
        for (m, calls, id) in runs {
            let xs: Vec<F32> = (0..m * n_in)
                .map(|_| F32::from_bits(rng.unit().to_bits()))
                .collect();
            let mut arena = Arena::new(&mut arena_buf);
            let mut acts = QActs::new(&mut arena, ActKind::Q8, m, n_in).unwrap();
            acts.quantize(&xs).unwrap();
            let mut out = vec![F32::ZERO; m * n_out];
            g.throughput(Throughput::Elements((m * calls * n_in * n_out) as u64));
            let mut k = 0;
            g.bench_function(BenchmarkId::new(name, id), |b| {
                b.iter(|| {
                    for _ in 0..calls {
                        k = (k + 1) % STREAM_COPIES;
                        let w = &qms[k];
                        rows_kernel_with(w, 0, black_box(&acts), &mut out, KernelPath::Auto);
                    }
                })
            });
        }
    }
    g.finish();
}

/// The Q4_1 / Q5_0 / Q8_0 blocked kernels at batched-decode widths: eight
/// one-row calls (`m1x8`, eight decode steps) against one call of M = 2,
/// 4, 8, 16 input rows (a step of several sequences, a speculative verify
/// step) and M = 64 (prefill), on Qwen2.5-0.5B's FFN shapes (Q5_0, Q8_0)
/// and SmolLM2-135M's (Q4_1); weights streamed from eight copies so they
/// come from memory, as in decode. Throughput in multiply-adds per second.
fn bench_blocked_rows(c: &mut Criterion) {
    const STREAM_COPIES: usize = 8;
    let mut rng = Rng(13);
    let mut arena_buf = vec![0u8; 4 << 20];
    let mut g = c.benchmark_group("blocked_rows");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(10);
    let cases = [
        (GgmlType::Q5_0, "q5_0", 896usize, 4864usize),
        (GgmlType::Q8_0, "q8_0", 896, 4864),
        (GgmlType::Q5_0, "q5_0", 4864, 896),
        (GgmlType::Q8_0, "q8_0", 4864, 896),
        (GgmlType::Q4_1, "q4_1", 576, 1536),
        (GgmlType::Q4_1, "q4_1", 1536, 576),
    ];
    for (ty, name, n_in, n_out) in cases {
        let copies: Vec<Vec<u8>> = (0..STREAM_COPIES)
            .map(|_| weights(ty, n_in, n_out, &mut rng))
            .collect();
        let qms: Vec<QMatrix<'_>> = copies
            .iter()
            .map(|w| QMatrix::new(ty, n_in, n_out, w).unwrap())
            .collect();
        let runs = [
            (1usize, 8usize, "m1x8"),
            (2, 1, "m2"),
            (4, 1, "m4"),
            (8, 1, "m8"),
            (16, 1, "m16"),
            (64, 1, "m64"),
        ];
        for (m, calls, id) in runs {
            let xs: Vec<F32> = (0..m * n_in)
                .map(|_| F32::from_bits(rng.unit().to_bits()))
                .collect();
            let mut arena = Arena::new(&mut arena_buf);
            let mut acts = QActs::new(&mut arena, ActKind::Q8, m, n_in).unwrap();
            acts.quantize(&xs).unwrap();
            let mut out = vec![F32::ZERO; m * n_out];
            g.throughput(Throughput::Elements((m * calls * n_in * n_out) as u64));
            let mut k = 0;
            let label = format!("{name}_{n_in}x{n_out}");
            g.bench_function(BenchmarkId::new(label, id), |b| {
                b.iter(|| {
                    for _ in 0..calls {
                        k = (k + 1) % STREAM_COPIES;
                        let w = &qms[k];
                        rows_kernel_with(w, 0, black_box(&acts), &mut out, KernelPath::Auto);
                    }
                })
            });
        }
    }
    g.finish();
}

/// RMSNorm over a prefill's rows (`kernels::rmsnorm::rmsnorm_rows`, one
/// thread): Gemma 3 270M's 59 rows of width 640 and its per-head Q norm
/// (4 heads: 236 rows of 256); throughput in elements per second.
fn bench_rmsnorm(c: &mut Criterion) {
    let mut g = c.benchmark_group("rmsnorm_rows");
    g.measurement_time(Duration::from_secs(3));
    let mut rng = Rng(7);
    for (rows, d) in [(59usize, 640usize), (236, 256)] {
        let x: Vec<F32> = (0..rows * d)
            .map(|_| F32::from_bits(rng.unit().to_bits()))
            .collect();
        let w: Vec<F32> = (0..d)
            .map(|_| F32::from_bits((1.0 + rng.unit() / 4.0).to_bits()))
            .collect();
        let eps = F32::from_bits(1e-6f32.to_bits());
        let mut out = vec![F32::ZERO; rows * d];
        g.throughput(Throughput::Elements((rows * d) as u64));
        g.bench_function(BenchmarkId::new("detllm", format!("{rows}x{d}")), |b| {
            b.iter(|| detllm::kernels::rmsnorm::rmsnorm_rows(black_box(&x), &w, eps, &mut out))
        });
    }
    g.finish();
}

/// GEGLU and SwiGLU over Gemma 3 270M's FFN rows (59 rows of 2048), gate
/// and up in [-3, 3), and RoPE (Neox) over its Q rows (4 heads of 256) for
/// positions 0..59, one exact zero in 64 values (as real Q rows have).
/// Throughput in elements (rotated pairs for RoPE).
fn bench_activations(c: &mut Criterion) {
    let mut g = c.benchmark_group("activations");
    g.measurement_time(Duration::from_secs(3));
    let mut rng = Rng(11);
    let (rows, ffn) = (59usize, 2048usize);
    let gate: Vec<F32> = (0..rows * ffn)
        .map(|_| F32::from_bits((rng.unit() * 3.0).to_bits()))
        .collect();
    let up: Vec<F32> = (0..rows * ffn)
        .map(|_| F32::from_bits((rng.unit() * 3.0).to_bits()))
        .collect();
    let mut out = gate.clone();
    g.throughput(Throughput::Elements((rows * ffn) as u64));
    g.bench_function(BenchmarkId::new("geglu", format!("{rows}x{ffn}")), |b| {
        b.iter(|| {
            out.copy_from_slice(&gate);
            detllm::kernels::geglu(black_box(&mut out), &up).unwrap()
        })
    });
    g.bench_function(BenchmarkId::new("swiglu", format!("{rows}x{ffn}")), |b| {
        b.iter(|| {
            out.copy_from_slice(&gate);
            detllm::kernels::swiglu(black_box(&mut out), &up).unwrap()
        })
    });
    let (heads, head_dim) = (4usize, 256usize);
    let ts = detllm::kernels::rope_theta_scale(F32::from_u32(1_000_000), head_dim);
    let angles: Vec<_> = (0..rows)
        .map(|pos| detllm::kernels::RopeAngles::new(head_dim, pos, ts).unwrap())
        .collect();
    let q: Vec<F32> = (0..rows * heads * head_dim)
        .map(|i| {
            F32::from_bits(if i % 64 == 17 {
                0
            } else {
                (rng.unit() * 3.0).to_bits()
            })
        })
        .collect();
    let mut out = q.clone();
    g.throughput(Throughput::Elements((rows * heads * head_dim / 2) as u64));
    g.bench_function(
        BenchmarkId::new("rope_neox", format!("{rows}x{heads}x{head_dim}")),
        |b| {
            b.iter(|| {
                out.copy_from_slice(&q);
                for (a, x) in angles.iter().zip(out.chunks_exact_mut(heads * head_dim)) {
                    let style = detllm::kernels::RopeStyle::Neox;
                    detllm::kernels::rope_apply(
                        a.sin(),
                        a.cos(),
                        black_box(x),
                        heads,
                        head_dim,
                        style,
                    )
                    .unwrap();
                }
            })
        },
    );
    g.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    bench_kquant_m1(&mut c);
    bench_kquant_rows(&mut c);
    bench_blocked_rows(&mut c);
    bench_rmsnorm(&mut c);
    bench_activations(&mut c);
    c.final_summary();
}
