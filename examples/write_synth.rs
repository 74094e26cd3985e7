//! Writes one of the synthetic specs of `detllm::model::synth` as a GGUF
//! file, for comparisons with outside engines (`scripts/llamacpp_logits.py
//! arch`, which adds the stand-in vocabulary llama.cpp needs).
//!
//! ```text
//! cargo run --release --example write_synth -- gemma3|qwen3|llama3 OUT.gguf
//! ```
use detllm::model::synth::{SynthSpec, synth_vec};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let spec = match args.get(1).map(String::as_str) {
        Some("gemma3") => SynthSpec::GEMMA3,
        Some("qwen3") => SynthSpec::QWEN3,
        Some("llama3") => SynthSpec::LLAMA3,
        _ => {
            eprintln!("usage: write_synth gemma3|qwen3|llama3 OUT.gguf");
            std::process::exit(2);
        }
    };
    let out = args.get(2).expect("output path");
    std::fs::write(out, synth_vec(&spec).expect("synth")).expect("write");
}
