//! Random ragged batches on a tiny synthetic model: every sequence's logits,
//! at every position, equal those of its solo run (one token at a time), and
//! a step that fails changes nothing.
#![no_main]

use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::{Arena, F32, Serial};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const VOCAB: usize = 96;

fn model_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| synth_vec(&SynthSpec::TINY).expect("synth"))
}

fn limits(page_size: usize, n_pages: usize) -> Limits {
    Limits {
        max_seqs: 4,
        max_seq_len: 24,
        max_step_tokens: 32,
        max_logit_rows: 32,
        kv_type: KvType::F16,
        page_size,
        n_pages,
    }
}

/// Runs `f` with a fresh engine.
fn with_engine<R>(lim: Limits, f: impl for<'a> FnOnce(&mut Engine<'a, PagedCache<'a>>) -> R) -> R {
    let bytes = model_bytes();
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; 1 << 22];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    f(&mut eng)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let n_seqs = 1 + (data[0] as usize % 4);
    let page_size = 1 + (data[1] as usize % 8);
    // Prompts: up to 12 tokens each, from the input bytes.
    let mut prompts: Vec<Vec<u32>> = vec![Vec::new(); n_seqs];
    for (i, &b) in data[2..].iter().enumerate().take(n_seqs * 12) {
        prompts[i % n_seqs].push(b as u32 % VOCAB as u32);
    }
    if prompts.iter().any(|p| p.is_empty()) {
        return;
    }
    // Solo reference: each sequence alone, one token per step.
    let mut solo: Vec<Vec<Vec<F32>>> = Vec::new();
    for p in &prompts {
        let rows = with_engine(limits(page_size, 64), |eng| {
            let s = eng.new_seq().expect("seq");
            p.iter()
                .map(|t| {
                    eng.step(
                        &Serial,
                        &[Entry {
                            seq: s,
                            tokens: std::slice::from_ref(t),
                            all_logits: true,
                        }],
                    )
                    .expect("solo step")
                    .to_vec()
                })
                .collect::<Vec<_>>()
        });
        solo.push(rows);
    }
    // Batched: chunk sizes and batch membership from the bytes; a small
    // page pool so that some steps fail and must change nothing.
    let n_pages = 4 + data[1] as usize % 16;
    with_engine(limits(page_size, n_pages), |eng| {
        let seqs: Vec<SeqId> = (0..n_seqs).map(|_| eng.new_seq().expect("seq")).collect();
        let mut fed = vec![0usize; n_seqs];
        let mut k = 2usize;
        let mut guard = 0;
        while fed.iter().zip(&prompts).any(|(f, p)| *f < p.len()) && guard < 64 {
            guard += 1;
            let mut entries = Vec::new();
            let mut who = Vec::new();
            for i in 0..n_seqs {
                let b = data[k % data.len()];
                k += 1;
                if fed[i] < prompts[i].len() && b & 1 == 1 {
                    let n = (1 + (b as usize >> 1) % 4).min(prompts[i].len() - fed[i]);
                    entries.push(Entry {
                        seq: seqs[i],
                        tokens: &prompts[i][fed[i]..fed[i] + n],
                        all_logits: true,
                    });
                    who.push((i, n));
                }
            }
            if entries.is_empty() {
                continue;
            }
            let lens: Vec<usize> = seqs.iter().map(|&s| eng.seq_len(s).expect("len")).collect();
            match eng.step(&Serial, &entries) {
                Ok(logits) => {
                    let mut row = 0;
                    for &(i, n) in &who {
                        for j in 0..n {
                            let got = &logits[row * VOCAB..(row + 1) * VOCAB];
                            assert!(
                                got == solo[i][fed[i] + j].as_slice(),
                                "seq {i} pos {} differs from solo",
                                fed[i] + j
                            );
                            row += 1;
                        }
                        fed[i] += n;
                    }
                }
                Err(_) => {
                    // Nothing changed; free the longest finished sequence's pages is not
                    // possible mid-prompt, so end the schedule here.
                    let after: Vec<usize> =
                        seqs.iter().map(|&s| eng.seq_len(s).expect("len")).collect();
                    assert_eq!(lens, after, "a failed step changed a sequence length");
                    break;
                }
            }
        }
    });
});
