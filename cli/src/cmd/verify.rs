//! `detllm verify`: re-executes an audit transcript and compares every
//! step's token and digest. Exit 0 if all verify; exit 1 with the first
//! divergent step (or the model's SHA-256 mismatch) on stdout; a malformed
//! transcript is an error (exit 2).

#![forbid(unsafe_code)]

use crate::batch::{PromptRun, run_prompts_batched};
use crate::error::{CliError, CliResult};
use crate::model_file::{DEFAULT_MODEL, ModelFile, existing_model, model_cache_dir};
use crate::output::hex;
use crate::session::{MAX_PROMPT_BYTES, Session, Shape};
use crate::transcript::{self, Transcript, TranscriptError};
use clap::Args;
use detllm::F32;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct VerifyArgs {
    /// Transcript written by `generate --transcript`.
    pub transcript: PathBuf,
    /// Model file (default: the one the transcript names in the cache).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Check the transcript's signed receipt against this public key
    /// (`FILE.pub` of `detllm keygen`, or the hex `GET /v1/audit/key` gives
    /// saved to a file) before re-executing it.
    #[cfg(feature = "audit")]
    #[arg(long)]
    pub pubkey: Option<PathBuf>,
}

pub fn run(args: VerifyArgs) -> CliResult<ExitCode> {
    let text = std::fs::read_to_string(&args.transcript).map_err(CliError::at(&args.transcript))?;
    let expected = transcript::parse(&text)?;
    #[cfg(feature = "audit")]
    if let Some(key) = &args.pubkey
        && !receipt_checks(&text, &expected, key)?
    {
        return Ok(ExitCode::from(1));
    }
    let model_path = transcript_model(args.model.as_deref(), &expected)?;
    let model = ModelFile::open_for_run(&model_path)?;
    let sha256 = model.sha256();
    if sha256 != expected.sha256 {
        println!(
            "wrong model: {} has SHA-256 {sha256}, the transcript expects {}",
            model_path.display(),
            expected.sha256
        );
        return Ok(ExitCode::from(1));
    }
    let shape = Shape {
        max_seqs: 1,
        max_seq_len: expected.prompt_ids.len() + expected.max_tokens + 1,
        max_step_tokens: 256,
        max_prompt_bytes: MAX_PROMPT_BYTES,
    };
    let mut arena_buf = Vec::new();
    let mut session = Session::load(&model, &mut arena_buf, shape, args.threads)?;
    check_ids_in_vocab(&expected, session.vocab_size())?;
    // Re-run with the same parameters, recording each step's logits.
    let mut logits_per_step: Vec<Vec<F32>> = Vec::new();
    let record = |_: &Session<'_>, _, _, row: &[F32]| logits_per_step.push(row.to_vec());
    let runs = match constraint::recorded(&text)? {
        None => run_prompts_batched(
            &mut session,
            std::slice::from_ref(&expected.prompt_ids),
            &expected.params,
            expected.steps.len(),
            record,
        )?,
        Some(spec) => match constraint::rerun(&mut session, &expected, &spec, record)? {
            Some(runs) => runs,
            None => return Ok(ExitCode::from(1)),
        },
    };
    let verified = runs
        .first()
        .is_some_and(|run| compare(&expected, run, &logits_per_step));
    Ok(if verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Checks the receipt against the public key in `key_file`; prints the
/// verdict (a wrong key, edited request fields and an edited digest each
/// have their own line). A key file that cannot be read is an error.
#[cfg(feature = "audit")]
fn receipt_checks(text: &str, expected: &Transcript, key_file: &Path) -> CliResult<bool> {
    use crate::audit::receipt::{self, ReceiptError};
    let key = receipt::read_public_key(key_file).map_err(|e| CliError::Audit(e.to_string()))?;
    match receipt::check(text, expected, &key) {
        Ok(()) => {
            println!("signature: valid (Ed25519 key {})", hex(key.as_bytes()));
            Ok(true)
        }
        Err(e @ (ReceiptError::KeyFile(..) | ReceiptError::KeyFormat(_))) => {
            Err(CliError::Audit(e.to_string()))
        }
        Err(e) => {
            println!("{e}");
            Ok(false)
        }
    }
}

/// `--model`, else the file the transcript names if it is in the model
/// cache, else the default lookup.
fn transcript_model(model_arg: Option<&Path>, expected: &Transcript) -> CliResult<PathBuf> {
    if let Some(path) = model_arg {
        return Ok(path.to_path_buf());
    }
    let name = expected.model_file.as_deref().unwrap_or(DEFAULT_MODEL);
    let cached = model_cache_dir().join(name);
    if cached.exists() {
        Ok(cached)
    } else {
        existing_model(None)
    }
}

/// Fails if a prompt or step id is not in the model's vocabulary.
fn check_ids_in_vocab(expected: &Transcript, vocab_size: usize) -> CliResult<()> {
    let step_ids = expected.steps.iter().map(|(id, _)| id);
    match expected
        .prompt_ids
        .iter()
        .chain(step_ids)
        .find(|&&id| id as usize >= vocab_size)
    {
        Some(&id) => Err(TranscriptError::TokenOutsideVocab { id, vocab_size }.into()),
        None => Ok(()),
    }
}

/// Compares the re-run with the transcript step by step and prints the
/// verdict: `verified: …`, or where and how it diverged. `logits_per_step`
/// are the rows the re-run sampled from (the divergent step's logits of both
/// tokens are printed).
fn compare(expected: &Transcript, run: &PromptRun, logits_per_step: &[Vec<F32>]) -> bool {
    let produced = run.ids.iter().zip(&run.step_digests);
    for (i, ((exp_id, exp_digest), (got_id, got_digest))) in
        expected.steps.iter().zip(produced).enumerate()
    {
        let got_hex = hex(got_digest);
        if *exp_digest != got_hex || exp_id != got_id {
            let row = logits_per_step.get(i).map_or(&[][..], Vec::as_slice);
            let logit = |id: u32| {
                row.get(id as usize)
                    .map(|x| f32::from_bits(x.to_bits()))
                    .unwrap_or(f32::NAN)
            };
            println!("DIVERGED at step {i}:");
            println!(
                "  expected token {exp_id} (logit {}) digest {exp_digest}",
                logit(*exp_id)
            );
            println!(
                "  produced token {got_id} (logit {}) digest {got_hex}",
                logit(*got_id)
            );
            return false;
        }
    }
    if run.ids.len() < expected.steps.len() {
        println!(
            "DIVERGED: the run ended after {} steps, the transcript has {}",
            run.ids.len(),
            expected.steps.len()
        );
        return false;
    }
    let last = expected.steps.last().map(|s| s.1.as_str()).unwrap_or("");
    if expected.final_digest != last {
        println!("DIVERGED at the final digest:");
        println!("  expected {}", expected.final_digest);
        println!("  produced {last}");
        return false;
    }
    println!("verified: {} steps, digest {last}", expected.steps.len());
    true
}

/// A transcript's constraint (`"constraint": {kind, text, sha256}`): checked
/// against every recorded token, then replayed.
#[cfg(feature = "constrain")]
mod constraint {
    use super::*;
    use crate::batch::run_prompts_constrained;
    use crate::constrain::{Compiler, Grammars, Kind, Spec};
    use detllm::constraint::{Completion, Constraint, TokenMask};
    use detllm::sched::RequestId;

    /// The constraint recorded in `text`, if any (its hash checked).
    pub fn recorded(text: &str) -> CliResult<Option<Spec>> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(CliError::Json)?;
        let Some(c) = v.get("constraint").filter(|c| !c.is_null()) else {
            return Ok(None);
        };
        let bad = |why: &str| CliError::Constraint(format!("transcript: {why}"));
        let kind = c.get("kind").and_then(|k| k.as_str()).and_then(Kind::parse);
        let text = c.get("text").and_then(|t| t.as_str());
        let (Some(kind), Some(text)) = (kind, text) else {
            return Err(bad("constraint needs a known kind and a text"));
        };
        let spec = Spec {
            kind,
            text: text.to_string(),
        };
        if c.get("sha256").and_then(|h| h.as_str()) != Some(spec.sha256().as_str()) {
            return Err(bad("the constraint's sha256 does not match its text"));
        }
        Ok(Some(spec))
    }

    /// Re-derives every step's mask from the recorded tokens and stops at the
    /// first token it refuses (`None`, after printing where); else re-runs
    /// the prompt under the constraint.
    pub fn rerun(
        session: &mut Session<'_>,
        expected: &Transcript,
        spec: &Spec,
        on_token: impl FnMut(&Session<'_>, usize, u32, &[F32]),
    ) -> CliResult<Option<Vec<PromptRun>>> {
        let grammar = Compiler::new(&session.tokenizer, session.vocab_size())
            .and_then(|c| c.compile(spec))
            .map_err(|e| CliError::Constraint(e.0))?;
        let new = || {
            let mut g = Grammars::new();
            g.attach(0, 0, &grammar);
            g
        };
        let mut g = new();
        let ids: Vec<u32> = expected.steps.iter().map(|s| s.0).collect();
        let vocab = session.vocab_size();
        let mut words = vec![0u32; TokenMask::words_for(vocab)];
        let who = Completion {
            request: RequestId(0),
            index: 0,
        };
        for (k, &id) in ids.iter().enumerate() {
            let mut mask = TokenMask::new(&mut words, vocab)?;
            g.fill(who, &ids[..k], &mut mask);
            if !mask.allows(id) {
                println!(
                    "CONSTRAINT REFUSED at step {k}: token {id} is not allowed by the {} \
                     constraint (sha256 {}) after the {k} tokens before it{}",
                    spec.kind.as_str(),
                    spec.sha256(),
                    g.error(0, 0).map(|e| format!(": {e}")).unwrap_or_default()
                );
                return Ok(None);
            }
        }
        let mut g = new();
        let runs = run_prompts_constrained(
            session,
            std::slice::from_ref(&expected.prompt_ids),
            &expected.params,
            expected.steps.len(),
            Some(&mut g),
            on_token,
        )?;
        Ok(Some(runs))
    }
}

#[cfg(not(feature = "constrain"))]
mod constraint {
    use super::*;

    /// Without the feature, a constrained transcript cannot be checked.
    pub fn recorded(text: &str) -> CliResult<Option<std::convert::Infallible>> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(CliError::Json)?;
        match v.get("constraint").filter(|c| !c.is_null()) {
            None => Ok(None),
            Some(_) => Err(CliError::Constraint(
                "the transcript is constrained: verify with a build with the `constrain` feature"
                    .into(),
            )),
        }
    }

    pub fn rerun(
        _: &mut Session<'_>,
        _: &Transcript,
        spec: &std::convert::Infallible,
        _: impl FnMut(&Session<'_>, usize, u32, &[F32]),
    ) -> CliResult<Option<Vec<PromptRun>>> {
        match *spec {}
    }
}
