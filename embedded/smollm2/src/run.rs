//! SmolLM2 from a borrowed GGUF image over one static arena: the part of the
//! firmware both cores share (nothing target-specific here).
//!
//! Contract: [`run`] reads the model in place (the GGUF bytes are borrowed
//! for the whole run, never copied), takes every other byte it needs from
//! `arena`, and prints over `out`:
//!
//! ```text
//! MODEL <bytes>
//! PLAN model=<b> tokenizer=<b> workspace=<b> engine=<b> sampler=<b> total=<b>
//! ARENA capacity=<b>
//! PROMPT_IDS <id> <id> …
//! IDS <id> …                   generated tokens (end-of-generation included)
//! TEXT <text>                  their pieces, end-of-generation left out
//! DIGEST <hex>                 SHA-256 of the logits rows sampled from
//! CHAIN <hex>                  the audit chain (detllm::audit) after the last step
//! COST prefill_tokens=… prefill_insns=… decode_tokens=… decode_insns=… insns_per_decode_token=…
//! ```
//!
//! `DIGEST` is what `detllm generate` prints as `digest` for the same prompt
//! with `--chat --temperature 0`: the rows are hashed with
//! [`detllm::audit::hash_logits`] into one SHA-256, row after row, exactly as
//! the CLI's batch loop does. Greedy sampling with the CLI's default
//! parameters ([`SamplingParams::GREEDY`]).
//!
//! The arena is split in the order the parts are built — model tables,
//! tokenizer, tokenizer workspace, engine (KV cache, activations, logits),
//! sampler — each part getting exactly the bytes its `bytes_required` names
//! (the [`Plan`]). So an arena of `Plan::total` bytes always suffices, and
//! one byte less leaves the sampler one byte short: `Sampler::new` returns
//! [`Error::ArenaExhausted`]. The sizes are computed here, on the target,
//! because the tables hold pointers and `usize`s (their sizes differ between
//! a 64-bit host and a 32-bit core); `scripts/baremetal-model.sh` runs the
//! `plan-only` build to read the total and then builds the firmware with a
//! static arena of exactly that size.
//!
//! Verified by `scripts/baremetal-model.sh`: the ids and digest equal the
//! host's `detllm generate --json` byte for byte, and the one-byte-short
//! arena ends in `ERROR ArenaExhausted` with a clean exit.

use core::fmt::Write;
use detllm::audit::{DigestChain, hash_logits};
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::{Config, Engine, Entry, Limits, Model};
use detllm::sample::{Sampler, SamplingParams, SplitMix64};
use detllm::tokenizer::{Message, Tokenizer, Workspace, chat};
use detllm::{Arena, Error, F32, Serial};
use sha2::{Digest, Sha256};

/// The user message (build-time `SMOLLM2_PROMPT`), rendered with the model's
/// chat template as `detllm generate --chat` does (default system prompt).
pub const PROMPT: &str = match option_env!("SMOLLM2_PROMPT") {
    Some(p) => p,
    None => "What is 2+2?",
};

/// Most tokens generated (build-time `SMOLLM2_MAX_TOKENS`).
pub const MAX_TOKENS: usize = match option_env!("SMOLLM2_MAX_TOKENS") {
    Some(s) => parse_usize(s),
    None => 4,
};

/// Longest rendered chat text in bytes (sizes the tokenizer workspace).
pub const MAX_PROMPT_BYTES: usize = 512;

/// Longest sequence: rendered prompt plus generated tokens.
pub const MAX_SEQ_LEN: usize = 128;

/// Engine limits: one sequence, the whole prompt in one step.
pub const LIMITS: Limits = Limits {
    max_seqs: 1,
    max_seq_len: MAX_SEQ_LEN,
    max_step_tokens: 64,
    max_logit_rows: 1,
    kv_type: KvType::F16,
    page_size: 16,
    n_pages: MAX_SEQ_LEN / 16,
};

/// A decimal `usize` at compile time (a build setting); a malformed one
/// fails the build.
pub const fn parse_usize(s: &str) -> usize {
    let b = s.as_bytes();
    assert!(!b.is_empty(), "empty number");
    let mut i = 0;
    let mut n = 0usize;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "not a decimal number");
        n = n * 10 + (b[i] - b'0') as usize;
        i += 1;
    }
    n
}

/// Arena bytes per part, in the order the parts are carved.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// `Model::bytes_required`: layer tables, norms, biases.
    pub model: usize,
    /// `Tokenizer::bytes_required_gguf`: vocabulary and merge tables.
    pub tokenizer: usize,
    /// `Workspace::bytes_required(MAX_PROMPT_BYTES)`.
    pub workspace: usize,
    /// `Engine::bytes_required`: KV cache, activations, logits.
    pub engine: usize,
    /// `Sampler::bytes_required(vocab)`.
    pub sampler: usize,
}

impl Plan {
    /// The whole arena.
    pub fn total(&self) -> Option<usize> {
        self.model
            .checked_add(self.tokenizer)?
            .checked_add(self.workspace)?
            .checked_add(self.engine)?
            .checked_add(self.sampler)
    }
}

/// Where the cost figures come from: a counter of retired instructions
/// (exact under QEMU's `-icount shift=0`), and how to read it.
pub type Counter = fn() -> u64;

/// The next `n` bytes of `rest` (fewer if it is shorter).
fn take(rest: &mut &'static mut [u8], n: usize) -> &'static mut [u8] {
    let all = core::mem::take(rest);
    let n = n.min(all.len());
    let (head, tail) = all.split_at_mut(n);
    *rest = tail;
    head
}

/// Runs the chat prompt through the model and prints the report (module
/// doc). Errors are returned for the caller to print; nothing panics.
pub fn run(
    model_bytes: &'static [u8],
    arena: &'static mut [u8],
    out: &mut dyn Write,
    insns: Counter,
) -> Result<(), Error> {
    let _ = writeln!(out, "MODEL {}", model_bytes.len());
    let capacity = arena.len();
    let file = File::parse(model_bytes)?;
    let cfg = Config::from_gguf(&file)?;
    let vocab = cfg.vocab_size;

    // The model's tables come first: the engine's size depends on the bound model.
    let mut rest = arena;
    let model_len = Model::bytes_required(&cfg).ok_or(Error::SizeOverflow)?;
    let model = Model::from_gguf(
        &file,
        model_bytes,
        &mut Arena::new(take(&mut rest, model_len)),
    )?;
    let plan = Plan {
        model: model_len,
        tokenizer: Tokenizer::bytes_required_gguf(&file)?,
        workspace: Workspace::bytes_required(MAX_PROMPT_BYTES).ok_or(Error::SizeOverflow)?,
        engine: Engine::<PagedCache>::bytes_required(&model, &LIMITS)?,
        sampler: Sampler::bytes_required(vocab).ok_or(Error::SizeOverflow)?,
    };
    let _ = writeln!(
        out,
        "PLAN model={} tokenizer={} workspace={} engine={} sampler={} total={}",
        plan.model,
        plan.tokenizer,
        plan.workspace,
        plan.engine,
        plan.sampler,
        plan.total().ok_or(Error::SizeOverflow)?
    );
    let _ = writeln!(out, "ARENA capacity={capacity}");
    if cfg!(feature = "plan-only") {
        return Ok(());
    }

    let tok = Tokenizer::from_gguf(&file, &mut Arena::new(take(&mut rest, plan.tokenizer)))?;
    let mut work = Workspace::new(
        &mut Arena::new(take(&mut rest, plan.workspace)),
        MAX_PROMPT_BYTES,
    )?;
    let mut engine =
        Engine::<PagedCache>::new(model, LIMITS, &mut Arena::new(take(&mut rest, plan.engine)))?;
    let mut sampler = Sampler::new(&mut Arena::new(take(&mut rest, plan.sampler)), vocab)?;

    // The chat prompt, rendered and encoded as `detllm generate --chat` does.
    let mut text = [0u8; MAX_PROMPT_BYTES];
    let msgs = [Message {
        role: "user",
        content: PROMPT,
    }];
    let text = chat::render_str(&msgs, true, &mut text)?;
    let mut history = [0u32; MAX_SEQ_LEN];
    let n_prompt = tok.encode(text, true, &mut work, &mut history)?;
    if n_prompt == 0 {
        return Err(Error::EmptyPrompt);
    }
    if n_prompt + MAX_TOKENS > MAX_SEQ_LEN {
        return Err(Error::BufferTooSmall {
            needed: n_prompt + MAX_TOKENS,
            available: MAX_SEQ_LEN,
        });
    }
    let _ = write!(out, "PROMPT_IDS");
    for id in &history[..n_prompt] {
        let _ = write!(out, " {id}");
    }
    let _ = writeln!(out);

    let params = SamplingParams::GREEDY;
    let mut rng = SplitMix64::new(params.seed);
    let mut chain = DigestChain::new(&params);
    let mut digest = Sha256::new();
    let seq = engine.new_seq()?;
    let mut prompt = [0u32; MAX_SEQ_LEN];
    prompt[..n_prompt].copy_from_slice(&history[..n_prompt]);
    let mut n = n_prompt;
    // Samples from `logits`' first row into `history[n]`, hashing the row.
    let mut sample = |logits: &[F32], n: &mut usize| -> Result<u32, Error> {
        let row = logits.get(..vocab).ok_or(Error::SizeOverflow)?;
        hash_logits(&mut digest, row);
        let id = sampler.sample(row, &params, &history[..*n], &mut rng)?;
        chain.step(row, id);
        history[*n] = id;
        *n += 1;
        Ok(id)
    };

    // Prefill in steps of max_step_tokens; the first token comes from the last.
    let t0 = insns();
    let mut last = 0;
    let mut fed = 0;
    while fed < n_prompt {
        let end = n_prompt.min(fed + LIMITS.max_step_tokens);
        let logits = engine.step(
            &Serial,
            &[Entry {
                seq,
                tokens: &prompt[fed..end],
                all_logits: false,
            }],
        )?;
        if end == n_prompt && MAX_TOKENS > 0 {
            last = sample(logits, &mut n)?;
        }
        fed = end;
    }
    let t1 = insns();
    // Decode: one token per step until MAX_TOKENS or end of generation.
    while n - n_prompt < MAX_TOKENS && !tok.is_eog(last) {
        let logits = engine.step(
            &Serial,
            &[Entry {
                seq,
                tokens: &[last],
                all_logits: false,
            }],
        )?;
        last = sample(logits, &mut n)?;
    }
    let t2 = insns();

    let generated = &history[n_prompt..n];
    let _ = write!(out, "IDS");
    for id in generated {
        let _ = write!(out, " {id}");
    }
    let _ = writeln!(out);
    let _ = write!(out, "TEXT ");
    let mut bytes = [0u8; 1024];
    let mut len = 0;
    for &id in generated.iter().filter(|&&id| !tok.is_eog(id)) {
        let piece = tok.piece(id, false).unwrap_or(&[]);
        let dst = bytes
            .get_mut(len..len + piece.len())
            .ok_or(Error::BufferTooSmall {
                needed: len + piece.len(),
                available: 1024,
            })?;
        dst.copy_from_slice(piece);
        len += piece.len();
    }
    for chunk in bytes[..len].utf8_chunks() {
        let _ = out.write_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            let _ = out.write_char(char::REPLACEMENT_CHARACTER);
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "DIGEST {}", Hex(&digest.finalize().into()));
    let _ = writeln!(out, "CHAIN {}", Hex(&chain.digest()));
    let decode_tokens = (n - n_prompt).saturating_sub(1) as u64;
    let _ = writeln!(
        out,
        "COST prefill_tokens={} prefill_insns={} decode_tokens={} decode_insns={} insns_per_decode_token={}",
        n_prompt,
        t1.wrapping_sub(t0),
        decode_tokens,
        t2.wrapping_sub(t1),
        t2.wrapping_sub(t1).checked_div(decode_tokens).unwrap_or(0)
    );
    Ok(())
}

/// Lower-case hex of a digest.
struct Hex<'a>(&'a [u8; 32]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}
