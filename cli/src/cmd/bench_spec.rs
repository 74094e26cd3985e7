//! `detllm bench --speculate ngram|draft`: decode tokens/s of one greedy
//! generation without and with speculation, alternating repetition by
//! repetition (best of `--reps` each), the acceptance rate, and a check
//! that both produced the same tokens and digest.

#![forbid(unsafe_code)]

use super::bench::BenchArgs;
use crate::error::{CliError, CliResult};
use crate::model_file::{ModelFile, existing_model};
use crate::output::round1;
use crate::prompt::render_chat;
use crate::session::{Session, Shape};
use crate::speculate::{self, describe};
use detllm::sample::SamplingParams;
use detllm::spec::{NgramDraft, SpecStats};
use detllm::tokenizer::chat::{Message, Template};
use std::process::ExitCode;

/// What one repetition of a mode gave.
struct Measured {
    tok_s: f64,
    ids: Vec<u32>,
    digest: Vec<u8>,
    stats: SpecStats,
}

pub fn run(args: &BenchArgs) -> CliResult<ExitCode> {
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_for_run(&path)?;
    let draft_file = args.spec.open_draft()?;
    let text = prompt_text(args, &model)?;
    let shape = Shape {
        max_seqs: 1,
        max_seq_len: text.len() + args.gen_tokens + 8,
        max_step_tokens: 256,
        max_prompt_bytes: text.len().max(16),
    };
    let threads = args.model_args.threads;
    let mut buf = Vec::new();
    let extra = args.spec.extra_rows();
    let mut session = Session::load_with_rows(&model, &mut buf, shape, extra, threads)?;
    let prompt = session.encode(&text)?;
    let mut draft_buf = Vec::new();
    let max_len = shape.max_seq_len;
    let draft = draft_file.as_ref();
    let mut draft = speculate::source(
        &args.spec,
        draft,
        &mut draft_buf,
        &session,
        max_len,
        threads,
    )?
    .ok_or(CliError::Usage(
        "bench without --speculate has no speculative run",
    ))?;
    let mut best: [Option<Measured>; 2] = [None, None];
    for rep in 0..args.reps.max(1) {
        // Alternate which mode goes first.
        for mode in [rep % 2, 1 - rep % 2] {
            let draft_max = if mode == 0 { 0 } else { args.spec.draft_max };
            let params = SamplingParams::GREEDY;
            let mut none = NgramDraft::DEFAULT;
            let source: &mut dyn detllm::spec::DraftSource =
                if mode == 0 { &mut none } else { &mut *draft };
            let (run, stats) = speculate::run_prompt(
                &mut session,
                source,
                &prompt,
                &params,
                args.gen_tokens,
                draft_max,
                &mut |_, _| {},
            )?;
            let m = Measured {
                tok_s: run.ids.len().saturating_sub(1) as f64 / run.decode_s.max(1e-9),
                ids: run.ids,
                digest: sha2::Digest::finalize(run.digest).to_vec(),
                stats,
            };
            if best[mode].as_ref().is_none_or(|b| m.tok_s > b.tok_s) {
                best[mode] = Some(m);
            }
        }
    }
    let [Some(plain), Some(spec)] = best else {
        return Err(CliError::Usage("--reps must be at least 1"));
    };
    if plain.ids != spec.ids || plain.digest != spec.digest {
        return Err(CliError::SpeculationDiverged);
    }
    report(args, prompt.len(), &plain, &spec);
    Ok(ExitCode::SUCCESS)
}

/// `--prompt-file`'s text, else the bench's chat prompt.
fn prompt_text(args: &BenchArgs, model: &ModelFile) -> CliResult<String> {
    if let Some(path) = &args.prompt_file {
        return std::fs::read_to_string(path).map_err(CliError::at(path));
    }
    let file = detllm::gguf::File::parse(model.bytes()).map_err(detllm::Error::from)?;
    let template = Template::of_gguf(&file).unwrap_or(Template::SmolLm2);
    let content = "Repeat this list exactly: alpha, beta, gamma, delta, epsilon, zeta, eta, theta.";
    let user = Message {
        role: "user",
        content,
    };
    render_chat(template, &[user], true)
}

fn report(args: &BenchArgs, prompt_tokens: usize, plain: &Measured, spec: &Measured) {
    let s = &spec.stats;
    let rate = s.accepted as f64 / s.drafted.max(1) as f64;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "prompt_tokens": prompt_tokens, "gen_tokens": plain.ids.len(),
                "plain_decode_tok_s": round1(plain.tok_s), "spec_decode_tok_s": round1(spec.tok_s),
                "speedup": (spec.tok_s / plain.tok_s * 100.0).round() / 100.0,
                "steps": s.steps, "drafted": s.drafted, "accepted": s.accepted,
                "acceptance": (rate * 1000.0).round() / 1000.0, "same_output": true,
            })
        );
    } else {
        println!(
            "decode {:.1} tok/s plain | {:.1} tok/s speculative ({:.2}x) | {} | {} prompt tokens, {} generated, same output",
            plain.tok_s,
            spec.tok_s,
            spec.tok_s / plain.tok_s,
            describe(s),
            prompt_tokens,
            plain.ids.len()
        );
    }
}
