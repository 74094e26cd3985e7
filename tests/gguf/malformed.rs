//! Crafted malformed GGUF files: each must fail with its specific
//! `GgufError` variant, and nothing may panic. Ends with a proptest of random
//! mutations of a valid file.
//!
//! (Model-level checks — a missing required tensor, a tensor of the wrong
//! shape — belong to the model loader, not to the file parser.)

use crate::support;

use detllm::gguf::{File, GgufError, Limit, TensorSpec, ValueType, Writer, limits};
use detllm::quant::GgmlType;
use detllm::{Error, F32};
use proptest::prelude::*;
use support::gguf::Raw;

fn parse(r: &Raw) -> Result<File<'_>, GgufError> {
    File::parse(&r.0)
}

/// A header with `n_kv` pairs and no tensors, followed by `body`.
fn kvs(n_kv: u64, body: impl FnOnce(&mut Raw)) -> Raw {
    let mut r = Raw::header(3, 0, n_kv);
    body(&mut r);
    r
}

/// A file with the given tensor infos (name, ne, ggml type, offset), then
/// padding to 32 and `data_len` zero bytes.
fn tensors(infos: &[(&[u8], &[u64], u32, u64)], data_len: usize) -> Raw {
    let mut r = Raw::header(3, infos.len() as u64, 0);
    for &(name, ne, ty, off) in infos {
        r.info(name, ne, ty, off);
    }
    r.pad_to(32).zeros(data_len);
    r
}

/// A valid file with every value type and three tensors, written by the
/// crate's writer.
fn valid_file() -> Vec<u8> {
    let d0 = [1u8; 40];
    let d1 = [2u8; 68];
    let d2 = [3u8; 8];
    let specs = [
        TensorSpec {
            name: "q",
            ty: GgmlType::Q4_1,
            ne: &[32, 2],
            data: &d0,
        },
        TensorSpec {
            name: "e",
            ty: GgmlType::Q8_0,
            ne: &[32, 2],
            data: &d1,
        },
        TensorSpec {
            name: "n",
            ty: GgmlType::F32,
            ne: &[2],
            data: &d2,
        },
    ];
    let fill = |w: &mut Writer<'_>| -> detllm::Result<()> {
        w.set_alignment(16)?;
        w.add_u8("a", 1)?;
        w.add_i16("b", -2)?;
        w.add_f32("c", F32::ONE)?;
        w.add_bool("d", true)?;
        w.add_str("e", "text")?;
        w.add_i64("f", -5)?;
        w.add_f64_bits("g", 1)?;
        w.add_array_str("h", &["x", "yz", ""])?;
        w.add_array_i32("i", &[1, 2])?;
        w.add_array_f32("j", &[F32::TWO])?;
        Ok(())
    };
    let mut m = Writer::measure();
    fill(&mut m).unwrap();
    let mut buf = vec![0u8; m.finish(&specs).unwrap()];
    let mut w = Writer::new(&mut buf);
    fill(&mut w).unwrap();
    w.finish(&specs).unwrap();
    File::parse(&buf).unwrap();
    buf
}

/// Touch every accessor of a parsed file (must not panic).
fn exercise(f: &File<'_>) {
    for (k, v) in f.kvs() {
        let key = std::str::from_utf8(k).unwrap();
        assert_eq!(f.get(key), Some(v));
        let _ = (
            f.get_u32(key),
            f.get_u64(key),
            f.get_i32(key),
            f.get_f32(key),
        );
        let _ = (f.get_bool(key), f.get_str(key), f.get_array(key));
        if let detllm::gguf::Value::Array(a) = v {
            assert_eq!(a.iter().count(), a.len());
            if let Ok(s) = a.str_iter() {
                assert_eq!(s.count(), a.len());
            }
            for i in 0..a.len() + 1 {
                let _ = (a.get_i32(i), a.get_f32(i));
            }
        }
    }
    for t in f.tensors() {
        assert_eq!(f.tensor(t.name_str()), Some(t));
        assert_eq!(t.data.len() as u64, t.row_bytes() * t.n_rows());
    }
    assert_eq!(f.tensors().count(), f.n_tensors());
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let buf = valid_file();
    for cut in 0..buf.len() {
        let e = File::parse(&buf[..cut]).unwrap_err();
        if cut < 4 {
            assert!(
                matches!(
                    e,
                    GgufError::Truncated {
                        offset: 0,
                        needed: 4
                    }
                ),
                "{cut}: {e:?}"
            );
        }
        // The error names a place inside (or at the end of) the prefix.
        let line = e.to_string();
        assert!(!line.is_empty() && !line.contains('\n'));
    }
    assert!(File::parse(&buf).is_ok());
    // The gguf-py file too, up to the end of its last tensor (gguf-py pads
    // after it; cutting only that padding leaves a valid file).
    let py = support::gguf::data("gguf_py_all_types.gguf");
    let f = File::parse(&py).unwrap();
    let last = f.tensors().last().unwrap();
    let end = (f.data_offset() + last.offset) as usize + last.data.len();
    assert!(end < py.len());
    for cut in 0..end {
        assert!(File::parse(&py[..cut]).is_err(), "{cut}");
    }
    for cut in end..=py.len() {
        assert!(File::parse(&py[..cut]).is_ok(), "{cut}");
    }
}

#[test]
fn bad_magic() {
    let mut r = Raw::header(3, 0, 0);
    r.0[3] = b'G';
    assert!(matches!(
        parse(&r),
        Err(GgufError::BadMagic {
            found: [b'G', b'G', b'U', b'G']
        })
    ));
    r.0[..4].copy_from_slice(b"gguf");
    assert!(matches!(parse(&r), Err(GgufError::BadMagic { .. })));
}

#[test]
fn unsupported_versions() {
    for v in [0u32, 1, 4, 0xFFFF_FFFF] {
        assert!(matches!(
            parse(&Raw::header(v, 0, 0)),
            Err(GgufError::UnsupportedVersion { version }) if version == v
        ));
    }
    assert!(parse(&Raw::header(2, 0, 0)).is_ok());
    assert!(parse(&Raw::header(3, 0, 0)).is_ok());
}

#[test]
fn byte_swapped_version() {
    for v in [2u32, 3] {
        let r = Raw::header(v.swap_bytes(), 0, 0);
        assert!(
            matches!(parse(&r), Err(GgufError::ByteSwapped { version }) if version == v.swap_bytes())
        );
    }
}

#[test]
fn negative_counts() {
    assert!(matches!(
        parse(&Raw::header(3, u64::MAX, 0)),
        Err(GgufError::NegativeCount { offset: 8 })
    ));
    assert!(matches!(
        parse(&Raw::header(3, 0, 1 << 63)),
        Err(GgufError::NegativeCount { offset: 16 })
    ));
}

#[test]
fn huge_counts() {
    assert!(matches!(
        parse(&Raw::header(3, 0, 1 << 40)),
        Err(GgufError::LimitExceeded {
            limit: Limit::KvCount,
            offset: 16,
            value: 1099511627776,
            ..
        })
    ));
    assert!(matches!(
        parse(&Raw::header(3, limits::MAX_TENSORS as u64 + 1, 0)),
        Err(GgufError::LimitExceeded {
            limit: Limit::TensorCount,
            offset: 8,
            ..
        })
    ));
    // Within the limits but more than the bytes could hold.
    let r = kvs(500, |r| {
        r.kv_u32(b"k", 1);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::CountExceedsData {
            offset: 16,
            count: 500,
            ..
        })
    ));
    let mut r = Raw::header(3, 100, 0);
    r.zeros(24 * 99);
    assert!(matches!(
        parse(&r),
        Err(GgufError::CountExceedsData {
            offset: 8,
            count: 100,
            ..
        })
    ));
}

#[test]
fn huge_string_lengths() {
    // Key length.
    let r = kvs(1, |r| {
        r.u64(u64::MAX).bytes(b"key").u32(4).u32(1);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::StringTooLong {
            offset: 24,
            len: u64::MAX,
            ..
        })
    ));
    // String value length one past the end.
    let r = kvs(1, |r| {
        r.str(b"k").u32(8).u64(6).bytes(b"hello");
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::StringTooLong {
            offset: 37,
            len: 6,
            remaining: 5
        })
    ));
    // Tensor name length.
    let mut r = Raw::header(3, 1, 0);
    r.u64(1 << 62).zeros(40);
    assert!(matches!(
        parse(&r),
        Err(GgufError::StringTooLong { offset: 24, .. })
    ));
}

#[test]
fn huge_array_lengths() {
    for elem in [0u32, 5, 10, 8] {
        let r = kvs(1, |r| {
            r.str(b"arr").u32(9).u32(elem).u64(u64::MAX / 2).zeros(64);
        });
        assert!(
            matches!(parse(&r), Err(GgufError::ArrayTooLong { offset: 39, .. })),
            "{elem}"
        );
    }
    // A string array whose count fits but whose last string does not.
    let r = kvs(1, |r| {
        r.str(b"arr")
            .u32(9)
            .u32(8)
            .u64(2)
            .str(b"ok")
            .u64(100)
            .bytes(b"short");
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::StringTooLong { len: 100, .. })
    ));
}

#[test]
fn invalid_value_types() {
    for ty in [13u32, 100, 0xFFFF_FFFF] {
        let r = kvs(1, |r| {
            r.kv(b"k", ty, &[0; 8]);
        });
        assert!(
            matches!(parse(&r), Err(GgufError::InvalidValueType { offset: 33, type_id }) if type_id == ty)
        );
        let r = kvs(1, |r| {
            r.str(b"k").u32(9).u32(ty).u64(1).zeros(8);
        });
        assert!(matches!(
            parse(&r),
            Err(GgufError::InvalidValueType { offset: 37, .. })
        ));
    }
}

#[test]
fn nested_array() {
    let r = kvs(1, |r| {
        r.str(b"k").u32(9).u32(9).u64(1).u32(4).u64(1).u32(7);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::NestedArray { offset: 37 })
    ));
}

#[test]
fn empty_key() {
    let r = kvs(2, |r| {
        r.kv_u32(b"a", 1).kv_u32(b"", 2);
    });
    assert!(matches!(parse(&r), Err(GgufError::EmptyKey { index: 1 })));
}

#[test]
fn non_utf8_key() {
    let r = kvs(1, |r| {
        r.kv_u32(b"general.\xff", 1);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::InvalidUtf8Key { index: 0 })
    ));
}

#[test]
fn non_utf8_string_value_where_utf8_is_needed() {
    let r = kvs(1, |r| {
        r.kv(b"general.name", 8, &[2, 0, 0, 0, 0, 0, 0, 0, 0xC3, 0x28]);
    });
    let f = parse(&r).unwrap(); // like llama.cpp, values are bytes...
    // ...but the &str accessor says where the bad bytes are.
    assert!(matches!(
        f.get_str("general.name"),
        Err(GgufError::InvalidUtf8 { offset: 56 })
    ));
}

#[test]
fn key_too_long() {
    let key = vec![b'k'; limits::MAX_KEY_LEN + 1];
    let r = kvs(1, |r| {
        r.kv_u32(&key, 1);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::LimitExceeded {
            limit: Limit::KeyLength,
            ..
        })
    ));
    let key = vec![b'k'; limits::MAX_KEY_LEN];
    let r = kvs(1, |r| {
        r.kv_u32(&key, 1);
    });
    assert!(parse(&r).is_ok());
}

#[test]
fn duplicate_keys() {
    let r = kvs(3, |r| {
        r.kv_u32(b"a", 1).kv_u32(b"b", 2).kv(b"a", 8, &[0; 8]);
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::DuplicateKey { index: 2, first: 0 })
    ));
}

#[test]
fn alignment_zero_three_and_not_u32() {
    for a in [0u32, 3, 48, 0x8000_0001] {
        let r = kvs(1, |r| {
            r.kv_u32(b"general.alignment", a);
        });
        assert!(matches!(parse(&r), Err(GgufError::BadAlignment { alignment }) if alignment == a));
    }
    let r = kvs(1, |r| {
        r.kv(b"general.alignment", 10, &32u64.to_le_bytes());
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::AlignmentType {
            index: 0,
            found: ValueType::U64
        })
    ));
    let r = kvs(2, |r| {
        r.kv_u32(b"x", 0)
            .kv(b"general.alignment", 5, &32i32.to_le_bytes());
    });
    assert!(matches!(
        parse(&r),
        Err(GgufError::AlignmentType {
            index: 1,
            found: ValueType::I32
        })
    ));
    let r = kvs(1, |r| {
        r.kv_u32(b"general.alignment", 1);
    });
    assert_eq!(parse(&r).unwrap().alignment(), 1);
}

const F32_ID: u32 = 0;
const Q4_1_ID: u32 = 3;

#[test]
fn tensor_name_too_long_and_duplicate_and_non_utf8() {
    let n63 = [b'n'; 63];
    let n64 = [b'n'; 64];
    assert!(parse(&tensors(&[(&n63, &[8], F32_ID, 0)], 32)).is_ok());
    assert!(matches!(
        parse(&tensors(
            &[(b"a", &[8], F32_ID, 0), (&n64, &[8], F32_ID, 32)],
            64
        )),
        Err(GgufError::TensorNameTooLong { index: 1, len: 64 })
    ));
    assert!(matches!(
        parse(&tensors(
            &[
                (b"w", &[8], F32_ID, 0),
                (b"v", &[8], F32_ID, 32),
                (b"w", &[8], F32_ID, 64)
            ],
            96
        )),
        Err(GgufError::DuplicateTensorName { index: 2, first: 0 })
    ));
    assert!(matches!(
        parse(&tensors(&[(b"\xe2\x82", &[8], F32_ID, 0)], 32)),
        Err(GgufError::InvalidUtf8TensorName { index: 0 })
    ));
}

#[test]
fn too_many_dims() {
    assert!(matches!(
        parse(&tensors(&[(b"t", &[1, 1, 1, 1, 8], F32_ID, 0)], 32)),
        Err(GgufError::TooManyDims {
            index: 0,
            n_dims: 5
        })
    ));
    let mut r = Raw::header(3, 1, 0);
    r.str(b"t").u32(u32::MAX).zeros(64);
    assert!(matches!(
        parse(&r),
        Err(GgufError::TooManyDims {
            n_dims: u32::MAX,
            ..
        })
    ));
}

#[test]
fn negative_dim() {
    assert!(matches!(
        parse(&tensors(&[(b"t", &[8, u64::MAX], F32_ID, 0)], 32)),
        Err(GgufError::NegativeDim { index: 0, dim: 1 })
    ));
}

#[test]
fn element_count_overflow() {
    assert!(matches!(
        parse(&tensors(&[(b"t", &[1 << 32, 1 << 32], F32_ID, 0)], 32)),
        Err(GgufError::ElementCountOverflow { index: 0 })
    ));
    assert!(matches!(
        parse(&tensors(
            &[(b"t", &[1 << 20, 1 << 20, 1 << 20, 1 << 4], F32_ID, 0)],
            32
        )),
        Err(GgufError::ElementCountOverflow { index: 0 })
    ));
}

#[test]
fn byte_size_overflow() {
    // 2^62 elements fit an i64, 2^64 bytes do not fit a u64.
    assert!(matches!(
        parse(&tensors(&[(b"t", &[1 << 62], F32_ID, 0)], 32)),
        Err(GgufError::ByteSizeOverflow { index: 0 })
    ));
}

#[test]
fn unknown_and_unsupported_tensor_types() {
    for id in [4u32, 5, 31, 32, 33, 36, 37, 38, 40, 1000, u32::MAX] {
        assert!(
            matches!(
                parse(&tensors(&[(b"t", &[256], id, 0)], 1024)),
                Err(GgufError::UnknownTensorType { index: 0, type_id }) if type_id == id
            ),
            "{id}"
        );
    }
    for id in [10u32, 11, 15, 16, 20, 23, 24, 27, 28, 29, 34, 35, 39] {
        assert!(
            matches!(
                parse(&tensors(&[(b"t", &[256], id, 0)], 1024)),
                Err(GgufError::UnsupportedTensorType { index: 0, type_id }) if type_id == id
            ),
            "{id}"
        );
    }
    for id in [0u32, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 30] {
        let ty = GgmlType::from_u32(id).unwrap();
        let bytes = 256 / ty.block_size() * ty.type_size();
        assert!(
            parse(&tensors(&[(b"t", &[256], id, 0)], bytes)).is_ok(),
            "{id}"
        );
    }
}

#[test]
fn row_not_a_multiple_of_the_block_size() {
    assert!(matches!(
        parse(&tensors(&[(b"t", &[48, 2], Q4_1_ID, 0)], 1024)),
        Err(GgufError::RowNotBlockMultiple {
            index: 0,
            ne0: 48,
            block_size: 32
        })
    ));
    assert!(matches!(
        parse(&tensors(&[(b"t", &[128], 14, 0)], 1024)),
        Err(GgufError::RowNotBlockMultiple {
            ne0: 128,
            block_size: 256,
            ..
        })
    ));
}

#[test]
fn misordered_overlapping_gapped_and_misaligned_offsets() {
    // 8 F32 = 32 bytes each.
    let a: &[u64] = &[8];
    assert!(parse(&tensors(&[(b"a", a, 0, 0), (b"b", a, 0, 32)], 64)).is_ok());
    // Misordered: b stored before a.
    assert!(matches!(
        parse(&tensors(&[(b"a", a, 0, 32), (b"b", a, 0, 0)], 64)),
        Err(GgufError::TensorGap {
            index: 0,
            offset: 32,
            expected: 0
        })
    ));
    // Both at 0.
    assert!(matches!(
        parse(&tensors(&[(b"a", a, 0, 0), (b"b", a, 0, 0)], 64)),
        Err(GgufError::TensorOverlap {
            index: 1,
            offset: 0,
            expected: 32
        })
    ));
    // Overlap within the first tensor (aligned offset).
    let big: &[u64] = &[16];
    assert!(matches!(
        parse(&tensors(&[(b"a", big, 0, 0), (b"b", a, 0, 32)], 128)),
        Err(GgufError::TensorOverlap {
            index: 1,
            offset: 32,
            expected: 64
        })
    ));
    // Gap.
    assert!(matches!(
        parse(&tensors(&[(b"a", a, 0, 0), (b"b", a, 0, 64)], 128)),
        Err(GgufError::TensorGap {
            index: 1,
            offset: 64,
            expected: 32
        })
    ));
    // Not aligned.
    assert!(matches!(
        parse(&tensors(&[(b"a", a, 0, 0), (b"b", a, 0, 33)], 128)),
        Err(GgufError::MisalignedTensor {
            index: 1,
            offset: 33,
            alignment: 32
        })
    ));
    // A size that is not a multiple of the alignment is padded: 3 F32 = 12
    // bytes, next at 32.
    assert!(parse(&tensors(&[(b"a", &[3], 0, 0), (b"b", a, 0, 32)], 64)).is_ok());
    assert!(matches!(
        parse(&tensors(&[(b"a", &[3], 0, 0), (b"b", a, 0, 12)], 64)),
        Err(GgufError::MisalignedTensor { index: 1, .. })
    ));
}

#[test]
fn data_past_end_of_file() {
    let r = tensors(&[(b"a", &[8], 0, 0), (b"b", &[8], 0, 32)], 63);
    let file_len = r.len() as u64;
    assert!(matches!(
        parse(&r),
        Err(GgufError::DataOutOfBounds { index: 1, end, file_len: l }) if end == file_len + 1 && l == file_len
    ));
    // Offset far past the end with a matching (huge) earlier tensor.
    let r = tensors(&[(b"a", &[1 << 40], 0, 0), (b"b", &[8], 0, 1 << 42)], 64);
    assert!(matches!(
        parse(&r),
        Err(GgufError::DataOutOfBounds { index: 0, .. })
    ));
}

#[test]
fn hostile_counts_parse_in_bounded_work() {
    // The worst case for the duplicate scans: the maximum number of tensors,
    // names of equal length that differ only in their last bytes; and the
    // maximum number of keys of the maximum length. Both must parse (they are
    // valid); the bounds in `limits` keep this to ~1e8 short comparisons.
    //
    // The bound, on the limits themselves: the tensor-name scan compares at
    // most MAX_TENSORS²/2 pairs of ≤ 64-byte names, the key scan MAX_KV²/2
    // pairs of ≤ MAX_KEY_LEN-byte keys; both ≤ 1.4e8 comparisons and ≤ 1e10
    // bytes compared. And on the clock, as a guard against a scan that is
    // worse than quadratic: 1.4e8 comparisons at ≥ 1e7 per second (far
    // below any host's speed: 1.9 s measured on a busy 2-core machine for
    // the tensors) is at most 14 s.
    const MAX_PAIRS: usize = 140_000_000;
    let tensor_pairs = limits::MAX_TENSORS * (limits::MAX_TENSORS - 1) / 2;
    let key_pairs = limits::MAX_KV * (limits::MAX_KV - 1) / 2;
    assert!(tensor_pairs <= MAX_PAIRS, "{tensor_pairs} name pairs");
    assert!(key_pairs <= MAX_PAIRS, "{key_pairs} key pairs");
    assert!(key_pairs * limits::MAX_KEY_LEN <= 10_000_000_000);
    let budget = std::time::Duration::from_secs(14);
    let n = limits::MAX_TENSORS;
    let mut r = Raw::header(3, n as u64, 0);
    for i in 0..n {
        let name = format!("{:0>59}{:04x}", "", i);
        r.info(name.as_bytes(), &[0], 0, 0);
    }
    r.pad_to(32);
    let t = std::time::Instant::now();
    let f = parse(&r).unwrap();
    let took = t.elapsed();
    eprintln!("{} tensors parsed in {took:?}", f.n_tensors());
    assert_eq!(f.n_tensors(), n);
    assert!(took < budget, "{n} tensors took {took:?}");

    let n = limits::MAX_KV;
    let mut r = Raw::header(3, 0, n as u64);
    for i in 0..n {
        let key = format!("{:0>1020}{:04x}", "", i);
        r.kv_u32(key.as_bytes(), 0);
    }
    let t = std::time::Instant::now();
    let f = parse(&r).unwrap();
    let took = t.elapsed();
    eprintln!("{} keys of 1024 bytes parsed in {took:?}", f.n_kv());
    assert_eq!(f.n_kv(), n);
    assert!(took < budget, "{n} keys took {took:?}");
}

#[test]
fn every_error_displays_as_one_line() {
    let errors = [
        GgufError::Truncated {
            offset: 1,
            needed: 2,
        },
        GgufError::BadMagic { found: *b"GGUG" },
        GgufError::UnsupportedVersion { version: 4 },
        GgufError::ByteSwapped {
            version: 0x0300_0000,
        },
        GgufError::LimitExceeded {
            limit: Limit::KvCount,
            offset: 16,
            value: 1 << 40,
            max: 512,
        },
        GgufError::DataOutOfBounds {
            index: 3,
            end: 100,
            file_len: 99,
        },
        GgufError::WrongType {
            offset: 5,
            expected: ValueType::U32,
            found: ValueType::String,
        },
    ];
    for e in errors {
        let s = e.to_string();
        assert!(!s.is_empty() && !s.contains('\n'), "{s}");
        let top = Error::from(e);
        assert!(matches!(top, Error::Gguf(g) if g == e));
    }
    assert_eq!(
        GgufError::DataOutOfBounds {
            index: 3,
            end: 100,
            file_len: 99
        }
        .to_string(),
        "tensor 3: data ends at 100, past the end of the file (99 bytes)"
    );
    assert_eq!(
        GgufError::WrongType {
            offset: 5,
            expected: ValueType::U32,
            found: ValueType::String
        }
        .to_string(),
        "value at offset 5 has type STRING, expected UINT32"
    );
}

/// One random edit of a byte string.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Word(usize, u64),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(1 << 63),
        Just(i64::MAX as u64),
        Just(u32::MAX as u64),
        Just(1 << 32),
        0u64..64,
        any::<u64>(),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), interesting).prop_map(|(i, w)| Mutation::Word(i, w)),
        (
            any::<usize>(),
            proptest::collection::vec(any::<u8>(), 1..16)
        )
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Remove(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(buf: &mut Vec<u8>, m: &Mutation) {
    let n = buf.len().max(1);
    match m {
        Mutation::Set(i, b) => {
            if let Some(x) = buf.get_mut(i % n) {
                *x = *b;
            }
        }
        Mutation::Flip(i, b) => {
            if let Some(x) = buf.get_mut(i % n) {
                *x ^= 1 << b;
            }
        }
        Mutation::Word(i, w) => {
            let at = i % n;
            for (k, b) in w.to_le_bytes().iter().enumerate() {
                if let Some(x) = buf.get_mut(at + k) {
                    *x = *b;
                }
            }
        }
        Mutation::Insert(i, v) => {
            let at = i % (buf.len() + 1);
            buf.splice(at..at, v.iter().copied());
        }
        Mutation::Remove(i, k) => {
            let at = i % n;
            let end = (at + k).min(buf.len());
            if at < end {
                buf.drain(at..end);
            }
        }
        Mutation::Truncate(i) => buf.truncate(i % n),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Random mutations of a valid file never panic; a file that still
    /// parses is fully readable; parsing a small file stays fast (a hang
    /// guard, not a speed claim).
    #[test]
    fn mutations_never_panic(muts in proptest::collection::vec(mutation(), 1..6)) {
        let mut buf = valid_file();
        for m in &muts {
            apply(&mut buf, m);
        }
        let t = std::time::Instant::now();
        let r = File::parse(&buf);
        prop_assert!(t.elapsed() < std::time::Duration::from_secs(1));
        match r {
            Ok(f) => exercise(&f),
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
    }

    /// Arbitrary bytes behind a valid magic and version never panic: half
    /// the cases are raw bytes, half have counts within the limits and
    /// short key/name lengths (then random types, values, dims and
    /// offsets), so the later checks are reached too
    /// (`random_files_reach_the_later_checks` shows which).
    #[test]
    fn arbitrary_bytes_never_panic(buf in arbitrary_file()) {
        if let Ok(f) = File::parse(&buf) {
            exercise(&f);
        }
    }
}

/// Raw bytes after magic and version, or a file with small counts and
/// random contents (see [`arbitrary_bytes_never_panic`]).
fn arbitrary_file() -> impl Strategy<Value = Vec<u8>> {
    use proptest::collection::vec;
    let raw = vec(any::<u8>(), 0..512).prop_map(|tail| {
        let mut buf = b"GGUF\x03\x00\x00\x00".to_vec();
        buf.extend_from_slice(&tail);
        buf
    });
    // Key: short, mostly ASCII; a type id around the valid ones; value bytes.
    let kv = (
        vec(prop_oneof![4 => 0x61u8..0x7b, 1 => any::<u8>()], 0..8),
        0u32..15,
        vec(any::<u8>(), 0..24),
    );
    // Tensor info: short name, dims, a type id around the known ones, an offset.
    let info = (
        vec(0x61u8..0x7b, 0..6),
        vec(0u64..40, 0..5),
        prop_oneof![3 => prop::sample::select(vec![0u32, 1, 2, 8, 30]), 1 => 0u32..45],
        0u64..6,
    );
    let structured = (
        vec(kv, 0..5),
        vec(info, 0..4),
        any::<bool>(),
        vec(any::<u8>(), 0..160),
    )
        .prop_map(|(kvs, infos, pad, tail)| {
            let mut r = Raw::header(3, infos.len() as u64, kvs.len() as u64);
            for (key, ty, value) in &kvs {
                r.str(key).u32(*ty);
                // Arrays: an element type and a small count first.
                if *ty == 9 {
                    r.u32(value.first().map_or(4, |&b| u32::from(b % 13)))
                        .u64(value.len() as u64 / 4);
                }
                r.bytes(value);
            }
            for (name, ne, ty, off) in &infos {
                r.info(name, ne, *ty, off * 32);
            }
            if pad {
                r.pad_to(32);
            }
            r.bytes(&tail);
            r.0
        });
    prop_oneof![raw, structured]
}

#[test]
fn random_files_reach_the_later_checks() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRng, TestRunner};
    use std::collections::BTreeSet;
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(Default::default(), &[7; 32]),
    );
    let strategy = arbitrary_file();
    let mut seen = BTreeSet::new();
    let mut ok = 0;
    for _ in 0..20_000 {
        let buf = strategy.new_tree(&mut runner).unwrap().current();
        match File::parse(&buf) {
            Ok(_) => ok += 1,
            Err(e) => {
                let name: String = format!("{e:?}")
                    .chars()
                    .take_while(|c| c.is_alphanumeric())
                    .collect();
                seen.insert(name);
            }
        }
    }
    eprintln!("{ok} parsed; errors reached: {seen:?}");
    assert!(ok > 0, "no random file parsed");
    for want in [
        "Truncated",
        "InvalidValueType",
        "NestedArray",
        "DuplicateTensorName",
        "UnknownTensorType",
        "TensorOverlap",
        "DataOutOfBounds",
    ] {
        assert!(seen.contains(want), "{want} never reached: {seen:?}");
    }
    assert!(
        seen.len() >= 10,
        "only {} kinds of error: {seen:?}",
        seen.len()
    );
}
#[test]
fn raw_builder_writes_little_endian() {
    let mut r = Raw::header(3, 0, 1);
    r.kv_u32(b"k", 0x0102_0304);
    assert_eq!(&r.0[..8], b"GGUF\x03\x00\x00\x00");
    assert_eq!(&r.0[r.len() - 4..], &[4, 3, 2, 1]);
    let f = detllm::gguf::File::parse(&r.0).unwrap();
    assert_eq!(f.get_u32("k"), Ok(Some(0x0102_0304)));
}
