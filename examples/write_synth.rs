//! Writes a synthetic model of `detllm::model::synth` as a GGUF file, for
//! comparisons with outside engines: one of the small test specs
//! (`scripts/llamacpp_logits.py arch`, which adds the stand-in vocabulary
//! llama.cpp needs), or a model of Llama-3.2-1B's widths whose every matrix
//! is in one block format (`scripts/bench-formats.sh`: the speed of each
//! format on a shape no test model has).
//!
//! ```text
//! cargo run --release --example write_synth -- gemma3|qwen3|llama3 OUT.gguf
//! cargo run --release --example write_synth -- llama1b FORMAT OUT.gguf
//! ```
//!
//! `llama1b`: dim 2048, FFN 8192, 32 query / 8 KV heads of 64, RoPE over
//! the whole head, 8 layers (the writer's most; Llama-3.2-1B has 16), a
//! 32,000-token vocabulary, the embedding and tied output head in FORMAT too
//! (`Q4_0`, `Q4_1`, `Q5_0`, `Q8_0`, `Q4_K`, `Q5_K`, `Q6_K`, `F16`, `BF16`).
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::quant::GgmlType;

/// The block formats `llama1b` takes, by their GGUF names.
const FORMATS: [(&str, GgmlType); 9] = [
    ("Q4_0", GgmlType::Q4_0),
    ("Q4_1", GgmlType::Q4_1),
    ("Q5_0", GgmlType::Q5_0),
    ("Q8_0", GgmlType::Q8_0),
    ("Q4_K", GgmlType::Q4_K),
    ("Q5_K", GgmlType::Q5_K),
    ("Q6_K", GgmlType::Q6_K),
    ("F16", GgmlType::F16),
    ("BF16", GgmlType::BF16),
];

const USAGE: &str = "usage: write_synth gemma3|qwen3|llama3 OUT.gguf\n       \
                     write_synth llama1b Q4_0|Q4_1|Q5_0|Q8_0|Q4_K|Q5_K|Q6_K|F16|BF16 OUT.gguf";

/// Llama-3.2-1B's widths, 8 layers, every matrix in `ty`.
fn llama1b(ty: GgmlType) -> SynthSpec {
    SynthSpec {
        dim: 2048,
        hidden_dim: 8192,
        n_layers: 8,
        n_heads: 32,
        n_kv_heads: 8,
        n_rot: 64,
        vocab_size: 32_000,
        weight_type: ty,
        embd_type: ty,
        seed: 11,
        ..SynthSpec::TINY
    }
}

/// The spec named by the arguments and the output path, or `None`.
fn parse(args: &[String]) -> Option<(SynthSpec, &str)> {
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(1)?, arg(2)?, arg(3)) {
        ("gemma3", out, None) => Some((SynthSpec::GEMMA3, out)),
        ("qwen3", out, None) => Some((SynthSpec::QWEN3, out)),
        ("llama3", out, None) => Some((SynthSpec::LLAMA3, out)),
        ("llama1b", format, Some(out)) => {
            let (_, ty) = FORMATS.iter().find(|(name, _)| *name == format)?;
            Some((llama1b(*ty), out))
        }
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some((spec, out)) = parse(&args) else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let bytes = match synth_vec(&spec) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("write_synth: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = std::fs::write(out, bytes) {
        eprintln!("write_synth: {out}: {e}");
        std::process::exit(1);
    }
}
