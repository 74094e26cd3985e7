//! Tokenizer speed on the real SmolLM2 vocabulary (skipped with a notice if
//! the model file is absent). Baselines in the same run: a UTF-8 char count
//! and the pre-tokenizer alone over the same text, so the cost of the merge
//! loop and lookups reads as a ratio.
//!
//! `cargo bench --features std --bench tokenizer`

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{StreamDecoder, Tokenizer, Workspace, chat, pretok};
use std::path::PathBuf;

const MODEL_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn model_path() -> Option<PathBuf> {
    let mut cands = Vec::new();
    if let Some(p) = std::env::var_os("DETLLM_MODEL") {
        cands.push(PathBuf::from(p));
    }
    let cache = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) if !x.is_empty() => Some(PathBuf::from(x)),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")),
    };
    if let Some(c) = cache {
        cands.push(c.join("detllm").join(MODEL_NAME));
    }
    cands.into_iter().find(|p| p.is_file())
}

fn bench(c: &mut Criterion) {
    let Some(path) = model_path() else {
        eprintln!("NOTICE: {MODEL_NAME} not found; tokenizer bench skipped");
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let file = File::parse(&bytes).unwrap();
    let mut mem = vec![0u8; Tokenizer::bytes_required_gguf(&file).unwrap()];

    c.bench_function("tokenizer/load_from_gguf", |b| {
        b.iter(|| {
            let mut arena = Arena::new(&mut mem);
            black_box(
                Tokenizer::from_gguf(&file, &mut arena)
                    .unwrap()
                    .vocab_size(),
            )
        })
    });

    let mut arena = Arena::new(&mut mem);
    let tok = Tokenizer::from_gguf(&file, &mut arena).unwrap();
    let mut buf = [0u8; 512];
    let msgs = [chat::Message {
        role: "user",
        content: "What is 2+2?",
    }];
    let prompt = chat::render_str(&msgs, true, &mut buf).unwrap().to_string();
    let long = "The quick brown fox jumps over the lazy dog; naïve café 12345. ".repeat(64);

    const MAX: usize = 8192;
    let mut wmem = vec![0u8; Workspace::bytes_required(MAX).unwrap()];
    let mut warena = Arena::new(&mut wmem);
    let mut ws = Workspace::new(&mut warena, MAX).unwrap();
    let mut out = vec![0u32; MAX];

    for (name, text) in [
        ("chat_prompt_37_tokens", prompt.as_str()),
        ("prose_4KiB", long.as_str()),
    ] {
        let mut g = c.benchmark_group(format!("tokenizer/{name}"));
        g.bench_function("baseline_char_count", |b| {
            b.iter(|| black_box(black_box(text).chars().count()))
        });
        g.bench_function("baseline_pretokenize_only", |b| {
            b.iter(|| {
                let mut n = 0usize;
                pretok::for_each_word(black_box(text), pretok::Pre::Digits, &mut |w| {
                    n += w.len();
                    Ok(())
                })
                .unwrap();
                black_box(n)
            })
        });
        g.bench_function("encode", |b| {
            b.iter(|| {
                black_box(
                    tok.encode(black_box(text), true, &mut ws, &mut out)
                        .unwrap(),
                )
            })
        });
        let n = tok.encode(text, true, &mut ws, &mut out).unwrap();
        let ids = out[..n].to_vec();
        let mut dbuf = vec![0u8; StreamDecoder::max_output(&tok)];
        g.bench_function("stream_decode", |b| {
            b.iter(|| {
                let mut d = StreamDecoder::new(true);
                let mut total = 0usize;
                for &id in &ids {
                    total += d.push(&tok, id, &mut dbuf).unwrap().len();
                }
                black_box(total)
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
