//! Matmul speed per weight format: detllm's exact kernels (`detllm`: the
//! best path; `detllm_reference`: `dot_row` per cell, the path every format
//! without a blocked kernel takes) against a hardware-f32 implementation of
//! llama.cpp's per-block formula (`llama_f32`, generic C path: integer block
//! sum, `sumf += (dx*dy)*sumi + m*s` / `sumi*(dx*dy)`), single thread,
//! M = 1 and M = 8. Q4_1 and Q8_0 on SmolLM2-135M shapes, Q5_0 on
//! Qwen2.5-0.5B shapes (most of its Q4_K_M file is Q5_0). Throughput is in
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
        b[0..2].copy_from_slice(&f16(d).to_le_bytes());
        if ty == GgmlType::Q4_1 {
            b[2..4].copy_from_slice(&f16(-8.0 * d).to_le_bytes());
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
    let formats: [Format; 3] = [
        (GgmlType::Q4_1, "q4_1", &SMOL_SHAPES),
        (GgmlType::Q8_0, "q8_0", &SMOL_SHAPES),
        (GgmlType::Q5_0, "q5_0", &QWEN_SHAPES),
    ];
    for (ty, name, shapes) in formats {
        let mut g = c.benchmark_group(format!("matmul_{name}"));
        g.warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_millis(1200))
            .sample_size(10);
        for &(n_in, n_out) in shapes {
            let w = weights(ty, n_in, n_out, &mut rng);
            let qm = QMatrix::new(ty, n_in, n_out, &w).unwrap();
            for m in [1usize, 8] {
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

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
