//! `gguf::Writer` → `gguf::File` round trips, two-pass sizing, and the
//! writer's own checks.

use detllm::gguf::{File, GgufError, TensorSpec, Value, ValueType, Writer};
use detllm::quant::GgmlType;
use detllm::{Error, F32};
use proptest::prelude::*;

/// Write every value type and a few tensors; used with both writers.
fn build(w: &mut Writer<'_>, tensors: &[TensorSpec<'_>]) -> detllm::Result<()> {
    w.set_alignment(16)?;
    w.add_u8("u8", 7)?;
    w.add_i8("i8", -7)?;
    w.add_u16("u16", 65535)?;
    w.add_i16("i16", i16::MIN)?;
    w.add_u32("u32", u32::MAX)?;
    w.add_i32("i32", i32::MIN)?;
    w.add_f32("f32", F32::from_bits(0x3727_C5AC))?;
    w.add_bool("bool", true)?;
    w.add_str("str", "llama")?;
    w.add_str_bytes("raw", b"\xff\xfe")?;
    w.add_u64("u64", u64::MAX)?;
    w.add_i64("i64", i64::MIN)?;
    w.add_f64_bits("f64", 0x3FB9_9999_9999_999A)?;
    w.add_array_str("tokens", &["<s>", "", "Ġthe"])?;
    w.add_array_i32("types", &[3, 1, -1])?;
    w.add_array_u32("u32s", &[9])?;
    w.add_array_f32("scores", &[F32::ONE, F32::NEG_ZERO])?;
    w.add_array_bytes("bytes", &[b"\xff", b"ok"])?;
    w.add_array_raw("u16s", ValueType::U16, &[1, 0, 2, 0])?;
    let _ = tensors;
    Ok(())
}

fn specs<'t>(data: &'t [Vec<u8>]) -> [TensorSpec<'t>; 4] {
    [
        TensorSpec {
            name: "a",
            ty: GgmlType::F32,
            ne: &[3],
            data: &data[0],
        },
        TensorSpec {
            name: "b.weight",
            ty: GgmlType::Q4_1,
            ne: &[64, 2],
            data: &data[1],
        },
        TensorSpec {
            name: "scalar",
            ty: GgmlType::F16,
            ne: &[],
            data: &data[2],
        },
        TensorSpec {
            name: "c",
            ty: GgmlType::Q8_0,
            ne: &[32, 1, 2, 1],
            data: &data[3],
        },
    ]
}

fn tensor_data() -> Vec<Vec<u8>> {
    let fill = |n: usize, s: u8| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(s))
            .collect()
    };
    vec![fill(12, 1), fill(80, 2), fill(2, 3), fill(68, 4)]
}

#[test]
fn round_trip_every_type() {
    let data = tensor_data();
    let specs = specs(&data);
    let mut m = Writer::measure();
    build(&mut m, &specs).unwrap();
    let need = m.finish(&specs).unwrap();
    let mut buf = vec![0xAAu8; need];
    let mut w = Writer::new(&mut buf);
    build(&mut w, &specs).unwrap();
    assert_eq!(w.finish(&specs).unwrap(), need);

    let f = File::parse(&buf).unwrap();
    assert_eq!(
        (f.version(), f.alignment(), f.n_kv(), f.n_tensors()),
        (3, 16, 20, 4)
    );
    assert_eq!(f.get("u8"), Some(Value::U8(7)));
    assert_eq!(f.get("i8"), Some(Value::I8(-7)));
    assert_eq!(f.get("u16"), Some(Value::U16(65535)));
    assert_eq!(f.get("i16"), Some(Value::I16(i16::MIN)));
    assert_eq!(f.get("u32"), Some(Value::U32(u32::MAX)));
    assert_eq!(f.get("i32"), Some(Value::I32(i32::MIN)));
    assert_eq!(f.get_f32("f32"), Ok(Some(F32::from_bits(0x3727_C5AC))));
    assert_eq!(f.get_bool("bool"), Ok(Some(true)));
    assert_eq!(f.get_str("str"), Ok(Some("llama")));
    assert!(matches!(
        f.get_str("raw"),
        Err(GgufError::InvalidUtf8 { .. })
    ));
    assert_eq!(f.get("raw"), Some(Value::Str(b"\xff\xfe")));
    assert_eq!(f.get_u64("u64"), Ok(Some(u64::MAX)));
    assert_eq!(f.get("i64"), Some(Value::I64(i64::MIN)));
    assert_eq!(f.get("f64"), Some(Value::F64(0x3FB9_9999_9999_999A)));
    let t = f.get_array("tokens").unwrap().unwrap();
    assert_eq!(
        t.str_iter().unwrap().collect::<Vec<_>>(),
        [&b"<s>"[..], b"", "Ġthe".as_bytes()]
    );
    let t = f.get_array("types").unwrap().unwrap();
    assert_eq!(
        (0..4).map(|i| t.get_i32(i).unwrap()).collect::<Vec<_>>(),
        [Some(3), Some(1), Some(-1), None]
    );
    let t = f.get_array("u32s").unwrap().unwrap();
    assert_eq!((t.elem_type(), t.get_i32(0)), (ValueType::U32, Ok(Some(9))));
    let t = f.get_array("scores").unwrap().unwrap();
    assert_eq!(t.get_f32(1), Ok(Some(F32::NEG_ZERO)));
    let t = f.get_array("bytes").unwrap().unwrap();
    assert_eq!(
        t.str_iter().unwrap().collect::<Vec<_>>(),
        [&b"\xff"[..], b"ok"]
    );
    let t = f.get_array("u16s").unwrap().unwrap();
    assert_eq!(t.iter().collect::<Vec<_>>(), [Value::U16(1), Value::U16(2)]);

    for (s, d) in specs.iter().zip(&data) {
        let t = f.tensor(s.name).unwrap();
        assert_eq!(t.ty, s.ty);
        assert_eq!(t.n_dims as usize, s.ne.len());
        assert_eq!(&t.ne[..s.ne.len()], s.ne);
        assert!(t.ne[s.ne.len()..].iter().all(|&d| d == 1));
        assert_eq!(t.data, &d[..]);
        assert_eq!(t.offset % 16, 0);
    }
    assert_eq!(f.tensor("scalar").unwrap().ne, [1, 1, 1, 1]);
    // Last tensor ends at the end of the buffer.
    let c = f.tensor("c").unwrap();
    assert_eq!(
        f.data_offset() + c.offset + c.data.len() as u64,
        buf.len() as u64
    );
}

#[test]
fn version_2_round_trips() {
    let mut buf = vec![0u8; 256];
    let mut w = Writer::new(&mut buf);
    w.set_version(2).unwrap();
    assert!(matches!(
        w.set_version(4),
        Err(Error::Gguf(GgufError::UnsupportedVersion { version: 4 }))
    ));
    w.add_u32("k", 1).unwrap();
    let n = w.finish(&[]).unwrap();
    let f = File::parse(&buf[..n]).unwrap();
    assert_eq!((f.version(), f.n_kv(), f.n_tensors()), (2, 1, 0));
}

#[test]
fn too_small_buffer_fails_and_changes_nothing() {
    let data = tensor_data();
    let specs = specs(&data);
    let mut m = Writer::measure();
    build(&mut m, &specs).unwrap();
    let need = m.finish(&specs).unwrap();
    for size in [0, 10, 24, 40, need / 2, need - 1] {
        let mut buf = vec![0u8; size];
        let mut w = Writer::new(&mut buf);
        let r = build(&mut w, &specs);
        let len_before_finish = w.len();
        let fin = r.and_then(|()| w.finish(&specs));
        assert!(
            matches!(fin, Err(Error::BufferTooSmall { available, .. }) if available == size),
            "{size}"
        );
        assert!(len_before_finish <= size.max(24));
    }
    // A failed add leaves the writer as it was.
    let mut buf = vec![0u8; 40];
    let mut w = Writer::new(&mut buf);
    w.add_u8("a", 1).unwrap();
    let len = w.len();
    assert!(matches!(
        w.add_str("b", "too long for the buffer"),
        Err(Error::BufferTooSmall { .. })
    ));
    assert_eq!(w.len(), len);
    let n = w.finish(&[]).unwrap();
    let f = File::parse(&buf[..n]).unwrap();
    assert_eq!(f.n_kv(), 1);
}

#[test]
fn writer_rejects_bad_tensors_and_alignment() {
    let d = [0u8; 40];
    let mut m = Writer::measure();
    assert!(matches!(
        m.set_alignment(0),
        Err(Error::Gguf(GgufError::BadAlignment { alignment: 0 }))
    ));
    assert!(matches!(
        m.add_u32("general.alignment", 48),
        Err(Error::Gguf(GgufError::BadAlignment { .. }))
    ));
    assert!(matches!(
        m.add_u8("", 0),
        Err(Error::Gguf(GgufError::EmptyKey { .. }))
    ));
    let bad = |t: TensorSpec<'_>| Writer::measure().finish(&[t]);
    let long = "x".repeat(64);
    assert!(matches!(
        bad(TensorSpec {
            name: &long,
            ty: GgmlType::F32,
            ne: &[10],
            data: &d
        }),
        Err(Error::Gguf(GgufError::TensorNameTooLong { len: 64, .. }))
    ));
    assert!(matches!(
        bad(TensorSpec {
            name: "t",
            ty: GgmlType::F32,
            ne: &[1, 1, 1, 1, 10],
            data: &d
        }),
        Err(Error::Gguf(GgufError::TooManyDims { n_dims: 5, .. }))
    ));
    assert!(matches!(
        bad(TensorSpec {
            name: "t",
            ty: GgmlType::Q4_1,
            ne: &[16],
            data: &d[..10]
        }),
        Err(Error::Gguf(GgufError::RowNotBlockMultiple {
            ne0: 16,
            block_size: 32,
            ..
        }))
    ));
    assert!(matches!(
        bad(TensorSpec {
            name: "t",
            ty: GgmlType::F32,
            ne: &[9],
            data: &d
        }),
        Err(Error::ShapeMismatch {
            expected: 36,
            found: 40
        })
    ));
    let t = TensorSpec {
        name: "t",
        ty: GgmlType::F32,
        ne: &[10],
        data: &d,
    };
    assert!(matches!(
        Writer::measure().finish(&[t, t]),
        Err(Error::Gguf(GgufError::DuplicateTensorName {
            index: 1,
            first: 0
        }))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random key sets, string arrays, i32/f32 arrays and F32/Q8_0 tensors at
    /// random alignments survive writer → reader unchanged.
    #[test]
    fn random_files_round_trip(
        align_log in 0u32..8,
        ints in proptest::collection::vec(any::<i32>(), 0..20),
        floats in proptest::collection::vec(any::<u32>(), 0..20),
        strs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..20),
        tensors in proptest::collection::vec((1u64..5, 1u64..4, any::<bool>(), any::<u8>()), 0..6),
    ) {
        let align = 1u32 << align_log;
        let data: Vec<Vec<u8>> = tensors.iter().map(|&(blocks, rows, q8, seed)| {
            let n = if q8 { blocks * 34 * rows } else { blocks * 4 * rows };
            (0..n).map(|i| (i as u8) ^ seed).collect()
        }).collect();
        let names: Vec<String> = (0..tensors.len()).map(|i| format!("blk.{i}.w")).collect();
        let nes: Vec<[u64; 2]> = tensors.iter().map(|&(b, r, q8, _)| [if q8 { 32 * b } else { b }, r]).collect();
        let specs: Vec<TensorSpec> = tensors.iter().enumerate().map(|(i, &(_, _, q8, _))| TensorSpec {
            name: &names[i],
            ty: if q8 { GgmlType::Q8_0 } else { GgmlType::F32 },
            ne: &nes[i],
            data: &data[i],
        }).collect();
        let floats: Vec<F32> = floats.into_iter().map(F32::from_bits).collect();
        let strs: Vec<&[u8]> = strs.iter().map(|s| &s[..]).collect();
        let fill = |w: &mut Writer<'_>| -> detllm::Result<()> {
            w.set_alignment(align)?;
            w.add_array_i32("ints", &ints)?;
            w.add_array_f32("floats", &floats)?;
            w.add_array_bytes("strs", &strs)?;
            Ok(())
        };
        let mut m = Writer::measure();
        fill(&mut m).unwrap();
        let need = m.finish(&specs).unwrap();
        let mut buf = vec![0u8; need];
        let mut w = Writer::new(&mut buf);
        fill(&mut w).unwrap();
        prop_assert_eq!(w.finish(&specs).unwrap(), need);

        let f = File::parse(&buf).unwrap();
        prop_assert_eq!(f.alignment(), align);
        let a = f.get_array("ints").unwrap().unwrap();
        prop_assert_eq!(a.len(), ints.len());
        for (i, &v) in ints.iter().enumerate() {
            prop_assert_eq!(a.get_i32(i), Ok(Some(v)));
        }
        let a = f.get_array("floats").unwrap().unwrap();
        for (i, &v) in floats.iter().enumerate() {
            prop_assert_eq!(a.get_f32(i), Ok(Some(v)));
        }
        let a = f.get_array("strs").unwrap().unwrap();
        prop_assert_eq!(a.str_iter().unwrap().collect::<Vec<_>>(), strs.clone());
        prop_assert_eq!(f.tensors().count(), specs.len());
        for (t, s) in f.tensors().zip(&specs) {
            prop_assert_eq!(t.name, s.name.as_bytes());
            prop_assert_eq!(t.ty, s.ty);
            prop_assert_eq!(t.data, s.data);
            prop_assert_eq!(&t.ne[..2], s.ne);
        }
    }
}
