//! Structured output (feature `constrain`): JSON schemas and Lark grammars
//! compiled by the llguidance engine into token masks for the library's
//! [`Constraint`] interface.
//!
//! Two parts, each with one job:
//! * [`Compiler`] turns a constraint's text ([`Spec`]) into a [`Compiled`]
//!   grammar. It is shared (`Clone`, `Send`, `Sync`) and holds no
//!   per-completion state, so it may run on any thread: the server
//!   compiles on blocking threads, never on the engine thread
//!   (`serve::compile`); `generate` and `verify` compile in line.
//! * [`Grammars`] holds the matchers of the completions being decoded (a
//!   [`Constraint`]): it takes grammars already compiled
//!   ([`Grammars::attach`]) and has no compiler of its own.
//!
//! The engine's token trie is built from the model's own vocabulary: each
//! token's decoded bytes, control tokens behind the trie's special-token
//! marker byte, and the model's end-of-generation tokens as the ones a
//! finished grammar allows. A completion's mask is a pure function of
//! (grammar, tokens so far): each completion has its own copy of the
//! compiled matcher, and [`Grammars::fill`] catches it up with the tokens
//! it is given (rebuilding it if they are not an extension of what it
//! consumed). Every work limit is a count (grammar size, lexer fuel,
//! Earley items, lexer states), never a time, so the same grammar and
//! tokens give the same mask on any machine, on any thread and under any
//! load; a grammar over a limit is refused (compile) or ends the completion
//! (a mask step), the same way every time.
//!
//! Verified by `cli/tests/constrain.rs`: constrained `generate` output
//! parses and validates, and `verify` catches a transcript whose token the
//! grammar refuses.

#![forbid(unsafe_code)]

use detllm::constraint::{Completion, Constraint, TokenMask};
use detllm::tokenizer::{Tokenizer, attr};
use llguidance::api::{ParserLimits, TopLevelGrammar};
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Longest grammar or schema text accepted, in bytes.
pub const MAX_GRAMMAR_BYTES: usize = 64 * 1024;

/// Mask times kept for [`Grammars::mask_times`] (the first ones).
const MAX_TIMINGS: usize = 1 << 16;

/// What a constraint's text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A JSON schema (JSON text).
    JsonSchema,
    /// A grammar in llguidance's Lark syntax.
    Lark,
    /// The grammar of a request's tool calls (Lark text; the server's
    /// `tools`, `serve::tools`).
    Tools,
}

impl Kind {
    /// The name transcripts record.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::JsonSchema => "json_schema",
            Kind::Lark => "lark",
            Kind::Tools => "tools",
        }
    }

    /// The kind named `s` (as [`Kind::as_str`] writes it).
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "json_schema" => Some(Kind::JsonSchema),
            "lark" => Some(Kind::Lark),
            "tools" => Some(Kind::Tools),
            _ => None,
        }
    }
}

/// A constraint as a request or transcript gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub kind: Kind,
    pub text: String,
}

impl Spec {
    /// How a transcript records this constraint.
    pub fn record(&self) -> crate::transcript::ConstraintRecord<'_> {
        crate::transcript::ConstraintRecord {
            kind: self.kind.as_str(),
            text: &self.text,
            sha256: self.sha256(),
        }
    }

    /// SHA-256 of the text (hex), as transcripts record it.
    pub fn sha256(&self) -> String {
        Sha256::digest(self.text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The model's vocabulary as the engine's token environment.
struct Vocab {
    trie: TokTrie,
}

impl TokenizerEnv for Vocab {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.greedy_tokenize(s)
    }
}

/// The engine's limits: counts only (llguidance's defaults, written out so
/// that a new version's defaults cannot change masks unseen).
fn limits() -> ParserLimits {
    ParserLimits {
        max_items_in_row: 2000,
        initial_lexer_fuel: 1_000_000,
        step_lexer_fuel: 200_000,
        step_max_items: 50_000,
        max_lexer_states: 250_000,
        max_grammar_size: 500_000,
        precompute_large_lexemes: true,
        verbose_errors: true,
    }
}

/// A grammar that could not be compiled: why, in the engine's words
/// (a Lark syntax error names its line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError(pub String);

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The grammar compiler for one model: the engine's parser factory over
/// the model's vocabulary, shared (cloning is an `Arc` bump), `Send` and
/// `Sync`, so a server compiles on threads of its own while the engine
/// steps (`serve::compile`). Compiling is a pure function of the grammar
/// text: the limits are counts ([`limits`]), never times.
#[derive(Clone)]
pub struct Compiler {
    /// The factory, or why this model has none ([`Compiler::unavailable`]).
    factory: Result<Arc<ParserFactory>, CompileError>,
}

impl std::fmt::Debug for Compiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.factory {
            Ok(_) => f.write_str("Compiler"),
            Err(why) => write!(f, "Compiler(unavailable: {why})"),
        }
    }
}

impl Compiler {
    /// The compiler for `tokenizer`'s model, whose logit rows have
    /// `vocab_size` entries.
    pub fn new(tokenizer: &Tokenizer<'_>, vocab_size: usize) -> Result<Compiler, CompileError> {
        let n =
            u32::try_from(vocab_size).map_err(|_| CompileError("vocabulary too large".into()))?;
        let eog = tokenizer.eog_ids();
        let eos = tokenizer.eos().or(eog.first().copied()).ok_or_else(|| {
            CompileError("the model has no end-of-generation token to end a grammar".into())
        })?;
        let words: Vec<Vec<u8>> = (0..n).map(|id| token_word(tokenizer, id)).collect();
        let info = TokRxInfo::new(n, eos);
        let mut trie = TokTrie::from(&info, &words);
        if !eog.is_empty() {
            trie = trie.with_eos_tokens(eog);
        }
        let env: TokEnv = Arc::new(Vocab { trie });
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| CompileError(e.to_string()))?;
        factory.quiet();
        *factory.limits_mut() = limits();
        Ok(Compiler {
            factory: Ok(Arc::new(factory)),
        })
    }

    /// A stand-in for a model whose compiler could not be built (`why`, e.g.
    /// no end-of-generation token to end a grammar): [`Compiler::compile`]
    /// refuses every grammar with `why`, so a server on such a model still
    /// serves plain requests.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))] // used by the server only
    pub fn unavailable(why: CompileError) -> Compiler {
        Compiler { factory: Err(why) }
    }

    /// Compiles `spec` (refused: over [`MAX_GRAMMAR_BYTES`], not JSON, or
    /// the engine's reason).
    pub fn compile(&self, spec: &Spec) -> Result<Compiled, CompileError> {
        if spec.text.len() > MAX_GRAMMAR_BYTES {
            return Err(CompileError(format!(
                "{} is {} bytes, over the limit of {MAX_GRAMMAR_BYTES}",
                spec.kind.as_str(),
                spec.text.len()
            )));
        }
        let grammar = match spec.kind {
            Kind::JsonSchema => {
                let v: serde_json::Value = serde_json::from_str(&spec.text)
                    .map_err(|e| CompileError(format!("the schema is not JSON: {e}")))?;
                TopLevelGrammar::from_json_schema(v)
            }
            Kind::Lark | Kind::Tools => TopLevelGrammar::from_lark(spec.text.clone()),
        };
        let parser = self
            .factory
            .as_ref()
            .map_err(Clone::clone)?
            .create_parser(grammar)
            .map_err(|e| CompileError(e.to_string()))?;
        let matcher = Matcher::new(Ok(parser));
        match matcher.get_error() {
            Some(e) => Err(CompileError(e)),
            None => Ok(Compiled {
                spec: spec.clone(),
                matcher: Box::new(matcher),
            }),
        }
    }
}

/// A grammar compiled for one model, before any token: what
/// [`Grammars::attach`] takes. Only [`Compiler::compile`] makes one, so
/// whoever holds only [`Grammars`] (the server's engine thread) cannot
/// compile.
pub struct Compiled {
    #[cfg_attr(not(feature = "serve"), allow(dead_code))] // used by the server only
    spec: Spec,
    /// (Boxed: a matcher is over a kilobyte, and compiled grammars travel.)
    matcher: Box<Matcher>,
}

impl Compiled {
    /// The constraint it was compiled from.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))] // used by the server only
    pub fn spec(&self) -> &Spec {
        &self.spec
    }
}

/// The matchers of the completions a compiled grammar constrains (a
/// [`Constraint`] for the library). It holds no compiler: grammars come in
/// compiled ([`Compiled`]).
#[derive(Default)]
pub struct Grammars {
    /// Each completion's grammar (compiled, not yet advanced).
    initial: HashMap<(u64, u32), Matcher>,
    /// Each completion's matcher and the tokens it consumed.
    live: HashMap<(u64, u32), (Matcher, Vec<u32>)>,
    /// The last engine error per completion (its mask was left empty).
    errors: HashMap<(u64, u32), String>,
    /// Wall time of the first `fill`s, in nanoseconds (reported, never read
    /// by the masks).
    fill_ns: Vec<u64>,
}

impl Grammars {
    /// No completion constrained yet.
    pub fn new() -> Grammars {
        Grammars::default()
    }

    /// Constrains completion `index` of request `request` with `grammar`
    /// (its own copy of the matcher).
    pub fn attach(&mut self, request: u64, index: u32, grammar: &Compiled) {
        self.live
            .insert((request, index), (grammar.matcher.deep_clone(), Vec::new()));
        self.initial
            .insert((request, index), grammar.matcher.deep_clone());
    }

    /// Keeps the completions of the requests `keep` accepts.
    #[cfg_attr(not(feature = "serve"), allow(dead_code))] // used by the server only
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) {
        self.initial.retain(|k, _| keep(k.0));
        self.live.retain(|k, _| keep(k.0));
        self.errors.retain(|k, _| keep(k.0));
    }

    /// The engine error that ended a completion, if one did.
    pub fn error(&self, request: u64, index: u32) -> Option<&str> {
        self.errors.get(&(request, index)).map(String::as_str)
    }

    /// (masks computed, p50, p99) of the mask times so far, in µs.
    pub fn mask_times(&self) -> (usize, f64, f64) {
        let mut t = self.fill_ns.clone();
        t.sort_unstable();
        let q = |p: f64| {
            t.get(((t.len() as f64 * p) as usize).min(t.len().saturating_sub(1)))
                .map_or(0.0, |&ns| ns as f64 / 1000.0)
        };
        (t.len(), q(0.50), q(0.99))
    }

    /// Fills `mask` for `key` after `generated`; `Err` with the engine's
    /// reason when it cannot (the mask is then empty).
    fn try_fill(
        &mut self,
        key: (u64, u32),
        generated: &[u32],
        mask: &mut TokenMask<'_>,
    ) -> Result<(), String> {
        let initial = self.initial.get(&key).ok_or("no grammar attached")?;
        let (m, consumed) = self
            .live
            .entry(key)
            .or_insert_with(|| (initial.deep_clone(), Vec::new()));
        if !generated.starts_with(consumed) {
            *m = initial.deep_clone();
            consumed.clear();
        }
        let rest = &generated[consumed.len()..];
        m.consume_tokens(rest).map_err(|e| e.to_string())?;
        consumed.extend_from_slice(rest);
        let vob = m.compute_mask_or_eos().map_err(|e| e.to_string())?;
        for (dst, src) in mask.words_mut().iter_mut().zip(vob.as_slice()) {
            *dst = *src;
        }
        Ok(())
    }
}

impl Constraint for Grammars {
    fn fill(&mut self, who: Completion, generated: &[u32], mask: &mut TokenMask<'_>) {
        let key = (who.request.0, who.index);
        let start = std::time::Instant::now();
        mask.clear();
        if let Err(e) = self.try_fill(key, generated, mask) {
            mask.clear();
            self.errors.insert(key, e);
        }
        let ns = start.elapsed().as_nanos();
        if self.fill_ns.len() < MAX_TIMINGS {
            self.fill_ns.push(u64::try_from(ns).unwrap_or(u64::MAX));
        }
    }
}

/// A token's bytes for the trie: its decoded bytes, or a control token's
/// text behind the special-token marker.
fn token_word(tokenizer: &Tokenizer<'_>, id: u32) -> Vec<u8> {
    let special = attr::CONTROL | attr::UNKNOWN | attr::UNUSED;
    let a = tokenizer.token_attr(id).unwrap_or(attr::UNUSED);
    if a & special != 0 || tokenizer.is_eog(id) {
        let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
        w.extend_from_slice(tokenizer.piece(id, true).unwrap_or(b"<unused>"));
        return w;
    }
    tokenizer.token_bytes(id).unwrap_or_default().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What lets the server compile off the engine thread: the compiler is
    /// shared across threads, and a compiled grammar moves to the engine's.
    #[test]
    fn compilers_are_shared_and_compiled_grammars_move_between_threads() {
        fn shared<T: Clone + Send + Sync + 'static>() {}
        fn moves<T: Send + 'static>() {}
        shared::<Compiler>();
        moves::<Compiled>();
        moves::<Result<Compiled, CompileError>>();
    }

    /// A model without a compiler refuses every grammar with its reason,
    /// from any thread.
    #[test]
    fn an_unavailable_compiler_refuses_with_its_reason_on_any_thread() {
        let why = CompileError("no end-of-generation token".into());
        let c = Compiler::unavailable(why.clone());
        let spec = Spec {
            kind: Kind::JsonSchema,
            text: r#"{"type": "object"}"#.into(),
        };
        let elsewhere = {
            let (c, spec) = (c.clone(), spec.clone());
            std::thread::spawn(move || c.compile(&spec).err())
        };
        assert_eq!(c.compile(&spec).err(), Some(why.clone()));
        assert_eq!(elsewhere.join().expect("thread"), Some(why));
    }

    /// The size limit and JSON come before the engine (the same refusal
    /// whether or not the model has a compiler).
    #[test]
    fn oversized_and_non_json_schemas_are_refused_first() {
        let c = Compiler::unavailable(CompileError("none".into()));
        let big = Spec {
            kind: Kind::Lark,
            text: "x".repeat(MAX_GRAMMAR_BYTES + 1),
        };
        let why = c.compile(&big).err().expect("refused").0;
        assert!(why.contains("over the limit"), "{why}");
        let bad = Spec {
            kind: Kind::JsonSchema,
            text: "{".into(),
        };
        let why = c.compile(&bad).err().expect("refused").0;
        assert!(why.starts_with("the schema is not JSON"), "{why}");
    }
}
