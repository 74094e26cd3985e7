//! Dequantization: gguf-py's `dequantize` on generated blocks (fixture made by
//! `tests/fixtures/gen_quant_fixture.py`), the LLAMACPP-FACTS vectors from the
//! real SmolLM2 file, and the formulas against hardware f32 (no FMA: Rust
//! never contracts) on random blocks.
use crate::support;

use detllm::F32;
use detllm::quant::{GgmlType, QMatrix, dequantize_row};
use proptest::prelude::*;
use support::quant::{Rng, f16_to_f64};

fn ty_named(name: &str) -> GgmlType {
    match name {
        "Q4_0" => GgmlType::Q4_0,
        "Q4_1" => GgmlType::Q4_1,
        "Q5_0" => GgmlType::Q5_0,
        "Q5_1" => GgmlType::Q5_1,
        "Q8_0" => GgmlType::Q8_0,
        "Q4_K" => GgmlType::Q4_K,
        "Q5_K" => GgmlType::Q5_K,
        "Q6_K" => GgmlType::Q6_K,
        "F16" => GgmlType::F16,
        "BF16" => GgmlType::BF16,
        other => panic!("unknown type {other}"),
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn matches_gguf_py_fixture() {
    let text = include_str!("../fixtures/quant_gguf_py.txt");
    let mut n = 0;
    for line in text.lines() {
        let mut it = line.split(' ');
        let (name, raw, want) = (
            it.next().unwrap(),
            hex(it.next().unwrap()),
            it.next().unwrap(),
        );
        let ty = ty_named(name);
        let want: Vec<u32> = (0..want.len())
            .step_by(8)
            .map(|i| u32::from_str_radix(&want[i..i + 8], 16).unwrap())
            .collect();
        let mut out = vec![F32::ZERO; want.len()];
        dequantize_row(ty, &raw, &mut out).unwrap();
        for (i, (o, w)) in out.iter().zip(&want).enumerate() {
            // NaN payloads differ by design (every NaN is the canonical one).
            assert_eq!(o.to_bits(), support::quant::canon(*w), "{name} element {i}");
        }
        n += 1;
    }
    assert_eq!(n, 36);
}

#[test]
fn real_model_facts_vectors() {
    let Some(bytes) = support::model::bytes() else {
        return;
    };
    let tensors = support::quant::gguf_tensors(&bytes);
    let find = |n: &str| tensors.iter().find(|t| t.0 == n).unwrap().clone();
    // token_embd: Q8_0 [576, 49152] at the data start 1785664, 612 bytes per row.
    let (_, ty, off) = find("token_embd.weight");
    assert_eq!((ty, off), (8, 1_785_664));
    let emb = QMatrix::new(
        GgmlType::Q8_0,
        576,
        49152,
        &bytes[off as usize..off as usize + 612 * 49152],
    )
    .unwrap();
    let mut row = vec![F32::ZERO; 576];
    emb.dequantize_row(1, &mut row).unwrap();
    let want = [-0.02380371f32, -0.01586914, -0.03967285, 0.01586914];
    for (g, w) in row.iter().zip(want) {
        assert!(
            (f32::from_bits(g.to_bits()) - w).abs() < 5e-9,
            "{g:?} vs {w}"
        );
    }
    // blk.0.attn_q: Q4_1 [576, 576]; block 0 d=0.12683105, m=-0.73046875.
    let (_, ty, off) = find("blk.0.attn_q.weight");
    assert_eq!(ty, 3);
    let q = QMatrix::new(
        GgmlType::Q4_1,
        576,
        576,
        &bytes[off as usize..off as usize + 360 * 576],
    )
    .unwrap();
    let b = q.row(0).unwrap();
    assert_eq!(
        f16_to_f64(u16::from_le_bytes([b[0], b[1]])) as f32,
        0.12683105
    );
    assert_eq!(
        f16_to_f64(u16::from_le_bytes([b[2], b[3]])) as f32,
        -0.73046875
    );
    q.dequantize_row(0, &mut row).unwrap();
    let want = [-0.09631348f32, 0.15734863, -0.09631348, -0.73046875];
    for (g, w) in row.iter().zip(want) {
        assert!(
            (f32::from_bits(g.to_bits()) - w).abs() < 5e-9,
            "{g:?} vs {w}"
        );
    }
}

/// Hardware-f32 dequantization with the FACTS formulas, element by element.
fn hw_dequant(ty: GgmlType, b: &[u8]) -> Vec<f32> {
    let h = |o: usize| f16_to_f64(u16::from_le_bytes([b[o], b[o + 1]])) as f32;
    let nib = |qs: &[u8], i: usize| if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 } as f32;
    match ty {
        GgmlType::Q4_0 => (0..32).map(|i| (nib(&b[2..], i) - 8.0) * h(0)).collect(),
        GgmlType::Q4_1 => (0..32).map(|i| nib(&b[4..], i) * h(0) + h(2)).collect(),
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (qh, qs) = if ty == GgmlType::Q5_0 { (2, 6) } else { (4, 8) };
            let qh = u32::from_le_bytes(b[qh..qh + 4].try_into().unwrap());
            (0..32)
                .map(|i| {
                    let q = nib(&b[qs..], i) + 16.0 * ((qh >> i) & 1) as f32;
                    if ty == GgmlType::Q5_0 {
                        (q - 16.0) * h(0)
                    } else {
                        q * h(0) + h(2)
                    }
                })
                .collect()
        }
        GgmlType::Q8_0 => (0..32).map(|i| b[2 + i] as i8 as f32 * h(0)).collect(),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    #[test]
    fn dequant_matches_hardware_formula(seed in any::<u64>(), ti in 0usize..5) {
        let ty = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0][ti];
        let mut rng = Rng(seed);
        let mut b = vec![0u8; ty.type_size()];
        rng.bytes(&mut b);
        let d = rng.f16_scale(false);
        b[0..2].copy_from_slice(&d.to_le_bytes());
        let mut out = [F32::ZERO; 32];
        dequantize_row(ty, &b, &mut out).unwrap();
        let want = hw_dequant(ty, &b);
        for (o, w) in out.iter().zip(want) {
            prop_assert_eq!(support::quant::canon(o.to_bits()), support::quant::canon(w.to_bits()));
        }
    }
}

/// llama.cpp's `dequantize_row_q5_K` in hardware f32 (no FMA), as written
/// there: per 64 elements `j`, scales and mins `2j` and `2j + 1` by
/// `get_scale_min_k4`, `d1 = d·sc`, `m1 = min·m`, then
/// `d1·((ql & 0xF) + (qh & u1 ? 16 : 0)) − m1` over 32 elements and the
/// high nibbles with `u2` over the next 32, `ql += 32`, `u1, u2 <<= 2`.
fn hw_dequant_q5_k(b: &[u8]) -> Vec<f32> {
    let h = |o: usize| f16_to_f64(u16::from_le_bytes([b[o], b[o + 1]])) as f32;
    let (d, min) = (h(0), h(2));
    let scales = &b[4..16];
    let get_scale_min_k4 = |j: usize| -> (u8, u8) {
        if j < 4 {
            (scales[j] & 63, scales[j + 4] & 63)
        } else {
            (
                (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4),
                (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4),
            )
        }
    };
    let (qh, mut ql) = (&b[16..48], &b[48..176]);
    let (mut u1, mut u2) = (1u8, 2u8);
    let mut y = Vec::with_capacity(256);
    for is in (0..8).step_by(2) {
        let (sc, m) = get_scale_min_k4(is);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = get_scale_min_k4(is + 1);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            let q = (ql[l] & 0xF) as f32 + if qh[l] & u1 != 0 { 16.0 } else { 0.0 };
            y.push(d1 * q - m1);
        }
        for l in 0..32 {
            let q = (ql[l] >> 4) as f32 + if qh[l] & u2 != 0 { 16.0 } else { 0.0 };
            y.push(d2 * q - m2);
        }
        ql = &ql[32..];
        u1 <<= 2;
        u2 <<= 2;
    }
    y
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Q5_K (GGML type 13) against llama.cpp's formula on random super-blocks
    /// (random `d` and `dmin`, some subnormal).
    #[test]
    fn q5_k_dequant_matches_llamacpp_formula(seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let mut b = vec![0u8; GgmlType::Q5_K.type_size()];
        rng.bytes(&mut b);
        let (d, dmin) = (rng.f16_scale(false), rng.f16_scale(true));
        b[0..2].copy_from_slice(&d.to_le_bytes());
        b[2..4].copy_from_slice(&dmin.to_le_bytes());
        let mut out = [F32::ZERO; 256];
        dequantize_row(GgmlType::Q5_K, &b, &mut out).unwrap();
        for (i, (o, w)) in out.iter().zip(hw_dequant_q5_k(&b)).enumerate() {
            prop_assert_eq!(support::quant::canon(o.to_bits()), support::quant::canon(w.to_bits()), "element {}", i);
        }
    }
}

#[test]
fn dequant_rejects_bad_lengths() {
    let mut out = [F32::ZERO; 32];
    assert!(dequantize_row(GgmlType::Q4_1, &[0u8; 19], &mut out).is_err());
    assert!(dequantize_row(GgmlType::Q4_1, &[0u8; 20], &mut out[..31]).is_err());
    assert!(dequantize_row(GgmlType::Q8_1, &[0u8; 36], &mut out).is_err());
    let mut k = [F32::ZERO; 256];
    assert!(dequantize_row(GgmlType::Q5_K, &[0u8; 175], &mut k).is_err());
    assert!(dequantize_row(GgmlType::Q5_K, &[0u8; 176], &mut k[..255]).is_err());
    assert!(k.iter().all(|v| *v == F32::ZERO));
    assert!(out.iter().all(|v| *v == F32::ZERO));
}
