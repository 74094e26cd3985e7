//! Audit transcripts: `generate --transcript FILE` writes one, `verify FILE`
//! re-executes it and points at the first step whose digest differs.
//! Format: docs/TRANSCRIPT.md.

use super::{Mapped, Res, SeqRun, Session, Shape, hex, model_path, run_batch};
use detllm::F32;
use detllm::sample::SamplingParams;
use detllm::tokenizer::Tokenizer;
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;

/// Transcript format version.
const FORMAT: u32 = 1;

fn f32_json(x: F32) -> Value {
    json!({ "bits": format!("{:#010x}", x.to_bits()), "value": f32::from_bits(x.to_bits()) })
}

fn f32_from(v: &Value, name: &str) -> Res<F32> {
    let bits = v
        .get(name)
        .and_then(|x| x.get("bits"))
        .and_then(|b| b.as_str())
        .ok_or(format!("transcript: sampling.{name}.bits missing"))?;
    let bits = u32::from_str_radix(bits.trim_start_matches("0x"), 16)
        .map_err(|_| format!("transcript: sampling.{name}.bits is not hex"))?;
    Ok(F32::from_bits(bits))
}

/// Writes the transcript of one generated sequence.
pub fn write(
    path: &Path,
    mapped: &Mapped,
    s: &Session<'_>,
    prompt_text: &str,
    r: &SeqRun,
    p: &SamplingParams,
    max_tokens: usize,
) -> Res<()> {
    let cfg = s.engine.config();
    let arch = s
        .file
        .get_str("general.architecture")
        .ok()
        .flatten()
        .unwrap_or("");
    let steps: Vec<Value> = r
        .ids
        .iter()
        .zip(&r.step_digests)
        .map(|(id, d)| json!({ "id": id, "digest": hex(d) }))
        .collect();
    let t = json!({
        "format": FORMAT,
        "profile": detllm::PROFILE,
        "crate_version": env!("CARGO_PKG_VERSION"),
        "model": {
            "file": mapped.path.file_name().map(|f| f.to_string_lossy().into_owned()),
            "sha256": mapped.sha256(),
            "architecture": arch,
            "vocab_size": cfg.vocab_size, "dim": cfg.dim, "n_layers": cfg.n_layers,
        },
        "sampling": {
            "temperature": f32_json(p.temperature), "top_k": p.top_k, "top_p": f32_json(p.top_p),
            "min_p": f32_json(p.min_p), "repeat_penalty": f32_json(p.repeat_penalty),
            "penalty_last_n": p.penalty_last_n, "seed": p.seed,
        },
        "max_tokens": max_tokens,
        "prompt": prompt_text,
        "prompt_ids": r.prompt_ids,
        "steps": steps,
        "final_digest": r.step_digests.last().map(|d| hex(d)),
    });
    let text = serde_json::to_string_pretty(&t).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

struct Parsed {
    sha256: String,
    model_file: Option<String>,
    params: SamplingParams,
    max_tokens: usize,
    prompt_ids: Vec<u32>,
    steps: Vec<(u32, String)>,
    final_digest: String,
}

fn parse(v: &Value) -> Res<Parsed> {
    let bad = |what: &str| format!("transcript: {what}");
    if v.get("format").and_then(|f| f.as_u64()) != Some(FORMAT as u64) {
        return Err(bad("unknown or missing format version"));
    }
    if v.get("profile").and_then(|p| p.as_str()) != Some(detllm::PROFILE) {
        return Err(bad(&format!("profile is not {}", detllm::PROFILE)));
    }
    let m = v.get("model").ok_or(bad("model missing"))?;
    let sha256 = m
        .get("sha256")
        .and_then(|x| x.as_str())
        .ok_or(bad("model.sha256 missing"))?
        .to_string();
    let model_file = m.get("file").and_then(|x| x.as_str()).map(str::to_string);
    let sp = v.get("sampling").ok_or(bad("sampling missing"))?;
    let u = |o: &Value, k: &str| {
        o.get(k)
            .and_then(|x| x.as_u64())
            .ok_or(bad(&format!("{k} missing")))
    };
    let params = SamplingParams {
        temperature: f32_from(sp, "temperature")?,
        top_k: u32::try_from(u(sp, "top_k")?).map_err(|_| bad("top_k too large"))?,
        top_p: f32_from(sp, "top_p")?,
        min_p: f32_from(sp, "min_p")?,
        repeat_penalty: f32_from(sp, "repeat_penalty")?,
        penalty_last_n: u(sp, "penalty_last_n")? as usize,
        seed: u(sp, "seed")?,
    };
    params
        .validate()
        .map_err(|e| bad(&format!("sampling parameters: {e}")))?;
    let max_tokens = u(v, "max_tokens")? as usize;
    let ids = |x: &Value| -> Res<Vec<u32>> {
        x.as_array()
            .ok_or(bad("ids must be an array"))?
            .iter()
            .map(|i| {
                i.as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or(bad("id is not a u32"))
            })
            .collect()
    };
    let prompt_ids = ids(v.get("prompt_ids").ok_or(bad("prompt_ids missing"))?)?;
    let mut steps = Vec::new();
    for st in v
        .get("steps")
        .and_then(|s| s.as_array())
        .ok_or(bad("steps missing"))?
    {
        let id = st
            .get("id")
            .and_then(|i| i.as_u64())
            .and_then(|i| u32::try_from(i).ok())
            .ok_or(bad("step id"))?;
        let d = st
            .get("digest")
            .and_then(|d| d.as_str())
            .ok_or(bad("step digest"))?;
        if d.len() != 64 || !d.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad("step digest is not 64 hex digits"));
        }
        steps.push((id, d.to_ascii_lowercase()));
    }
    if steps.is_empty() || steps.len() > max_tokens {
        return Err(bad("step count does not fit max_tokens"));
    }
    let final_digest = v
        .get("final_digest")
        .and_then(|d| d.as_str())
        .filter(|d| d.len() == 64 && d.bytes().all(|c| c.is_ascii_hexdigit()))
        .ok_or(bad("final_digest missing or not 64 hex digits"))?
        .to_ascii_lowercase();
    Ok(Parsed {
        sha256,
        model_file,
        params,
        max_tokens,
        prompt_ids,
        steps,
        final_digest,
    })
}

/// Re-executes a transcript; exit 0 if every step verifies, 1 at the first divergence.
pub fn verify(path: &Path, model: Option<&Path>, threads: usize) -> Res<ExitCode> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("transcript: not JSON: {e}"))?;
    let t = parse(&v)?;
    let model_path = match model {
        Some(m) => m.to_path_buf(),
        None => {
            let name = t.model_file.as_deref().unwrap_or(super::DEFAULT_MODEL);
            let cached = super::cache_dir().join(name);
            if cached.exists() {
                cached
            } else {
                model_path(None)?
            }
        }
    };
    let mapped = Mapped::open_for_run(&model_path)?;
    let sha = mapped.sha256();
    if sha != t.sha256 {
        println!(
            "wrong model: {} has SHA-256 {sha}, the transcript expects {}",
            model_path.display(),
            t.sha256
        );
        return Ok(ExitCode::from(1));
    }
    let shape = Shape {
        max_seqs: 1,
        max_seq_len: t.prompt_ids.len() + t.max_tokens + 1,
        max_step_tokens: 256,
        max_prompt_bytes: super::MAX_PROMPT_BYTES,
    };
    let mut buf = Vec::new();
    let mut s = super::load_session(mapped.bytes(), &mut buf, shape, threads)?;
    let vocab = s.engine.config().vocab_size;
    if let Some(&bad) = t
        .prompt_ids
        .iter()
        .chain(t.steps.iter().map(|(i, _)| i))
        .find(|&&i| i as usize >= vocab)
    {
        return Err(format!(
            "transcript: token id {bad} is outside the vocabulary ({vocab})"
        ));
    }
    // Re-run with the same parameters, recording each step's logits.
    let mut logits_log: Vec<Vec<F32>> = Vec::new();
    let runs = run_batch_logged(
        &mut s,
        &t.prompt_ids,
        &t.params,
        t.steps.len(),
        &mut logits_log,
    )?;
    let r = &runs[0];
    for (i, ((exp_id, exp_d), (got_id, got_d))) in t
        .steps
        .iter()
        .zip(r.ids.iter().zip(&r.step_digests))
        .enumerate()
    {
        let got_hex = hex(got_d);
        if *exp_d != got_hex || exp_id != got_id {
            let row = &logits_log[i];
            let lg = |id: u32| {
                row.get(id as usize)
                    .map(|x| f32::from_bits(x.to_bits()))
                    .unwrap_or(f32::NAN)
            };
            println!("DIVERGED at step {i}:");
            println!(
                "  expected token {exp_id} (logit {}) digest {exp_d}",
                lg(*exp_id)
            );
            println!(
                "  produced token {got_id} (logit {}) digest {got_hex}",
                lg(*got_id)
            );
            return Ok(ExitCode::from(1));
        }
    }
    if r.ids.len() < t.steps.len() {
        println!(
            "DIVERGED: the run ended after {} steps, the transcript has {}",
            r.ids.len(),
            t.steps.len()
        );
        return Ok(ExitCode::from(1));
    }
    let last = t.steps.last().map(|s| s.1.as_str()).unwrap_or("");
    if t.final_digest != last {
        println!("DIVERGED at the final digest:");
        println!("  expected {}", t.final_digest);
        println!("  produced {last}");
        return Ok(ExitCode::from(1));
    }
    println!("verified: {} steps, digest {last}", t.steps.len());
    Ok(ExitCode::SUCCESS)
}

fn run_batch_logged(
    s: &mut Session<'_>,
    prompt: &[u32],
    params: &SamplingParams,
    n: usize,
    log: &mut Vec<Vec<F32>>,
) -> Res<Vec<SeqRun>> {
    run_batch(s, &[prompt.to_vec()], params, n, |_, _, _, row| {
        log.push(row.to_vec())
    })
}

/// The one-token vocabulary of a model without tokenizer metadata (such as
/// the synthetic test model): no BOS, no EOS, no end-of-generation id, so
/// generation from prompt ids (`verify`) runs to the step count, as the
/// library's own runs do. Text prompts cannot be encoded with it.
const NO_VOCAB_TEXT: &[u8] = b"<unk>";

fn no_vocab() -> detllm::tokenizer::SliceVocab<'static, 'static> {
    const TOKENS: &[&[u8]] = &[NO_VOCAB_TEXT];
    detllm::tokenizer::SliceVocab {
        model: "llama",
        pre: None,
        base: NO_VOCAB_TEXT,
        tokens: TOKENS,
        token_types: None,
        scores: None,
        merges: None,
        bos: None,
        eos: None,
        add_bos: Some(false),
        add_eos: Some(false),
        add_space_prefix: Some(false),
    }
}

fn has_vocab(file: &detllm::gguf::File<'_>) -> bool {
    file.get("tokenizer.ggml.tokens").is_some()
}

/// Arena bytes of `file`'s tokenizer (or of the fallback when it has none).
pub fn tokenizer_bytes(file: &detllm::gguf::File<'_>) -> Res<usize> {
    if has_vocab(file) {
        Tokenizer::bytes_required_gguf(file).map_err(|e| e.to_string())
    } else {
        Tokenizer::bytes_required_for(&no_vocab()).map_err(|e| e.to_string())
    }
}

/// `file`'s tokenizer, or the one-token fallback when it has no vocabulary.
pub fn tokenizer<'a>(
    file: &detllm::gguf::File<'a>,
    arena: &mut detllm::Arena<'a>,
) -> Res<Tokenizer<'a>> {
    if has_vocab(file) {
        Tokenizer::from_gguf(file, arena).map_err(|e| e.to_string())
    } else {
        Tokenizer::build(&no_vocab(), arena).map_err(|e| e.to_string())
    }
}
