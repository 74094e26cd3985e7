//! Matmul invariance: every path (per-cell reference, portable blocked, SIMD
//! blocked) gives the same bits; a row's output does not depend on M, on its
//! position in the batch, on the thread count or on how rows are split.
//!
//! Which implementation each [`KernelPath`] runs, per weight format (every
//! call's [`RowsRun`] is asserted to be this, so a path that silently
//! declined to the reference would fail):
//!
//! | weights | `Reference` | `Portable` | `Auto` | `Avx2` |
//! |---|---|---|---|---|
//! | Q4_0, Q4_1, Q5_0, Q8_0 | `dot_row` per cell | blocked, portable split kernels | blocked, the widest fused build the CPU runs (AVX-512 VNNI, else AVX2), else portable | blocked, the AVX2 fused build, else portable |
//! | Q4_K, Q5_K, Q6_K | `dot_row` per cell | every row: the K-quant row kernel's portable body | its widest build (AVX-512, else AVX2), else portable | its AVX2 build, else portable |
//! | Q5_1, F16, F32, BF16 | `dot_row` | `dot_row` | `dot_row` | `dot_row` |
//!
//! "Blocked" covers whole groups of [`ROW_GROUP`] rows; the rows past the
//! last whole group always go through `dot_row`. Q4_K, Q5_K and Q6_K on
//! `Auto` with AVX-512 VNNI and several input rows run whole tiles of
//! [`TILE`] weight rows through the VNNI tile kernel (asserted too:
//! `RowsRun::tiled_rows`; the tile of four weight rows, or four such
//! tiles, by up to 32 input rows, reported as that build), and with one
//! input row (or any number on a build without the VNNI tile) every
//! weight row through the x86 decode kernel (counted in
//! `RowsRun::tiled_rows` too). Q4_0, Q4_1, Q5_0
//! and Q8_0 on `Auto` with AVX-512 VNNI and at least `WIDE_MIN_ROWS` input rows,
//! or (Q5_0) on the AVX2 build with at least `AVX2_WIDE_MIN_ROWS`, run whole
//! wide groups (`WIDE_GROUPS` row groups) through the wide kernel (asserted
//! as `RowsRun::tiled_rows`). For the formats without a
//! blocked kernel the four paths are the same code, so their comparison
//! here only checks `dot_row` against the batched `matmul`.
#![cfg(feature = "std")]
use crate::support;

use detllm::quant::fast::kquant::{
    CHUNK_LIM_Q4_K, CHUNK_LIM_Q5_K, CHUNK_LIM_Q6_K, CHUNK_SUPERS, CHUNK_WLIM_Q4_K, CHUNK_WLIM_Q5_K,
    CHUNK_WLIM_Q6_K, DECODE_ROWS, TILE, vnni_decode_takes,
};
use detllm::quant::fast::{
    AVX2_WIDE_MIN_ROWS, KernelPath, ROW_GROUP, RowsRun, WIDE_GROUPS, WIDE_MIN_ROWS,
    rows_kernel_with,
};
use detllm::quant::{ActKind, GgmlType, QActs, QMatrix};
use detllm::simd::{Level, level};
use detllm::{Arena, F32, Serial, kernels::matmul};
use proptest::prelude::*;
use support::quant::Rng;

const TYPES: [GgmlType; 14] = [
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q5_0,
    GgmlType::Q6_K,
    GgmlType::Q5_K,
    GgmlType::Q4_0,
    GgmlType::Q5_1,
    GgmlType::F16,
    GgmlType::F32,
    GgmlType::Q4_K,
    GgmlType::BF16,
];

fn f16(x: f32) -> u16 {
    F32::from_bits(x.to_bits()).to_f16_bits()
}

/// Weights with model-like scales, sometimes wild (zero, subnormal, huge,
/// non-finite) so the wide fallback and NaN paths run too.
fn weights(rng: &mut Rng, ty: GgmlType, n_in: usize, n_out: usize, wild: bool) -> Vec<u8> {
    let mut w = vec![0u8; ty.row_bytes(n_in).unwrap() * n_out];
    rng.bytes(&mut w);
    if matches!(ty, GgmlType::F32) {
        for c in w.chunks_mut(4) {
            c.copy_from_slice(&rng.f32_in(-8, 2).to_le_bytes());
        }
        return w;
    }
    if matches!(ty, GgmlType::F16 | GgmlType::BF16) {
        return w;
    }
    for b in w.chunks_mut(ty.type_size()) {
        let sp = rng.next().is_multiple_of(4);
        let d = if wild && rng.next().is_multiple_of(8) {
            rng.f16_scale(sp)
        } else {
            f16(rng.f32_in(-9, -5))
        };
        // Q6_K keeps its scale last.
        let at = if ty == GgmlType::Q6_K { b.len() - 2 } else { 0 };
        b[at..at + 2].copy_from_slice(&d.to_le_bytes());
        if matches!(
            ty,
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K
        ) {
            let m = if wild && rng.next().is_multiple_of(8) {
                rng.f16_scale(false)
            } else {
                f16(-rng.f32_in(-5, -2))
            };
            b[2..4].copy_from_slice(&m.to_le_bytes());
        }
    }
    w
}

fn inputs(rng: &mut Rng, m: usize, n_in: usize, wild: bool) -> Vec<F32> {
    (0..m * n_in)
        .map(|i| {
            let blk = (i / 32) as u64;
            // Wild: block magnitudes 2^-32..2^21, so block scales run from
            // zero and subnormal to 2^14 (f16 shifts 0..=28: beyond every
            // `i64` limit, the K-quant ones within a super-block too).
            let e = if wild {
                ((blk * 7 + m as u64) % 52) as i32 - 30
            } else {
                -3
            };
            let v = rng.f32_in(e - 2, e);
            F32::from_bits(if wild && rng.next().is_multiple_of(500) {
                0
            } else {
                v.to_bits()
            })
        })
        .collect()
}

fn run(par: &impl detllm::Parallel, w: &QMatrix, x: &[F32], m: usize) -> Vec<u32> {
    let mut buf = vec![0u8; QActs::bytes_for(ActKind::for_weight(w.ty), m, w.n_in).unwrap()];
    let mut arena = Arena::new(&mut buf);
    let mut a = QActs::new(&mut arena, ActKind::for_weight(w.ty), m, w.n_in).unwrap();
    a.quantize(x).unwrap();
    let mut out = vec![F32::ZERO; m * w.n_out];
    let mut scratch = vec![F32::ZERO; matmul::matmul_scratch_len(m, w.n_out)];
    matmul::matmul(par, w, &a, &mut out, &mut scratch).unwrap();
    out.iter().map(|v| v.to_bits()).collect()
}

/// What `path` must run on `n_rows` rows of `ty` against `m` input rows on
/// this CPU (the table in the module docs).
fn expected_run(
    ty: GgmlType,
    path: KernelPath,
    n_rows: usize,
    (m, n_in): (usize, usize),
) -> RowsRun {
    let has_blocked = matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q8_0
    );
    let kquant = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K);
    let blocked_rows = match path {
        KernelPath::Reference => 0,
        _ if kquant => n_rows,
        _ if !has_blocked => 0,
        _ => n_rows / ROW_GROUP * ROW_GROUP,
    };
    let build = match (path, level()) {
        _ if blocked_rows == 0 => Level::Portable,
        (KernelPath::Auto, l) if kquant && l >= Level::Avx512 => Level::Avx512,
        (KernelPath::Auto, Level::Avx512Vnni) => Level::Avx512Vnni,
        (KernelPath::Auto | KernelPath::Avx2, l) if l >= Level::Avx2 => Level::Avx2,
        _ => Level::Portable,
    };
    // Q4_K, Q5_K and Q6_K on `Auto` with more than `VNNI_DECODE_MAX_ROWS`
    // input rows where the CPU has AVX-512 VNNI (more than
    // `DECODE_PASS_ROWS`, or more than `VNNI_DECODE_PASS_TERMS` terms):
    // whole tiles of weight rows through the VNNI tile (four weight rows
    // by up to 32 input rows).
    let tiled = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
        && build >= Level::Avx2
        && blocked_rows > 0
        && !vnni_decode_takes(m, n_in)
        && level() == Level::Avx512Vnni
        && path == KernelPath::Auto;
    // Q4_0, Q4_1, Q5_0 and Q8_0 on `Auto` with AVX-512 VNNI and at least
    // `WIDE_MIN_ROWS` input rows, or Q5_0 on the AVX2 build with at least
    // `AVX2_WIDE_MIN_ROWS`: whole wide groups (four row groups) through
    // the wide kernel.
    let wide = matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q8_0
    ) && ((build == Level::Avx512Vnni && m >= WIDE_MIN_ROWS)
        || (ty == GgmlType::Q5_0 && build == Level::Avx2 && m >= AVX2_WIDE_MIN_ROWS));
    // Q4_K, Q5_K and Q6_K on a SIMD build with the input rows
    // `vnni_decode_takes` (up to `VNNI_DECODE_MAX_ROWS`, or up to
    // `DECODE_PASS_ROWS` of short rows), or any number without the VNNI
    // tile: every row through the decode kernel.
    let vnni = path == KernelPath::Auto && level() == Level::Avx512Vnni;
    let decode = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
        && build >= Level::Avx2
        && blocked_rows > 0
        && (vnni_decode_takes(m, n_in) || !vnni);
    let tiled_rows = if tiled {
        n_rows / TILE * TILE
    } else if decode {
        n_rows
    } else if wide {
        n_rows / (WIDE_GROUPS * ROW_GROUP) * (WIDE_GROUPS * ROW_GROUP)
    } else {
        0
    };
    // The VNNI tile reports its own build, and so does the decode
    // kernel's VNNI build (the input rows `vnni_decode_takes` on
    // `Auto`); the other decode kernels report the row kernel's (AVX-512
    // or AVX2).
    let vnni_decode = decode && vnni;
    let build = if (tiled || vnni_decode) && tiled_rows > 0 {
        Level::Avx512Vnni
    } else {
        build
    };
    RowsRun {
        blocked_rows,
        build,
        tiled_rows,
    }
}

/// The cells of every path, each computed in two row ranges split at
/// `split`; asserts that each call ran what [`expected_run`] says.
fn paths(w: &QMatrix, x: &[F32], m: usize, split: usize) -> [Vec<u32>; 4] {
    let mut buf = vec![0u8; QActs::bytes_for(ActKind::for_weight(w.ty), m, w.n_in).unwrap()];
    let mut arena = Arena::new(&mut buf);
    let mut a = QActs::new(&mut arena, ActKind::for_weight(w.ty), m, w.n_in).unwrap();
    a.quantize(x).unwrap();
    let all = [
        KernelPath::Reference,
        KernelPath::Portable,
        KernelPath::Auto,
        KernelPath::Avx2,
    ];
    all.map(|p| {
        // (n_out, M) in two arbitrary row ranges.
        let mut out = vec![F32::ZERO; m * w.n_out];
        let (lo, hi) = out.split_at_mut(split * m);
        let ran = [
            rows_kernel_with(w, 0, &a, lo, p),
            rows_kernel_with(w, split, &a, hi, p),
        ];
        let want = [split, w.n_out - split].map(|n| expected_run(w.ty, p, n, (m, w.n_in)));
        assert_eq!(ran, want, "{:?} {p:?}: what ran", w.ty);
        out.iter().map(|v| v.to_bits()).collect()
    })
}

fn check(seed: u64, ti: usize, kb: usize, n_out: usize, m: usize, wild: bool) {
    let ty = TYPES[ti % TYPES.len()];
    let n_in = if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
        256 * kb.div_ceil(8)
    } else {
        32 * kb
    };
    let mut rng = Rng(seed);
    let wb = weights(&mut rng, ty, n_in, n_out, wild);
    let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
    let x = inputs(&mut rng, m, n_in, wild);
    let batch = run(&Serial, &w, &x, m);
    // Paths agree (with an arbitrary split of the rows).
    let split = (seed as usize) % (n_out + 1);
    let [r, p, s, v2] = paths(&w, &x, m, split);
    for (o, (a, (b, (c, d)))) in r.iter().zip(p.iter().zip(s.iter().zip(&v2))).enumerate() {
        assert_eq!(
            (a, a, a),
            (b, c, d),
            "{ty:?} cell {o} ref/portable/best SIMD/AVX2"
        );
    }
    // (n_out, M) reference vs the batched matmul (M, n_out).
    for i in 0..m {
        for o in 0..n_out {
            assert_eq!(batch[i * n_out + o], r[o * m + i], "{ty:?} row {i} out {o}");
        }
    }
    // Each row alone (M = 1) and at another position in another batch.
    let pool = detllm::parallel::ThreadPool::new(2).unwrap();
    for i in 0..m {
        let row = &x[i * n_in..(i + 1) * n_in];
        let alone = run(&Serial, &w, row, 1);
        assert_eq!(
            &alone[..],
            &batch[i * n_out..(i + 1) * n_out],
            "{ty:?} row {i} alone"
        );
        let mut other = inputs(&mut rng, 3, n_in, !wild);
        let pos = i % 4;
        other.splice(pos * n_in..pos * n_in, row.iter().copied());
        let moved = run(&pool, &w, &other, 4);
        assert_eq!(
            &moved[pos * n_out..(pos + 1) * n_out],
            &alone[..],
            "{ty:?} row {i} moved"
        );
    }
    assert_eq!(run(&pool, &w, &x, m), batch, "{ty:?} threads");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn matmul_paths_and_batches_agree(seed in any::<u64>(), ti in 0usize..14, kb in 1usize..80,
                                      n_out in 1usize..40, m in prop_oneof![1usize..36, 60usize..72],
                                      wild in any::<bool>()) {
        check(seed, ti, kb, n_out, m, wild);
    }
}

/// Input rows holding ±∞ or NaN (a non-finite activation scale) among
/// finite ones, for the blocked formats in tiles the wide kernel takes
/// (13 and 33 input rows; one chunk and three) and for the K-quants in the
/// tile kernels' calls: those rows' cells are NaN on every path, the others
/// equal the reference (no rounded row of the wide kernel stands for a row
/// whose scale is not finite; no cell of a K-quant tile is rounded from its
/// sum when its scale is not finite).
#[test]
fn non_finite_input_rows_give_nan_cells() {
    let types = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];
    for ty in types {
        for kb in [20usize, 70] {
            let n_in = if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
                256 * kb.div_ceil(8)
            } else {
                32 * kb
            };
            let n_out = 32;
            let mut rng = Rng(kb as u64);
            let wb = weights(&mut rng, ty, n_in, n_out, false);
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            for m in [13usize, 33] {
                let mut x = inputs(&mut rng, m, n_in, false);
                let bad_rows = [1, m - 2];
                for (k, &r) in bad_rows.iter().enumerate() {
                    let v = [F32::INFINITY, F32::NAN][k];
                    x[r * n_in + (7 + 32 * k) % n_in] = v;
                }
                let [r, p, s, v2] = paths(&w, &x, m, n_out / 2);
                let at = format!("{ty:?} kb {kb} m {m}");
                assert_eq!(r, p, "{at} portable");
                assert_eq!(r, s, "{at} best SIMD");
                assert_eq!(r, v2, "{at} AVX2");
                for o in 0..n_out {
                    for &row in &bad_rows {
                        let cell = F32::from_bits(r[o * m + row]);
                        assert!(cell.is_nan(), "{at} cell ({o}, {row})");
                    }
                }
            }
        }
    }
}

/// SmolLM2 shapes, one seed each, all paths.
#[test]
fn smollm2_shapes_agree() {
    for (i, &(n_in, n_out)) in [(576, 576), (576, 192), (1536, 576), (576, 1536)]
        .iter()
        .enumerate()
    {
        for ty in [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q8_0,
        ] {
            let mut rng = Rng(i as u64);
            let wb = weights(&mut rng, ty, n_in, n_out, false);
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            let x = inputs(&mut rng, 3, n_in, false);
            let [r, p, s, v2] = paths(&w, &x, 3, n_out / 3);
            assert_eq!(r, p);
            assert_eq!(r, s);
            assert_eq!(r, v2);
        }
    }
}

#[test]
fn matmul_rejects_bad_shapes_without_writing() {
    let wb = vec![0u8; 20 * 2 * 3];
    let w = QMatrix::new(GgmlType::Q4_1, 64, 3, &wb).unwrap();
    assert!(QMatrix::new(GgmlType::Q4_1, 64, 4, &wb).is_err());
    assert!(QMatrix::new(GgmlType::Q4_1, 48, 3, &wb).is_err());
    let mut buf = vec![0u8; 4096];
    let mut arena = Arena::new(&mut buf);
    let mut a = QActs::new(&mut arena, ActKind::Q8, 2, 64).unwrap();
    a.quantize(&[F32::ONE; 128]).unwrap();
    let mut out = vec![F32::NAN; 5];
    assert!(matmul::matmul(&Serial, &w, &a, &mut out, &mut []).is_err());
    assert!(out.iter().all(|v| v.is_nan()));
    let mut out = vec![F32::NAN; 6];
    assert!(matches!(
        matmul::matmul(&Serial, &w, &a, &mut out, &mut []),
        Err(detllm::Error::BufferTooSmall { .. })
    ));
    assert!(out.iter().all(|v| v.is_nan()));
    assert!(a.quantize(&[F32::ONE; 192]).is_err());
}

/// Batches longer than the blocked kernels' pass of input rows (64), so a
/// second and third pass over the weight groups run, for both fast formats
/// (37 weight rows: wide groups, whose last tile of a pass holds one or
/// two input rows, a narrow group and a tail row).
#[test]
fn batches_beyond_one_pass_agree() {
    for (seed, m) in [(11u64, 65usize), (12, 130)] {
        for (ti, ty) in TYPES.iter().enumerate() {
            if matches!(
                ty,
                GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q8_0
            ) {
                check(seed, ti, 20, 37, m, seed % 2 == 0);
            }
        }
    }
}

/// Q4_K, Q5_K and Q6_K matrices of more than one block of the decode
/// driver's weight rows (61 rows of 2048 values: 70, 86 and 102 KB, blocks
/// of 64 KiB)
/// against 37 or 17 input rows (calls of `DECODE_ROWS`: 16, 16 and 5
/// columns; 16 and 1), all the rows in one call (the seeds split them at
/// 0 and at 61), model-like and wild scales: every path agrees with the
/// reference and runs the decode kernel on every row, each row alone and
/// at another batch position, on 1 and 2 threads.
#[test]
fn kquant_decode_blocks_agree() {
    let (m3, m2) = (2 * DECODE_ROWS + 5, DECODE_ROWS + 1);
    for (seed, m) in [(62u64, m3), (123, m2), (124, m2), (61, m3)] {
        for (ti, ty) in TYPES.iter().enumerate() {
            if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
                check(seed, ti, 64, 61, m, seed % 2 == 0);
            }
        }
    }
}

/// Blocks at the integer extremes: every Q4_1 nibble 15 (or 0) and every Q8_0
/// byte -128 (or 127) against activations that all quantize to +127 or
/// -127, so each block's byte dot reaches its largest magnitude (Q4_1:
/// 32·15·127, whose halves the AVX2 kernel sums in 16-bit lanes; Q8_0:
/// 32·128·127; Q5_0: every value -16 (or 15), 32·16·127; Q4_0: every value
/// -8 (or 7), 32·8·127). The exact
/// reference and every blocked path agree, for one input row and for tiles
/// of several.
#[test]
fn extreme_blocks_agree() {
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        for kb in [1usize, 18, 33, 48] {
            let n_in = 32 * kb;
            // Two wide groups of sixteen rows (the row range is split in half).
            let n_out = 32;
            let wb = extreme_weights(ty, n_in, n_out);
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            for m in [1usize, 3, 8, 17] {
                let x: Vec<F32> = (0..m * n_in)
                    .map(|i| {
                        let (row, blk) = (i / n_in, (i % n_in) / 32);
                        if (row + blk) % 2 == 0 {
                            F32::ONE
                        } else {
                            -F32::ONE
                        }
                    })
                    .collect();
                let [r, p, s, v2] = paths(&w, &x, m, n_out / 2);
                assert!(r.iter().all(|&c| F32::from_bits(c).is_finite()), "{ty:?}");
                assert_eq!(r, p, "{ty:?} kb {kb} m {m} portable");
                assert_eq!(r, s, "{ty:?} kb {kb} m {m} best SIMD");
                assert_eq!(r, v2, "{ty:?} kb {kb} m {m} AVX2");
            }
        }
    }
}

/// `n_out` rows of `ty` (Q4_0, Q4_1, Q5_0, Q8_0) whose every block has the largest
/// byte dot against activations all ±127: Q4_1 nibbles 15 (or 0), Q5_0
/// values 15 (or -16), Q4_0 values -8 (or 7), Q8_0 bytes -128 (or 127) by row; scales ±0.01
/// (Q4_1 mins -0.1).
fn extreme_weights(ty: GgmlType, n_in: usize, n_out: usize) -> Vec<u8> {
    let mut wb = vec![0u8; ty.row_bytes(n_in).unwrap() * n_out];
    for (r, row) in wb.chunks_mut(ty.row_bytes(n_in).unwrap()).enumerate() {
        for b in row.chunks_mut(ty.type_size()) {
            b[0..2].copy_from_slice(&f16(if r % 3 == 2 { -0.01 } else { 0.01 }).to_le_bytes());
            let q = if ty == GgmlType::Q4_1 {
                b[2..4].copy_from_slice(&f16(-0.1).to_le_bytes());
                &mut b[4..]
            } else {
                &mut b[2..]
            };
            // Q5_0: `qh` and nibbles all ones (15) or all zeros (-16).
            let fill = match (ty, r % 4 == 3) {
                (GgmlType::Q4_1 | GgmlType::Q5_0, false) => 0xFF,
                (GgmlType::Q4_1 | GgmlType::Q5_0, true) => 0x00,
                (GgmlType::Q4_0, false) => 0x00,
                (GgmlType::Q4_0, true) => 0xFF,
                (_, false) => 0x80,
                (_, true) => 0x7F,
            };
            q.fill(fill);
        }
    }
    wb
}

/// The blocked formats' `i64` chunk sums at their limits: the extreme
/// weights of [`extreme_weights`] against activations whose block scales
/// lie `spread` binades apart within a chunk ([`extreme_inputs`]), for
/// every spread from 0 to 24 — below, at and beyond each format's limit
/// (`LIM_Q8_0_D` 16, `LIM_Q5_0_D` and `LIM_Q4_1_D` 19, `LIM_Q4_0_D` 20, less the weights'
/// guessed-base margin), so the kernels' check that sends a chunk to the
/// `i128` fallback is exercised on both sides. One input row, a group
/// tile and a wide tile; the reference and every path agree.
#[test]
fn extreme_spreads_agree() {
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
    ] {
        let (n_in, n_out) = (32 * 40, 32);
        let wb = extreme_weights(ty, n_in, n_out);
        let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
        for spread in 0..=24 {
            for m in [1usize, 9, 13] {
                let x = extreme_inputs(m, n_in, spread);
                let [r, p, s, v2] = paths(&w, &x, m, n_out / 2);
                let at = format!("{ty:?} m {m} spread {spread}");
                assert_eq!(r, p, "{at} portable");
                assert_eq!(r, s, "{at} best SIMD");
                assert_eq!(r, v2, "{at} AVX2");
            }
        }
    }
}

/// K-quant super-blocks at the integer extremes: Q4_K (Q5_K) with every value
/// 15 (31) or 0 and every 6-bit scale and min 63; Q6_K with every value -32
/// (or 31) and every scale -128 (or 127); activations all ±127, in
/// super-blocks whose activation scales are equal (the `i64` sum at its
/// widest) or `2^spread` apart, `spread` from 24 to 29 (the widest f16 shifts allow): at, just past and
/// beyond each format's limit (`LIM_Q6_K` 24, `LIM_Q5_K` 25, `LIM_Q4_K`
/// 26; the `i64` sum at its largest when seven of eight blocks are the
/// high ones), else the per-sub-block fallback. One input row, four, nine,
/// and a whole VNNI tile call of 32 plus one (its partial last call). The
/// reference and every path agree.
#[test]
fn kquant_extreme_blocks_agree() {
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        for kb in [1usize, 3] {
            let n_in = 256 * kb;
            // Two row ranges of 21: four tiles of weight rows (the VNNI
            // kernel's group of tiles), one more tile and one more row in
            // each (the one-tile kernel's and the row kernel's cells).
            let n_out = 42;
            let rb = ty.row_bytes(n_in).unwrap();
            let mut wb = vec![0u8; rb * n_out];
            for (r, row) in wb.chunks_mut(rb).enumerate() {
                let hi = r % 2 == 0;
                let d = f16(if r % 3 == 2 { -0.01 } else { 0.01 });
                for b in row.chunks_mut(ty.type_size()) {
                    if ty != GgmlType::Q6_K {
                        // Q4_K / Q5_K (Q5_K: qh and nibbles all set or clear).
                        b[0..2].copy_from_slice(&d.to_le_bytes());
                        b[2..4].copy_from_slice(&f16(0.02).to_le_bytes());
                        b[4..16].fill(0xFF);
                        b[16..].fill(if hi { 0xFF } else { 0x00 });
                    } else {
                        b[0..192].fill(if hi { 0xFF } else { 0x00 });
                        b[192..208].fill(if hi { 0x7F } else { 0x80 });
                        b[208..210].copy_from_slice(&d.to_le_bytes());
                    }
                }
            }
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            for spread in 24..=29 {
                for m in [1usize, 4, 9, 33] {
                    let x = extreme_inputs(m, n_in, spread);
                    let [r, p, s, v2] = paths(&w, &x, m, n_out / 2);
                    let nonzero = |c: &u32| F32::from_bits(*c).is_finite() && *c << 1 != 0;
                    assert!(r.iter().all(nonzero), "{ty:?}");
                    let at = format!("{ty:?} kb {kb} m {m} spread {spread}");
                    assert_eq!(r, p, "{at} portable");
                    assert_eq!(r, s, "{at} best SIMD");
                    assert_eq!(r, v2, "{at} AVX2");
                }
            }
        }
    }
}

/// The VNNI tile's `i64` chunk sums at their limits: Q4_K, Q5_K and Q6_K rows
/// at the integer extremes ([`chunk_weights`]) whose scale shifts spread
/// `ws` binades over each chunk of four super-blocks, against activations
/// whose block scales spread `asp` binades within each chunk, all
/// mantissas 2047 ([`chunk_inputs`]): the weight spread at and one past
/// `CHUNK_WLIM_*` (the `i32` weight factor), the two spreads together at
/// and one past `CHUNK_LIM_*` (the `i64` lane, whose eight terms then
/// pass 2^63). Within the limits the chunk sum, beyond them the
/// per-super-block path; the reference and every path agree. With one
/// input row the decode kernel takes the same chunk sums (same limits),
/// and so does it with any number on CPUs without the VNNI tile.
#[test]
fn kquant_chunk_limits_agree() {
    let formats = [
        (GgmlType::Q4_K, CHUNK_WLIM_Q4_K, CHUNK_LIM_Q4_K),
        (GgmlType::Q5_K, CHUNK_WLIM_Q5_K, CHUNK_LIM_Q5_K),
        (GgmlType::Q6_K, CHUNK_WLIM_Q6_K, CHUNK_LIM_Q6_K),
    ];
    for (ty, wlim, lim) in formats {
        // A whole chunk and a partial one.
        let n_in = 256 * (CHUNK_SUPERS + 1);
        // Rows 0..16 (four tiles), 16..36 (four tiles and one).
        let n_out = 36;
        let cases = [
            (wlim, lim - wlim),
            (wlim, lim - wlim + 1),
            (wlim + 1, 0),
            (wlim + 1, lim - wlim - 1),
            (wlim - 3, lim - wlim + 3),
            (wlim - 3, lim - wlim + 4),
            (0, lim),
            (0, lim + 1),
        ];
        for (ws, asp) in cases {
            let wb = chunk_weights(ty, n_in, n_out, ws);
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            for m in [1usize, 2, 33] {
                let x = chunk_inputs(m, n_in, asp);
                let [r, p, s, v2] = paths(&w, &x, m, 16);
                assert!(r.iter().all(|c| F32::from_bits(*c).is_finite()), "{ty:?}");
                let at = format!("{ty:?} m {m} weight spread {ws} activation spread {asp}");
                assert_eq!(r, p, "{at} portable");
                assert_eq!(r, s, "{at} best SIMD");
                assert_eq!(r, v2, "{at} AVX2");
            }
        }
    }
}

/// `n_out` rows of `ty` (Q4_K, Q5_K or Q6_K) at the integer extremes against
/// activations all 127: Q4_K every nibble 15 (Q5_K every value 31) and every 6-bit scale and
/// min 63, `dmin` at shift 5 and `d` at shift `5 + ws` (so each chunk's
/// weight spread is `ws`); Q6_K every value -32 and every scale -128, `d`
/// at shift 5 in each chunk's first super-block and `5 + ws` in the
/// others. Every mantissa 2047; row 2 of each three negated.
/// Q4_K, Q5_K and Q6_K rows whose chunks each have one scale shift, the
/// odd chunks `gap` above the even ones: every chunk within the limits on
/// its own, neighbouring ones at, one past and well past `CHUNK_WLIM_*`
/// apart (a kernel taking the scales of more than one chunk at a time
/// must not carry one chunk's base into the next: such a plant, tried,
/// fails here and nowhere else). The reference and every path agree, with
/// one, two and four input rows.
#[test]
fn kquant_far_apart_chunks_agree() {
    let formats = [
        (GgmlType::Q4_K, CHUNK_WLIM_Q4_K),
        (GgmlType::Q5_K, CHUNK_WLIM_Q5_K),
        (GgmlType::Q6_K, CHUNK_WLIM_Q6_K),
    ];
    let f16_at = |sh: u32| ((sh + 1) << 10) as u16 | 0x3FF;
    for (ty, wlim) in formats {
        // Two whole pairs of chunks and a partial one.
        let n_in = 256 * (4 * CHUNK_SUPERS + 2);
        let n_out = 20;
        for gap in [0, wlim, wlim + 1, wlim + 6] {
            let rb = ty.row_bytes(n_in).unwrap();
            let mut wb = vec![0u8; rb * n_out];
            for (r, row) in wb.chunks_mut(rb).enumerate() {
                for (b, blk) in row.chunks_mut(ty.type_size()).enumerate() {
                    let sh = 1 + (r % 3) as u32 + (b / CHUNK_SUPERS % 2) as u32 * gap;
                    if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
                        blk[0..2].copy_from_slice(&f16_at(sh).to_le_bytes());
                        blk[2..4].copy_from_slice(&f16_at(sh).to_le_bytes());
                        blk[4..].fill(0x5A ^ (b as u8));
                    } else {
                        blk[0..208].fill(0x3C ^ (b as u8));
                        blk[208..210].copy_from_slice(&f16_at(sh).to_le_bytes());
                    }
                }
            }
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            for m in [1usize, 2, 4] {
                let x = chunk_inputs(m, n_in, 0);
                let [r, p, s, v2] = paths(&w, &x, m, 8);
                let at = format!("{ty:?} m {m} chunks {gap} apart");
                assert!(r.iter().all(|c| F32::from_bits(*c).is_finite()), "{at}");
                assert_eq!(r, p, "{at} portable");
                assert_eq!(r, s, "{at} best SIMD");
                assert_eq!(r, v2, "{at} AVX2");
            }
        }
    }
}

fn chunk_weights(ty: GgmlType, n_in: usize, n_out: usize, ws: u32) -> Vec<u8> {
    let rb = ty.row_bytes(n_in).unwrap();
    let mut wb = vec![0u8; rb * n_out];
    let f16_at =
        |sh: u32, neg: bool| ((sh + 1) << 10) as u16 | 0x3FF | if neg { 0x8000 } else { 0 };
    for (r, row) in wb.chunks_mut(rb).enumerate() {
        let neg = r % 3 == 2;
        for (b, blk) in row.chunks_mut(ty.type_size()).enumerate() {
            if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K) {
                blk[0..2].copy_from_slice(&f16_at(5 + ws, neg).to_le_bytes());
                blk[2..4].copy_from_slice(&f16_at(5, false).to_le_bytes());
                blk[4..].fill(0xFF);
            } else {
                blk[0..192].fill(0x00);
                blk[192..208].fill(0x80);
                let sh = if b.is_multiple_of(CHUNK_SUPERS) {
                    5
                } else {
                    5 + ws
                };
                blk[208..210].copy_from_slice(&f16_at(sh, neg).to_le_bytes());
            }
        }
    }
    wb
}

/// `m` input rows of blocks all `127·(2047/1024)·2^e` (block scale
/// `(2047/1024)·2^e`: mantissa 2047): the first block of each super-block
/// at `e = -12` (shift 2), the others `asp` binades above; positive.
fn chunk_inputs(m: usize, n_in: usize, asp: u32) -> Vec<F32> {
    (0..m * n_in)
        .map(|i| {
            let blk = (i % n_in) / 32;
            let e = if blk.is_multiple_of(8) {
                -12
            } else {
                -12 + asp as i32
            };
            F32::from_bits((127.0f32 * (2047.0 / 1024.0) * 2f32.powi(e)).to_bits())
        })
        .collect()
}

/// Input rows shorter than the K-quant weight rows (a `QActs` of another
/// width, as `rows_kernel_with` takes it unchecked): the tile kernels must
/// not take them; every path sends their cells through `dot_row`, which
/// reports the mismatch (NaN cells), and none counts a tiled row or
/// reports the VNNI tile's build.
#[test]
fn kquant_short_input_rows_go_to_dot_row() {
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        let (n_in, n_out, m) = (512, 9, 10);
        let mut rng = Rng(5);
        let wb = weights(&mut rng, ty, n_in, n_out, false);
        let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
        let kind = ActKind::for_weight(ty);
        let mut buf = vec![0u8; QActs::bytes_for(kind, m, 256).unwrap()];
        let mut arena = Arena::new(&mut buf);
        let mut a = QActs::new(&mut arena, kind, m, 256).unwrap();
        a.quantize(&inputs(&mut rng, m, 256, false)).unwrap();
        for p in [KernelPath::Portable, KernelPath::Auto, KernelPath::Avx2] {
            let mut out = vec![F32::ZERO; m * n_out];
            let ran = rows_kernel_with(&w, 0, &a, &mut out, p);
            assert!(out.iter().all(|c| c.is_nan()), "{ty:?} {p:?}");
            assert_eq!(
                (ran.blocked_rows, ran.tiled_rows),
                (n_out, 0),
                "{ty:?} {p:?}"
            );
            assert_ne!(ran.build, Level::Avx512Vnni, "{ty:?} {p:?}");
        }
    }
}

/// Q4_K, Q5_K and Q6_K rows longer than the decode kernel takes (one super-block
/// past `MAX_TERMS`, 256) and at its limit, against one input row: past
/// it every row goes through the row kernel (no row counted as the decode
/// kernel's), at it through the decode kernel; the cells equal the
/// reference either way.
#[test]
fn kquant_decode_row_length_limit() {
    for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        for (supers, decoded) in [(256usize, true), (257, false)] {
            let (n_in, n_out) = (256 * supers, 6);
            let mut rng = Rng(supers as u64);
            let wb = weights(&mut rng, ty, n_in, n_out, false);
            let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
            let x = inputs(&mut rng, 1, n_in, false);
            let mut buf = vec![0u8; QActs::bytes_for(ActKind::Q8, 1, n_in).unwrap()];
            let mut arena = Arena::new(&mut buf);
            let mut a = QActs::new(&mut arena, ActKind::Q8, 1, n_in).unwrap();
            a.quantize(&x).unwrap();
            let mut want = vec![F32::ZERO; n_out];
            rows_kernel_with(&w, 0, &a, &mut want, KernelPath::Reference);
            for p in [KernelPath::Auto, KernelPath::Avx2] {
                let mut out = vec![F32::ZERO; n_out];
                let ran = rows_kernel_with(&w, 0, &a, &mut out, p);
                let simd = level() >= Level::Avx2;
                let tiled = if decoded && simd { n_out } else { 0 };
                assert_eq!(ran.tiled_rows, tiled, "{ty:?} {supers} {p:?}");
                let bits = |v: &[F32]| v.iter().map(|c| c.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&out), bits(&want), "{ty:?} {supers} {p:?}");
            }
        }
    }
}

/// `m` input rows of magnitudes whose Q8 block scales are `2^-7/127` (f16
/// shift 0) or `2^(spread - 7)/127` (shift `spread`): row `i % 3 == 0` all
/// low (equal scales), `1` every block but the first of each super-block
/// high, `2` every third block high; one sign per super-block (nothing
/// cancels).
fn extreme_inputs(m: usize, n_in: usize, spread: i32) -> Vec<F32> {
    (0..m * n_in)
        .map(|i| {
            let (row, blk) = (i / n_in, (i % n_in) / 32);
            let high = match row % 3 {
                0 => false,
                1 => blk % 8 != 0,
                _ => blk % 3 == 1,
            };
            let e = if high { spread - 7 } else { -7 };
            let mag = F32::from_bits(((127 + e) as u32) << 23);
            if (row + blk / 8) % 2 == 0 { mag } else { -mag }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Q4_K and Q6_K against 2 to 12, 31 to 37 or 60 to 71 input rows (one
    /// call of the VNNI tile, or two or three calls of balanced lengths), 1 to 14 or
    /// 16 to 39 weight rows (groups of four tiles and single tiles; counts
    /// not multiples of four: tail rows through the row kernel), model-like or wild scales (spreads
    /// beyond the limits, zero and non-finite scales): every path agrees
    /// with the reference and runs what it should.
    #[test]
    fn kquant_tiles_agree(seed in any::<u64>(), q6 in any::<bool>(), sb in 1usize..4,
                          n_out in prop_oneof![1usize..15, 16usize..40],
                          m in prop_oneof![2usize..13, 31usize..38, 60usize..72],
                          wild in any::<bool>()) {
        let ti = TYPES.iter().position(|&t| t == if q6 { GgmlType::Q6_K } else { GgmlType::Q4_K });
        check(seed, ti.unwrap(), 8 * sb, n_out, m, wild);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// One input row against three matrices in one region
    /// (`fused_matvecs`, 1–5 threads) gives each matrix's `matmul` cells;
    /// `post` runs once per share, on equal row ranges of equal-height
    /// matrices (here: adds the second output into the first).
    #[test]
    fn matvec_shares_equals_matmul(seed in any::<u64>(), ti in 0usize..4, kb in 1usize..40,
                                   n0 in 1usize..300, n2 in 1usize..300, threads in 1usize..6,
                                   wild in any::<bool>()) {
        let ty = [GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_0][ti];
        let n_in = kb * 32;
        let mut rng = Rng(seed);
        let heights = [n0, n0, n2];
        let data: Vec<Vec<u8>> = heights.iter().map(|&n| weights(&mut rng, ty, n_in, n, wild)).collect();
        let ws: Vec<QMatrix> = data.iter().zip(heights).map(|(d, n)| QMatrix::new(ty, n_in, n, d).unwrap()).collect();
        let x = inputs(&mut rng, 1, n_in, wild);
        let want: Vec<Vec<u32>> = ws.iter().map(|w| run(&Serial, w, &x, 1)).collect();
        let mut buf = vec![0u8; QActs::bytes_for(ActKind::for_weight(ty), 1, n_in).unwrap()];
        let mut arena = Arena::new(&mut buf);
        let mut a = QActs::new(&mut arena, ActKind::for_weight(ty), 1, n_in).unwrap();
        a.quantize(&x).unwrap();
        let pool = detllm::parallel::ThreadPool::new(threads).unwrap();
        let mut outs: Vec<Vec<F32>> = heights.iter().map(|&n| vec![F32::ZERO; n]).collect();
        let [o0, o1, o2] = &mut outs[..] else { unreachable!() };
        let calls = std::sync::atomic::AtomicUsize::new(0);
        matmul::fused_matvecs(&pool, &a, [&ws[0], &ws[1], &ws[2]], [o0, o1, o2], &|s| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let [Some(a), Some(b), _] = s {
                if a.len() != b.len() {
                    return Err(detllm::Error::ShapeMismatch { expected: a.len(), found: b.len() });
                }
                for (x, y) in a.iter_mut().zip(b.iter()) {
                    *x = F32::from_bits(x.to_bits() ^ y.to_bits());
                }
            }
            Ok(())
        }).unwrap();
        prop_assert!(calls.into_inner() <= threads);
        let got: Vec<Vec<u32>> = outs.iter().map(|o| o.iter().map(|v| v.to_bits()).collect()).collect();
        let mixed: Vec<u32> = want[0].iter().zip(&want[1]).map(|(a, b)| a ^ b).collect();
        prop_assert_eq!(&got[0], &mixed);
        prop_assert_eq!(&got[1], &want[1]);
        prop_assert_eq!(&got[2], &want[2]);
    }
}
