//! What a verify step costs against a one-row decode step: the time of one
//! engine step of `m` rows (every row's logits, as speculative decoding's
//! verify step; and the last row's only, as a prefill chunk) after a
//! 64-token context, for m = 1, 2, 3, 5, 9, best of `REPS` alternating
//! rounds, and the cost per row relative to m = 1 (`docs/SPECULATIVE.md`).
//!
//! ```text
//! cargo run --release --example verify_rows -- MODEL.gguf [REPS]
//! ```
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::{Arena, Serial};
use std::time::Instant;

const ROWS: [usize; 5] = [1, 2, 3, 5, 9];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: verify_rows MODEL.gguf [REPS]");
        std::process::exit(2);
    };
    let reps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let bytes = std::fs::read(path).expect("model file");
    let file = File::parse(&bytes).expect("GGUF");
    let lim = Limits {
        max_seqs: 1,
        max_seq_len: 128,
        max_step_tokens: 64,
        max_logit_rows: 16,
        kv_type: KvType::F16,
        page_size: 16,
        n_pages: 8,
    };
    let cfg = detllm::model::Config::from_gguf(&file).expect("config");
    let model_bytes = Model::bytes_required(&cfg).expect("model plan");
    let mut probe = vec![0u8; model_bytes];
    let probe_model = Model::from_gguf(&file, &bytes, &mut Arena::new(&mut probe)).expect("model");
    let need =
        model_bytes + Engine::<PagedCache>::bytes_required(&probe_model, &lim).expect("plan");
    let mut buf = vec![0u8; need];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
    let vocab = model.cfg.vocab_size as u32;
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    let seq = eng.new_seq().expect("sequence");
    let context: Vec<u32> = (0..64).map(|i| (100 + i * 7) % vocab).collect();
    step(&mut eng, seq, &context, false);
    let base = eng.seq_len(seq).expect("length");
    // best[m][all_logits]
    let mut best = [[f64::INFINITY; 2]; ROWS.len()];
    for _ in 0..reps {
        for (i, &m) in ROWS.iter().enumerate() {
            for all in [true, false] {
                let start = Instant::now();
                step(&mut eng, seq, &context[..m], all);
                let t = start.elapsed().as_secs_f64();
                eng.truncate(seq, base).expect("truncate");
                best[i][all as usize] = best[i][all as usize].min(t);
            }
        }
    }
    let one = best[0][1];
    for (i, &m) in ROWS.iter().enumerate() {
        let [last, all] = best[i];
        println!(
            "rows {m}: every row's logits {:.1} ms ({:.2} of a one-row step per row), last row's only {:.1} ms",
            all * 1e3,
            all / one / m as f64,
            last * 1e3
        );
    }
}

/// One step of `tokens` on `seq`.
fn step<'a>(eng: &mut Engine<'a, PagedCache<'a>>, seq: SeqId, tokens: &[u32], all_logits: bool) {
    let entry = Entry {
        seq,
        tokens,
        all_logits,
    };
    eng.step(&Serial, &[entry]).expect("step");
}
