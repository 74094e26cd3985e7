//! Fuzz `gguf::File::parse` with arbitrary bytes (seed corpus: small valid
//! files from `scripts/make-fuzz-corpus.sh`, which libFuzzer mutates).
//!
//! Properties: no panic; a file that parses is fully readable through every
//! accessor; each key found by iteration is found by lookup with the same
//! value; each tensor's bytes lie inside the input and have the size its
//! type and shape imply. Parse time is bounded by the limits in
//! `detllm::gguf::limits` (linear in the input apart from the bounded
//! duplicate scans).
#![no_main]

use detllm::gguf::{File, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let f = match File::parse(data) {
        Ok(f) => f,
        Err(e) => {
            // Display is total and one line.
            let s = e.to_string();
            assert!(!s.is_empty() && !s.contains('\n'));
            return;
        }
    };
    let mut n_kv = 0;
    for (k, v) in f.kvs() {
        n_kv += 1;
        let key = core::str::from_utf8(k).expect("keys are validated UTF-8");
        // The first pair with this key (keys are unique).
        assert_eq!(f.get(key), Some(v));
        let _ = (
            f.get_u32(key),
            f.get_u64(key),
            f.get_i32(key),
            f.get_f32(key),
        );
        let _ = (f.get_bool(key), f.get_str(key), f.get_array(key));
        if let Value::Array(a) = v {
            assert_eq!(a.iter().count(), a.len());
            if let Ok(s) = a.str_iter() {
                assert_eq!(s.count(), a.len());
            }
            for i in 0..a.len().min(64) + 1 {
                let _ = (a.get_i32(i), a.get_f32(i));
            }
        }
    }
    assert_eq!(n_kv, f.n_kv());
    let base = data.as_ptr() as usize;
    let mut n_tensors = 0;
    for t in f.tensors() {
        n_tensors += 1;
        let start = t.data.as_ptr() as usize - base;
        assert!(start + t.data.len() <= data.len());
        assert_eq!(start as u64, f.data_offset() + t.offset);
        assert_eq!(t.data.len() as u64, t.row_bytes() * t.n_rows());
        assert_eq!(f.tensor(t.name_str()), Some(t));
    }
    assert_eq!(n_tensors, f.n_tensors());
});
