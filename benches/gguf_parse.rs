//! `gguf::File::parse` cost: the real SmolLM2 file (if present), a parse
//! baseline of the same header bytes read linearly (a plain sum over them,
//! the floor any validating reader pays), and the worst cases of the bounded
//! duplicate scans (`limits::MAX_TENSORS` tensors, `limits::MAX_KV` keys of
//! `limits::MAX_KEY_LEN` bytes).
//!
//! Run: `cargo bench --bench gguf_parse` (the real model via `$DETLLM_MODEL`
//! or the cache path of `scripts/fetch-model.sh`).

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use detllm::gguf::{File, limits};

fn model() -> Option<Vec<u8>> {
    let p = match std::env::var_os("DETLLM_MODEL") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?)
            .join(".cache/detllm/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    std::fs::read(p).ok()
}

fn le(v: &mut Vec<u8>, x: u64, n: usize) {
    v.extend_from_slice(&x.to_le_bytes()[..n]);
}

/// MAX_TENSORS zero-size F32 tensors whose names differ only in the last 4 bytes.
fn many_tensors() -> Vec<u8> {
    let n = limits::MAX_TENSORS;
    let mut v = b"GGUF".to_vec();
    le(&mut v, 3, 4);
    le(&mut v, n as u64, 8);
    le(&mut v, 0, 8);
    for i in 0..n {
        let name = format!("{:0>59}{:04x}", "", i);
        le(&mut v, name.len() as u64, 8);
        v.extend_from_slice(name.as_bytes());
        le(&mut v, 1, 4);
        le(&mut v, 0, 8);
        le(&mut v, 0, 4);
        le(&mut v, 0, 8);
    }
    v.resize(v.len().next_multiple_of(32), 0);
    v
}

/// MAX_KV keys of MAX_KEY_LEN bytes that differ only in the last 4 bytes.
fn many_keys() -> Vec<u8> {
    let n = limits::MAX_KV;
    let mut v = b"GGUF".to_vec();
    le(&mut v, 3, 4);
    le(&mut v, 0, 8);
    le(&mut v, n as u64, 8);
    for i in 0..n {
        let key = format!("{:0>1$}{2:04x}", "", limits::MAX_KEY_LEN - 4, i);
        le(&mut v, key.len() as u64, 8);
        v.extend_from_slice(key.as_bytes());
        le(&mut v, 4, 4);
        le(&mut v, 0, 4);
    }
    v
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("gguf_parse");
    if let Some(m) = model() {
        let header = File::parse(&m).expect("model parses").data_offset() as usize;
        g.bench_function("smollm2_parse", |b| {
            b.iter(|| File::parse(black_box(&m)).map(|f| f.n_tensors()))
        });
        g.bench_function("smollm2_header_byte_sum_baseline", |b| {
            b.iter(|| {
                black_box(&m[..header])
                    .iter()
                    .fold(0u64, |a, &x| a.wrapping_add(x as u64))
            })
        });
    } else {
        eprintln!("NOTICE: real model not found; skipping the SmolLM2 benches");
    }
    let t = many_tensors();
    g.sample_size(10);
    g.bench_function("worst_case_16384_tensors", |b| {
        b.iter(|| File::parse(black_box(&t)).map(|f| f.n_tensors()))
    });
    let k = many_keys();
    g.bench_function("worst_case_512_keys_1024_bytes", |b| {
        b.iter(|| File::parse(black_box(&k)).map(|f| f.n_kv()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
