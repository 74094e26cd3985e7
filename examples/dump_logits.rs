//! Prints the last-position logits of a prompt (token ids), one per line
//! (`id value`, the f32 printed round-trip exactly), for comparisons with
//! outside references (`scripts/f64_reference.py --compare`).
//!
//! ```text
//! cargo run --release --example dump_logits -- MODEL.gguf 1,9690,198,... [f16|f32]
//! ```
//! The prompt is prefilled in one step into a contiguous cache with F16 KV
//! (default, as llama.cpp) or F32 KV.
use detllm::gguf::File;
use detllm::kv::{ContiguousCache, KvType};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::{Arena, Serial};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: dump_logits MODEL.gguf ID,ID,... [f16|f32]");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&args[1]).expect("model file");
    let ids: Vec<u32> = args[2]
        .split(',')
        .map(|s| s.trim().parse().expect("token id"))
        .collect();
    let kv_type = match args.get(3).map(String::as_str) {
        None | Some("f16") => KvType::F16,
        Some("f32") => KvType::F32,
        Some(o) => panic!("kv type {o}: f16 or f32"),
    };
    let file = File::parse(&bytes).expect("GGUF");
    let mut buf = vec![0u8; 96 << 20];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
    let vocab = model.cfg.vocab_size;
    let lim = Limits {
        max_seqs: 1,
        max_seq_len: ids.len(),
        max_step_tokens: ids.len(),
        max_logit_rows: 1,
        kv_type,
        page_size: 16,
        n_pages: 1,
    };
    let mut eng = Engine::<ContiguousCache>::new(model, lim, &mut arena).expect("engine");
    let seq = eng.new_seq().expect("sequence");
    let logits = eng
        .step(
            &Serial,
            &[Entry {
                seq,
                tokens: &ids,
                all_logits: false,
            }],
        )
        .expect("step");
    let mut out = String::with_capacity(vocab * 16);
    for (i, l) in logits[..vocab].iter().enumerate() {
        out.push_str(&format!("{i} {:?}\n", f32::from_bits(l.to_bits())));
    }
    print!("{out}");
}
