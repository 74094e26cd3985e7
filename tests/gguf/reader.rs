//! The GGUF reader against files written by the reference implementation
//! (gguf-py) and against the real SmolLM2 model.
//!
//! Expected values come from outside detllm: the values written by
//! `scripts/gguf_fixtures.py all-types`, the manifests that gguf-py's reader
//! produces (`scripts/make-fixtures.sh` regenerates all of them), and the
//! facts in LLAMACPP-FACTS.md §1-3 (checked there against llama.cpp and gguf-py).

use crate::support;

use detllm::F32;
use detllm::gguf::{File, GgufError, Value, ValueType};
use detllm::quant::GgmlType;
use support::gguf::*;

fn f32_of(x: F32) -> f32 {
    f32::from_bits(x.to_bits())
}

#[test]
fn gguf_py_all_types_values() {
    let bytes = data("gguf_py_all_types.gguf");
    let f = File::parse(&bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 64);
    assert_eq!(f.data_offset() % 64, 0);
    assert_eq!(f.n_kv(), 21);
    assert_eq!(f.n_tensors(), 5);

    assert_eq!(f.get("t.u8"), Some(Value::U8(200)));
    assert_eq!(f.get("t.i8"), Some(Value::I8(-100)));
    assert_eq!(f.get("t.u16"), Some(Value::U16(60000)));
    assert_eq!(f.get("t.i16"), Some(Value::I16(-30000)));
    assert_eq!(f.get("t.u32"), Some(Value::U32(4_000_000_000)));
    assert_eq!(f.get("t.i32"), Some(Value::I32(-2_000_000_000)));
    assert_eq!(
        f.get("t.f32"),
        Some(Value::F32(F32::from_bits(1e-5f32.to_bits())))
    );
    assert_eq!(f.get("t.bool"), Some(Value::Bool(true)));
    assert_eq!(f.get("t.false"), Some(Value::Bool(false)));
    assert_eq!(f.get("t.str"), Some(Value::Str("héllo wörld".as_bytes())));
    assert_eq!(f.get("t.u64"), Some(Value::U64((1 << 63) + 5)));
    assert_eq!(f.get("t.i64"), Some(Value::I64(-(1 << 62))));
    assert_eq!(f.get("t.f64"), Some(Value::F64(0.1f64.to_bits())));
    assert_eq!(f.get_str("general.architecture"), Ok(Some("llama")));
    assert_eq!(f.get_str("t.str"), Ok(Some("héllo wörld")));

    let a = f.get_array("t.arr_str").unwrap().unwrap();
    assert_eq!(a.elem_type(), ValueType::String);
    let s: Vec<&[u8]> = a.str_iter().unwrap().collect();
    assert_eq!(s, [&b"a"[..], b"", "Ġthe".as_bytes(), b"<|im_end|>"]);
    assert_eq!(a.iter().nth(2), Some(Value::Str("Ġthe".as_bytes())));

    let a = f.get_array("t.arr_i32").unwrap().unwrap();
    let want = [1, -2, 3, i32::MAX, i32::MIN];
    assert_eq!(a.len(), 5);
    for (i, &w) in want.iter().enumerate() {
        assert_eq!(a.get_i32(i), Ok(Some(w)));
    }
    assert_eq!(a.get_i32(5), Ok(None));
    assert_eq!(a.get_i32(usize::MAX), Ok(None));
    let via_iter: Vec<Value> = a.iter().collect();
    assert_eq!(via_iter, want.map(Value::I32));

    let a = f.get_array("t.arr_f32").unwrap().unwrap();
    let want = [0.5f32, -2.0, 1e-5].map(|x| F32::from_bits(x.to_bits()));
    for (i, &w) in want.iter().enumerate() {
        assert_eq!(a.get_f32(i), Ok(Some(w)));
    }
    assert_eq!(a.get_f32(3), Ok(None));
    assert!(matches!(
        a.get_i32(0),
        Err(GgufError::WrongType {
            expected: ValueType::I32,
            found: ValueType::F32,
            ..
        })
    ));

    let a = f.get_array("t.arr_u8").unwrap().unwrap();
    assert_eq!(a.get_i32(2), Ok(Some(255)));
    let a = f.get_array("t.arr_u64").unwrap().unwrap();
    assert!(matches!(
        a.get_i32(0),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    let a = f.get_array("t.arr_bool").unwrap().unwrap();
    assert_eq!(
        a.iter().collect::<Vec<_>>(),
        [Value::Bool(true), Value::Bool(false)]
    );
    assert!(matches!(
        a.str_iter(),
        Err(GgufError::WrongType {
            expected: ValueType::String,
            ..
        })
    ));

    // Tensors: types, shapes, exact bytes.
    let t = f.tensor("f32").unwrap();
    assert_eq!((t.ty, t.n_dims, t.ne), (GgmlType::F32, 2, [3, 2, 1, 1]));
    let vals: Vec<f32> = t
        .data
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]);
    let t = f.tensor("f16").unwrap();
    assert_eq!((t.ty, t.ne), (GgmlType::F16, [4, 1, 1, 1]));
    let h: Vec<u16> = t
        .data
        .chunks(2)
        .map(|c| u16::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(h, [0x3C00, 0xB800, 0x7BFF, 0x0001]);
    let t = f.tensor("q8_0").unwrap();
    assert_eq!(
        (t.ty, t.ne, t.data.len(), t.row_bytes()),
        (GgmlType::Q8_0, [32, 2, 1, 1], 68, 34)
    );
    let t = f.tensor("q4_1").unwrap();
    assert_eq!(
        (t.ty, t.ne, t.data.len()),
        (GgmlType::Q4_1, [64, 1, 1, 1], 40)
    );
    let t = f.tensor("bf16").unwrap();
    assert_eq!(
        (t.ty, t.ne, t.data.len()),
        (GgmlType::BF16, [2, 3, 1, 1], 12)
    );
    assert!(f.tensor("missing").is_none());
    assert_eq!(entries(&f), manifest("gguf_py_all_types.manifest"));
}

#[test]
fn getters_separate_missing_from_wrong_type() {
    let bytes = data("gguf_py_all_types.gguf");
    let f = File::parse(&bytes).unwrap();
    // Missing: Ok(None) for every getter.
    assert_eq!(f.get("nope"), None);
    assert_eq!(f.get_u32("nope"), Ok(None));
    assert_eq!(f.get_u64("nope"), Ok(None));
    assert_eq!(f.get_i32("nope"), Ok(None));
    assert_eq!(f.get_f32("nope"), Ok(None));
    assert_eq!(f.get_bool("nope"), Ok(None));
    assert_eq!(f.get_str("nope"), Ok(None));
    assert_eq!(f.get_array("nope"), Ok(None));
    // Lenient integers: any width that fits.
    assert_eq!(f.get_u32("t.u8"), Ok(Some(200)));
    assert_eq!(f.get_i32("t.i8"), Ok(Some(-100)));
    assert_eq!(f.get_u32("t.u16"), Ok(Some(60000)));
    assert_eq!(f.get_i32("t.i16"), Ok(Some(-30000)));
    assert_eq!(f.get_u64("t.u32"), Ok(Some(4_000_000_000)));
    assert_eq!(f.get_u64("t.u64"), Ok(Some((1 << 63) + 5)));
    // Out of range.
    assert!(matches!(
        f.get_i32("t.u32"),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    assert!(matches!(
        f.get_u32("t.i8"),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    assert!(matches!(
        f.get_u64("t.i64"),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    assert!(matches!(
        f.get_u32("t.u64"),
        Err(GgufError::ValueOutOfRange { .. })
    ));
    // Wrong types.
    assert!(matches!(
        f.get_u32("t.str"),
        Err(GgufError::WrongType {
            expected: ValueType::U32,
            found: ValueType::String,
            ..
        })
    ));
    assert!(matches!(
        f.get_u32("t.bool"),
        Err(GgufError::WrongType {
            found: ValueType::Bool,
            ..
        })
    ));
    assert!(matches!(
        f.get_u32("t.f32"),
        Err(GgufError::WrongType {
            found: ValueType::F32,
            ..
        })
    ));
    assert!(matches!(
        f.get_f32("t.f64"),
        Err(GgufError::WrongType {
            expected: ValueType::F32,
            found: ValueType::F64,
            ..
        })
    ));
    assert!(matches!(
        f.get_f32("t.u32"),
        Err(GgufError::WrongType {
            found: ValueType::U32,
            ..
        })
    ));
    assert!(matches!(
        f.get_bool("t.u8"),
        Err(GgufError::WrongType {
            expected: ValueType::Bool,
            ..
        })
    ));
    assert!(matches!(
        f.get_str("t.arr_str"),
        Err(GgufError::WrongType {
            expected: ValueType::String,
            found: ValueType::Array,
            ..
        })
    ));
    assert!(matches!(
        f.get_array("t.str"),
        Err(GgufError::WrongType {
            expected: ValueType::Array,
            ..
        })
    ));
    assert_eq!(f.get_bool("t.bool"), Ok(Some(true)));
    assert_eq!(f.get_f32("t.f32"), Ok(Some(F32::from_bits(0x3727_C5AC))));
}

#[test]
fn tiny_llama_matches_gguf_py() {
    let Some(p) = support::model::tiny_path() else {
        return;
    };
    let bytes = std::fs::read(p).unwrap();
    let f = File::parse(&bytes).unwrap();
    assert_eq!(entries(&f), manifest("tiny-llama.manifest"));
    assert_eq!(f.get_u32("llama.embedding_length"), Ok(Some(64)));
    let toks = f.get_array("tokenizer.ggml.tokens").unwrap().unwrap();
    assert_eq!(toks.str_iter().unwrap().next(), Some(&b"<|endoftext|>"[..]));
    // token_embd (F32, numpy shape (300, 64)) row 0 is what the writer wrote:
    // the manifest's `row0` lines (compared above for every F32/F16 tensor)
    // hold gguf-py's values; here the first four again, from the manifest.
    let t = f.tensor("token_embd.weight").unwrap();
    assert_eq!((t.ty, t.ne), (GgmlType::F32, [64, 300, 1, 1]));
    let row0: Vec<u32> = t.data[..16]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(row0, [0x3dd0_fd78, 0xbe02_d99d, 0x3cab_40d7, 0xbce8_8ef5]);
    // blk.0.attn_q (F16): row 0 through detllm's f16 conversion.
    let q = f.tensor("blk.0.attn_q.weight").unwrap();
    let q0 = F32::from_f16_bits(u16::from_le_bytes([q.data[0], q.data[1]]));
    assert_eq!(q0.to_bits(), 0xbd0f_0000);
}

fn load_model() -> Option<Vec<u8>> {
    support::model::bytes()
}

#[test]
fn real_model_facts() {
    let Some(bytes) = load_model() else { return };
    assert_eq!(bytes.len(), 98_362_432);
    let f = File::parse(&bytes).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.n_tensors(), 272);
    assert_eq!(f.n_kv(), 33);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.get("general.alignment"), None); // the default
    assert_eq!(f.data_offset(), 1_785_664);

    let e = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (e.ty, e.n_dims, e.ne, e.offset),
        (GgmlType::Q8_0, 2, [576, 49152, 1, 1], 0)
    );
    assert_eq!(e.data.len(), 30_081_024);
    assert_eq!(e.row_bytes(), 612);
    assert_eq!(
        e.data.as_ptr() as usize - bytes.as_ptr() as usize,
        1_785_664
    );
    // Token 1's embedding[0..4] (Q8_0: qs * d), as gguf-py/llama.cpp give it.
    let row = &e.data[612..612 + 34];
    let d = f32_of(F32::from_f16_bits(u16::from_le_bytes([row[0], row[1]])));
    let got: Vec<f32> = row[2..6].iter().map(|&q| q as i8 as f32 * d).collect();
    for (g, w) in got
        .iter()
        .zip([-0.02380371f32, -0.01586914, -0.03967285, 0.01586914])
    {
        assert!((g - w).abs() < 1e-7, "{got:?}");
    }

    for l in 0..30 {
        let shape = |n: &str| {
            let t = f.tensor(&format!("blk.{l}.{n}.weight")).unwrap();
            (t.ty, t.ne[0], t.ne[1], t.data.len())
        };
        assert_eq!(shape("attn_q"), (GgmlType::Q4_1, 576, 576, 576 * 360));
        assert_eq!(shape("attn_k"), (GgmlType::Q4_1, 576, 192, 192 * 360));
        assert_eq!(shape("attn_v"), (GgmlType::Q4_1, 576, 192, 192 * 360));
        assert_eq!(shape("attn_output"), (GgmlType::Q4_1, 576, 576, 576 * 360));
        assert_eq!(shape("ffn_gate"), (GgmlType::Q4_1, 576, 1536, 1536 * 360));
        assert_eq!(shape("ffn_up"), (GgmlType::Q4_1, 576, 1536, 1536 * 360));
        assert_eq!(shape("ffn_down"), (GgmlType::Q4_1, 1536, 576, 576 * 960));
        assert_eq!(shape("attn_norm"), (GgmlType::F32, 576, 1, 576 * 4));
        assert_eq!(shape("ffn_norm"), (GgmlType::F32, 576, 1, 576 * 4));
    }
    // Q4_1 block 0 of blk.0.attn_q: d, m and y[0..4] = q*d + m.
    let q = f.tensor("blk.0.attn_q.weight").unwrap();
    let d = f32_of(F32::from_f16_bits(u16::from_le_bytes([
        q.data[0], q.data[1],
    ])));
    let m = f32_of(F32::from_f16_bits(u16::from_le_bytes([
        q.data[2], q.data[3],
    ])));
    assert!(
        (d - 0.12683105).abs() < 1e-7 && (m + 0.73046875).abs() < 1e-7,
        "{d} {m}"
    );
    let y: Vec<f32> = q.data[4..8]
        .iter()
        .map(|&b| (b & 15) as f32 * d + m)
        .collect();
    for (g, w) in y
        .iter()
        .zip([-0.09631348f32, 0.15734863, -0.09631348, -0.73046875])
    {
        assert!((g - w).abs() < 1e-6, "{y:?}");
    }

    let on = f.tensor("output_norm.weight").unwrap();
    assert_eq!(
        on.data.as_ptr() as usize + on.data.len(),
        bytes.as_ptr() as usize + bytes.len()
    );
    assert!(f.tensor("output.weight").is_none());
    assert_eq!(f.tensors().count(), 272);

    assert_eq!(f.get_str("general.architecture"), Ok(Some("llama")));
    assert_eq!(f.get_u32("llama.rope.dimension_count"), Ok(Some(64)));
    assert_eq!(f.get_u32("llama.context_length"), Ok(Some(8192)));
    assert_eq!(f.get_u32("llama.block_count"), Ok(Some(30)));
    assert_eq!(f.get_u32("llama.embedding_length"), Ok(Some(576)));
    assert_eq!(f.get_u32("llama.attention.head_count"), Ok(Some(9)));
    assert_eq!(f.get_u32("llama.attention.head_count_kv"), Ok(Some(3)));
    assert_eq!(
        f.get_f32("llama.attention.layer_norm_rms_epsilon"),
        Ok(Some(F32::from_bits(1e-5f32.to_bits())))
    );
    assert_eq!(1e-5f32.to_bits(), 0x3727_C5AC);
    assert_eq!(
        f.get_bool("tokenizer.ggml.add_space_prefix"),
        Ok(Some(false))
    );
    assert_eq!(f.get_bool("tokenizer.ggml.add_bos_token"), Ok(Some(false)));
    assert_eq!(f.get_u32("tokenizer.ggml.unknown_token_id"), Ok(Some(0)));
    assert_eq!(f.get_u32("tokenizer.ggml.padding_token_id"), Ok(Some(2)));
    assert_eq!(f.get_u32("tokenizer.ggml.eos_token_id"), Ok(Some(2)));
    assert_eq!(f.get_u32("general.file_type"), Ok(Some(3)));
    assert_eq!(f.get_u32("general.quantization_version"), Ok(Some(2)));
    assert_eq!(f.get_str("tokenizer.ggml.model"), Ok(Some("gpt2")));
    assert_eq!(f.get_str("tokenizer.ggml.pre"), Ok(Some("smollm")));
    let tmpl = f.get_str("tokenizer.chat_template").unwrap().unwrap();
    assert!(tmpl.starts_with("{% for message in messages %}"), "{tmpl}");

    let toks = f.get_array("tokenizer.ggml.tokens").unwrap().unwrap();
    assert_eq!(toks.len(), 49152);
    let mut it = toks.str_iter().unwrap();
    assert_eq!(it.next(), Some(&b"<|endoftext|>"[..]));
    assert_eq!(it.next(), Some(&b"<|im_start|>"[..]));
    assert_eq!(it.next(), Some(&b"<|im_end|>"[..]));
    assert_eq!(toks.str_iter().unwrap().count(), 49152);
    // "Hello" = 19556 in the reference tokenization (FACTS §6).
    assert_eq!(toks.str_iter().unwrap().nth(19556), Some(&b"Hello"[..]));
    let types = f.get_array("tokenizer.ggml.token_type").unwrap().unwrap();
    assert_eq!(types.len(), 49152);
    assert!((0..17).all(|i| types.get_i32(i) == Ok(Some(3))));
    assert_eq!(types.get_i32(17), Ok(Some(1)));
    assert_eq!(types.get_i32(49151), Ok(Some(1)));
    assert_eq!(types.get_i32(49152), Ok(None));
    let merges = f.get_array("tokenizer.ggml.merges").unwrap().unwrap();
    assert_eq!(merges.len(), 48900);
    assert_eq!(merges.str_iter().unwrap().count(), 48900);
}

#[test]
fn real_model_matches_gguf_py_manifest() {
    let Some(bytes) = load_model() else { return };
    let f = File::parse(&bytes).unwrap();
    assert_eq!(entries(&f), manifest("smollm2-q4_1.manifest"));
}

#[test]
fn real_model_cut_anywhere_in_the_header_is_an_error() {
    // Every prefix that ends inside the metadata or tensor infos (a strided
    // sample: the header is 1.8 MB), plus every prefix of the last tensor.
    let Some(bytes) = load_model() else { return };
    let header = 1_785_664;
    for cut in (0..header).step_by(997).chain(header..header + 64) {
        assert!(File::parse(&bytes[..cut]).is_err(), "cut at {cut}");
    }
    let n = bytes.len();
    for cut in n - 2304..n {
        assert!(matches!(
            File::parse(&bytes[..cut]),
            Err(GgufError::DataOutOfBounds { index: 271, .. })
        ));
    }
}
