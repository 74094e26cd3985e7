//! The engine: one ragged-batch `step` for prefill, chunked prefill, decode
//! and continuous batching.
//!
//! A step is a list of entries `(sequence, its new tokens)`; every sequence is
//! at its own position. All rows of all entries go through each weight matrix
//! together (each weight row is read once per step), attention is per row
//! over that row's own sequence, and RoPE uses the row's own position. Every
//! per-cell computation is independent of the other rows, so a sequence's
//! logits do not depend on what shares its step, on how its prompt was
//! chunked, on the KV layout or on the thread count.
//!
//! This file holds the engine, its limits and the step's transaction; the
//! buffers and their layout are in `run_state.rs`, the phases of the step in
//! `phases.rs`.
//!
//! Transactional: everything that can fail is checked, and KV room for every
//! entry is secured, before anything is written; a failing step changes
//! nothing a caller can observe (rows written past a sequence's length are
//! never read before they are written again, and lengths are committed last).

#![forbid(unsafe_code)]

use super::config::Config;
use super::run_state::{Carve, Layout, RunState};
use super::weights::Model;
use crate::kv::{KvConfig, KvStore, KvType, Reservation, SeqId};
use crate::{Arena, Error, F32, Parallel, Result};

/// Capacities an engine is built for; they size every buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Live sequences at once.
    pub max_seqs: usize,
    /// Longest sequence in tokens (≤ the model's context length is advised).
    pub max_seq_len: usize,
    /// Tokens (rows) in one step, over all entries.
    pub max_step_tokens: usize,
    /// Logit rows one step may return.
    pub max_logit_rows: usize,
    /// KV element type.
    pub kv_type: KvType,
    /// Tokens per KV page (paged cache).
    pub page_size: usize,
    /// Pages in the KV pool (paged cache).
    pub n_pages: usize,
}

impl Limits {
    /// The KV cache configuration these limits imply for `cfg`.
    pub fn kv_config(&self, cfg: &Config) -> KvConfig {
        KvConfig {
            n_layers: cfg.n_layers,
            kv_dim: cfg.kv_dim(),
            elem: self.kv_type,
            max_seqs: self.max_seqs,
            max_seq_len: self.max_seq_len,
            page_size: self.page_size,
            n_pages: self.n_pages,
        }
    }

    /// Checks every capacity is non-zero and that row counts and lengths
    /// fit `u32` (the engine's row bookkeeping).
    ///
    /// Errors: [`Error::InvalidLimit`] naming the first field out of range.
    pub fn validate(&self) -> Result<()> {
        let u32_max = u32::MAX as usize;
        for (name, value, max) in [
            ("max_seqs", self.max_seqs, usize::MAX),
            ("max_seq_len", self.max_seq_len, u32_max),
            ("max_step_tokens", self.max_step_tokens, u32_max),
            ("max_logit_rows", self.max_logit_rows, usize::MAX),
        ] {
            if value == 0 || value > max {
                return Err(Error::InvalidLimit { name, value });
            }
        }
        Ok(())
    }
}

/// One entry of a step: a sequence and the tokens it advances by.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'t> {
    /// The sequence.
    pub seq: SeqId,
    /// Its new tokens (at least one).
    pub tokens: &'t [u32],
    /// Return logits for every token of the entry, not only the last.
    pub all_logits: bool,
}

/// A KV cache the engine can build from an arena.
pub trait KvBuild<'a>: KvStore + Sized + Sync {
    /// Arena bytes `build` takes; `None` for an invalid config or on
    /// overflow.
    fn bytes_required(cfg: &KvConfig) -> Option<usize>;
    /// A cache carved from `arena`. Errors: [`Error::InvalidLimit`],
    /// [`Error::SizeOverflow`], [`Error::ArenaExhausted`].
    fn build(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self>;
}

/// The engine: a model, a KV cache and the run state, all in one arena.
pub struct Engine<'a, K: KvBuild<'a>> {
    model: Model<'a>,
    kv: K,
    lim: Limits,
    state: RunState<'a>,
}

impl<'a, K: KvBuild<'a>> Engine<'a, K> {
    /// Arena bytes an engine for `model` and `lim` needs beyond the model's
    /// own ([`Model::bytes_required`]): KV cache, activations, logits.
    /// Exactly what [`Engine::new`] checks for (every carve counted at its
    /// worst alignment).
    ///
    /// Errors: [`Error::InvalidLimit`] (see [`Limits::validate`]; for the
    /// KV fields, as the cache names them), [`Error::SizeOverflow`],
    /// [`Error::UnsupportedType`] (a matrix type
    /// the engine has no activation kind for), [`Error::LayerOutOfRange`]
    /// (a model with fewer layers than its config says).
    pub fn bytes_required(model: &Model<'_>, lim: &Limits) -> Result<usize> {
        lim.validate()?;
        let kv = kv_bytes::<K>(lim.kv_config(&model.cfg))?;
        let run_state = Layout::new(model, lim)?.bytes()?;
        kv.checked_add(run_state).ok_or(Error::SizeOverflow)
    }

    /// An engine for `model` with buffers for `lim`, carved from `arena`.
    ///
    /// Errors: those of [`Engine::bytes_required`];
    /// [`Error::ArenaExhausted`] (arena untouched) if fewer than that many
    /// bytes are left; the KV cache's own (`KvBuild::build`).
    pub fn new(model: Model<'a>, lim: Limits, arena: &mut Arena<'a>) -> Result<Self> {
        let need = Self::bytes_required(&model, &lim)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        let layout = Layout::new(&model, &lim)?;
        let kv = K::build(arena, lim.kv_config(&model.cfg))?;
        let state = RunState::carve(&layout, &mut Carve::Arena(arena))?;
        Ok(Engine {
            model,
            kv,
            lim,
            state,
        })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.model.cfg
    }

    /// The limits the engine was built with.
    pub fn limits(&self) -> &Limits {
        &self.lim
    }

    /// The KV cache (read-only).
    pub fn kv(&self) -> &K {
        &self.kv
    }

    /// A new, empty sequence.
    ///
    /// Errors: [`Error::TooManySequences`] when `max_seqs` are live.
    pub fn new_seq(&mut self) -> Result<SeqId> {
        self.kv.new_seq()
    }

    /// A new sequence sharing everything `seq` has cached.
    ///
    /// Errors: [`Error::UnknownSequence`], [`Error::TooManySequences`];
    /// nothing changes.
    pub fn fork(&mut self, seq: SeqId) -> Result<SeqId> {
        self.kv.fork(seq)
    }

    /// Ends a sequence and releases its cache.
    ///
    /// Errors: [`Error::UnknownSequence`].
    pub fn free(&mut self, seq: SeqId) -> Result<()> {
        self.kv.free(seq)
    }

    /// Cuts a sequence back to `len` tokens.
    ///
    /// Errors: [`Error::UnknownSequence`], [`Error::KvOutOfRange`] if `len`
    /// is longer than the sequence.
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        self.kv.truncate(seq, len)
    }

    /// Tokens a sequence holds.
    ///
    /// Errors: [`Error::UnknownSequence`].
    pub fn seq_len(&self, seq: SeqId) -> Result<usize> {
        self.kv.len(seq)
    }

    /// The transaction's first half: checks every entry of `batch` against
    /// the limits and the cache, then secures KV room for all of them at
    /// once (all or nothing). Nothing changes on error.
    fn prepare(&mut self, batch: &[Entry<'_>]) -> Result<()> {
        let cfg = &self.model.cfg;
        if batch.len() > self.lim.max_seqs {
            return Err(Error::BatchTooLarge {
                requested: batch.len(),
                max: self.lim.max_seqs,
            });
        }
        let mut rows = 0usize;
        let mut out = 0usize;
        for (i, e) in batch.iter().enumerate() {
            if e.tokens.is_empty() {
                return Err(Error::EmptyEntry { index: i });
            }
            if let Some(&bad) = e.tokens.iter().find(|&&t| t as usize >= cfg.vocab_size) {
                return Err(Error::TokenOutOfRange {
                    token: bad,
                    vocab_size: cfg.vocab_size,
                });
            }
            let len = self.kv.len(e.seq)?;
            if batch[..i].iter().any(|p| p.seq == e.seq) {
                return Err(Error::DuplicateSequence {
                    index: e.seq.index(),
                });
            }
            let new_len = len.saturating_add(e.tokens.len());
            if new_len > self.lim.max_seq_len {
                return Err(Error::SequenceTooLong {
                    len: new_len,
                    max: self.lim.max_seq_len,
                });
            }
            rows = rows.saturating_add(e.tokens.len());
            out += if e.all_logits { e.tokens.len() } else { 1 };
        }
        if rows > self.lim.max_step_tokens {
            return Err(Error::BatchTooLarge {
                requested: rows,
                max: self.lim.max_step_tokens,
            });
        }
        if out > self.lim.max_logit_rows {
            return Err(Error::BatchTooLarge {
                requested: out,
                max: self.lim.max_logit_rows,
            });
        }
        let reservations = &mut self.state.reservations;
        for (r, e) in reservations.iter_mut().zip(batch) {
            *r = Reservation::new(e.seq, e.tokens.len());
        }
        // The one fallible state change, all or nothing.
        self.kv.reserve(&reservations[..batch.len()])
    }

    /// Runs one ragged batch and returns its logits `(rows, vocab_size)`: for
    /// each entry in order, its last token's row (or every token's row when
    /// `all_logits`). On error nothing changed.
    ///
    /// Errors (checked before anything is written): [`Error::EmptyEntry`],
    /// [`Error::TokenOutOfRange`], [`Error::UnknownSequence`],
    /// [`Error::DuplicateSequence`], [`Error::SequenceTooLong`],
    /// [`Error::BatchTooLarge`] (entries, rows or logit rows over the
    /// limits), [`Error::KvPagesExhausted`]. A kernel's error (a malformed
    /// model) is returned as it is.
    pub fn step<P: Parallel>(&mut self, par: &P, batch: &[Entry<'_>]) -> Result<&[F32]> {
        self.prepare(batch)?;
        let s = &mut self.state;
        s.embed_rows(&self.model, &self.kv, batch)?;
        s.rope_angles(par, self.model.rope_freqs())?;
        for layer in 0..self.model.cfg.n_layers {
            let w = self.model.layer_weights(layer)?;
            s.attention_block(par, &w, &mut self.kv, batch, layer)?;
            s.ffn_block(par, &w)?;
        }
        s.output_head(par, &self.model)?;
        s.final_softcap();
        self.commit(batch)?;
        Ok(self.state.logits())
    }

    /// Commits every entry's new length: the step's one visible change.
    fn commit(&mut self, batch: &[Entry<'_>]) -> Result<()> {
        for e in batch {
            let len = self.kv.len(e.seq)?;
            self.kv.set_len(e.seq, len + e.tokens.len())?;
        }
        Ok(())
    }
}

/// Arena bytes of a `K` cache for `cfg`; where it has no plan, the cache's
/// own verdict on `cfg` (the error its `build` gives, before any carve).
fn kv_bytes<'a, K: KvBuild<'a>>(cfg: KvConfig) -> Result<usize> {
    match K::bytes_required(&cfg) {
        Some(bytes) => Ok(bytes),
        None => Err(K::build(&mut Arena::new(&mut []), cfg)
            .err()
            .unwrap_or(Error::SizeOverflow)),
    }
}

impl<'a> KvBuild<'a> for crate::kv::PagedCache<'a> {
    fn bytes_required(cfg: &KvConfig) -> Option<usize> {
        crate::kv::PagedCache::bytes_required(cfg)
    }
    fn build(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self> {
        crate::kv::PagedCache::new(arena, cfg)
    }
}

impl<'a> KvBuild<'a> for crate::kv::ContiguousCache<'a> {
    fn bytes_required(cfg: &KvConfig) -> Option<usize> {
        crate::kv::ContiguousCache::bytes_required(cfg)
    }
    fn build(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self> {
        crate::kv::ContiguousCache::new(arena, cfg)
    }
}
