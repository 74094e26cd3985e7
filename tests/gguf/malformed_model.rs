//! Model-level validation of well-formed GGUF files that are not a usable
//! model: a required tensor missing, a tensor of the wrong shape, required
//! metadata missing or mistyped, an arena too small. Each must be its
//! specific typed error, and a failed load must leave the arena as it was.
//!
//! The files are the crate's synthetic models (llama and qwen2) rewritten
//! through `gguf::Writer` with exactly one defect.
#![cfg(feature = "std")]

use detllm::gguf::{File, TensorSpec, Value, ValueType, Writer};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Arch, Model};
use detllm::quant::GgmlType;
use detllm::{Arena, Error};

fn synth(spec: &SynthSpec) -> Vec<u8> {
    synth_vec(spec).expect("synthetic model")
}

fn specs() -> [SynthSpec; 2] {
    let llama = SynthSpec::TINY;
    let qwen = SynthSpec {
        arch: Arch::Qwen2,
        separate_output: true,
        weight_type: GgmlType::Q8_0,
        ..SynthSpec::TINY
    };
    [llama, qwen]
}

/// One defect to apply while copying a file.
#[derive(Clone, Copy, Debug)]
enum Defect<'k> {
    None,
    DropKey(&'k str),
    /// Rewrite a numeric key as a string.
    MistypeKey(&'k str),
    DropTensor(&'k str),
    /// Grow the tensor's row count by one (its data by one row).
    ExtraRow(&'k str),
    /// Swap the first two dimensions (same bytes for f32/f16, so only the
    /// shape is wrong; quantized tensors whose new row length is not a
    /// multiple of the block are rejected by the parser instead).
    Transpose(&'k str),
}

fn copy_kv(w: &mut Writer<'_>, key: &str, v: Value<'_>) {
    let r = match v {
        Value::U8(x) => w.add_u8(key, x),
        Value::I8(x) => w.add_i8(key, x),
        Value::U16(x) => w.add_u16(key, x),
        Value::I16(x) => w.add_i16(key, x),
        Value::U32(x) => w.add_u32(key, x),
        Value::I32(x) => w.add_i32(key, x),
        Value::F32(x) => w.add_f32(key, x),
        Value::Bool(x) => w.add_bool(key, x),
        Value::Str(s) => w.add_str_bytes(key, s),
        Value::U64(x) => w.add_u64(key, x),
        Value::I64(x) => w.add_i64(key, x),
        Value::F64(bits) => w.add_f64_bits(key, bits),
        Value::Array(a) if a.elem_type() == ValueType::String => {
            let items: Vec<&[u8]> = a.str_iter().expect("strings").collect();
            w.add_array_bytes(key, &items)
        }
        Value::Array(a) => w.add_array_raw(key, a.elem_type(), a.raw()),
    };
    r.expect("copy kv");
}

/// `src` rewritten with `defect` applied.
fn rewrite(src: &[u8], defect: Defect<'_>) -> Vec<u8> {
    let f = File::parse(src).expect("source parses");
    let write = |w: &mut Writer<'_>| {
        for (k, v) in f.kvs() {
            let k = std::str::from_utf8(k).expect("utf-8 key");
            match defect {
                Defect::DropKey(d) if d == k => {}
                Defect::MistypeKey(d) if d == k => w.add_str(k, "12").expect("kv"),
                _ => copy_kv(w, k, v),
            }
        }
    };
    let mut extra: Vec<Vec<u8>> = Vec::new();
    let mut shapes: Vec<[u64; 4]> = Vec::new();
    let infos: Vec<_> = f.tensors().collect();
    for t in &infos {
        let mut ne = t.ne;
        let mut data = t.data.to_vec();
        match defect {
            Defect::ExtraRow(n) if n == t.name_str() => {
                ne[1] += 1;
                data.extend(std::iter::repeat_n(0u8, t.row_bytes() as usize));
            }
            Defect::Transpose(n) if n == t.name_str() => ne.swap(0, 1),
            _ => {}
        }
        shapes.push(ne);
        extra.push(data);
    }
    let specs: Vec<TensorSpec<'_>> = infos
        .iter()
        .zip(&shapes)
        .zip(&extra)
        .filter(|((t, _), _)| !matches!(defect, Defect::DropTensor(n) if n == t.name_str()))
        .map(|((t, ne), data)| TensorSpec {
            name: t.name_str(),
            ty: t.ty,
            ne: &ne[..t.n_dims as usize],
            data,
        })
        .collect();
    let mut m = Writer::measure();
    write(&mut m);
    let len = m.finish(&specs).expect("measure");
    let mut out = vec![0u8; len];
    let mut w = Writer::new(&mut out);
    write(&mut w);
    let n = w.finish(&specs).expect("write");
    out.truncate(n);
    out
}

/// Loads `bytes` as a model into a fresh arena of `arena_len` bytes; on
/// failure also checks that the arena was not touched.
fn load(bytes: &[u8], arena_len: usize) -> Result<(), Error> {
    let file = File::parse(bytes)?;
    let mut buf = vec![0u8; arena_len];
    let mut arena = Arena::new(&mut buf);
    let before = arena.remaining();
    match Model::from_gguf(&file, bytes, &mut arena) {
        Ok(_) => Ok(()),
        Err(e) => {
            assert_eq!(
                arena.remaining(),
                before,
                "failed load carved from the arena ({e:?})"
            );
            Err(e)
        }
    }
}

const ARENA: usize = 1 << 20;

#[test]
fn the_unmodified_rewrite_loads() {
    for spec in specs() {
        let src = synth(&spec);
        let copy = rewrite(&src, Defect::None);
        assert_eq!(load(&copy, ARENA), Ok(()), "{:?}", spec.arch);
    }
}

/// Every tensor a model needs, dropped one at a time.
#[test]
fn each_missing_required_tensor_is_missing_tensor() {
    for spec in specs() {
        let src = synth(&spec);
        let f = File::parse(&src).expect("parse");
        let mut n = 0;
        for t in f.tensors() {
            let name = t.name_str();
            let got = load(&rewrite(&src, Defect::DropTensor(name)), ARENA);
            if name == "output.weight" {
                // Optional: the head falls back to the tied embedding.
                assert_eq!(got, Ok(()), "{name}");
            } else {
                assert_eq!(
                    got,
                    Err(Error::MissingTensor {
                        name: detllm::error::Name::new(name)
                    }),
                    "{:?} without {name}",
                    spec.arch
                );
                n += 1;
            }
        }
        assert!(n >= 9 * spec.n_layers, "only {n} tensors checked");
    }
}

/// Every tensor with one extra row: a shape mismatch.
#[test]
fn each_tensor_with_an_extra_row_is_a_shape_mismatch() {
    for spec in specs() {
        let src = synth(&spec);
        let f = File::parse(&src).expect("parse");
        for t in f.tensors().filter(|t| t.n_dims == 2) {
            let name = t.name_str();
            let got = load(&rewrite(&src, Defect::ExtraRow(name)), ARENA);
            if name == "token_embd.weight" && !spec.separate_output {
                // The vocabulary size is the embedding's row count: one more
                // row is a larger, consistent vocabulary.
                assert_eq!(got, Ok(()), "{name}");
                continue;
            }
            assert!(
                matches!(got, Err(Error::ShapeMismatch { .. })),
                "{:?} {name}: {got:?}",
                spec.arch
            );
        }
    }
}

/// Non-square matrices transposed: wrong shape, same bytes.
#[test]
fn transposed_matrices_are_rejected() {
    for spec in specs() {
        let src = synth(&spec);
        let f = File::parse(&src).expect("parse");
        let mut n = 0;
        for t in f.tensors().filter(|t| t.n_dims == 2 && t.ne[0] != t.ne[1]) {
            let name = t.name_str();
            let bytes = rewrite(&src, Defect::Transpose(name));
            match File::parse(&bytes) {
                // A quantized row length that is not a whole number of blocks.
                Err(_) => continue,
                Ok(_) => {
                    let got = load(&bytes, ARENA);
                    assert!(
                        matches!(got, Err(Error::ShapeMismatch { .. })),
                        "{:?} {name}: {got:?}",
                        spec.arch
                    );
                    n += 1;
                }
            }
        }
        assert!(n > 0, "no transposed matrix reached the loader");
    }
}

/// Required hyperparameters missing or of the wrong type.
#[test]
fn missing_or_mistyped_metadata_is_typed() {
    for spec in specs() {
        let src = synth(&spec);
        let arch = spec.arch.name();
        for suffix in [
            "embedding_length",
            "block_count",
            "feed_forward_length",
            "attention.head_count",
        ] {
            let key = format!("{arch}.{suffix}");
            for defect in [Defect::DropKey(&key), Defect::MistypeKey(&key)] {
                let got = load(&rewrite(&src, defect), ARENA);
                assert!(
                    matches!(got, Err(Error::MissingMetadata { .. } | Error::Gguf(_))),
                    "{defect:?}: {got:?}"
                );
            }
        }
        let got = load(
            &rewrite(&src, Defect::DropKey("general.architecture")),
            ARENA,
        );
        assert!(got.is_err(), "no architecture: {got:?}");
    }
}

/// The model's arena need is exact: one byte less is `ArenaExhausted` with
/// the arena untouched.
#[test]
fn arena_one_byte_short_is_exhausted() {
    for spec in specs() {
        let src = synth(&spec);
        let file = File::parse(&src).expect("parse");
        let need = Model::bytes_required(&detllm::model::Config::from_gguf(&file).expect("config"))
            .expect("size");
        assert_eq!(load(&src, need), Ok(()));
        assert!(matches!(
            load(&src, need - 1),
            Err(Error::ArenaExhausted { .. })
        ));
    }
}

/// An architecture the crate does not run is refused by name (the message
/// names it, not "invalid configuration"); every one it runs loads.
#[test]
fn unsupported_architecture_is_named() {
    let src = synth(&SynthSpec::TINY);
    // general.architecture's value: u64 length 5, then "llama".
    let pat = b"\x05\x00\x00\x00\x00\x00\x00\x00llama";
    let at = src
        .windows(pat.len())
        .position(|w| w == pat)
        .expect("architecture value");
    let mut bytes = src.clone();
    bytes[at + 8..at + 13].copy_from_slice(b"mamba");
    let err = load(&bytes, 1 << 20).unwrap_err();
    assert!(
        matches!(err, Error::UnsupportedArchitecture { .. }),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "unsupported architecture \"mamba\"");
    for spec in [SynthSpec::GEMMA3, SynthSpec::QWEN3, SynthSpec::LLAMA3] {
        load(&synth(&spec), 1 << 20).expect("newer architectures load");
    }
}
