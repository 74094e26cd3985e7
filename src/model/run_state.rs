//! The run state: every buffer a step computes in, and the one layout that
//! both sizes them (`Engine::bytes_required`) and carves them (`Engine::new`).
//!
//! [`RunState::carve`] is the only list of buffers. [`Layout::bytes`] runs it
//! in counting mode ([`Carve::Count`]: each buffer adds its worst-case arena
//! bytes, `Arena::bytes_for`) and `Engine::new` runs it on the arena
//! ([`Carve::Arena`]), so the plan and the carve cannot drift apart: the plan
//! is exactly what the carve takes at the worst alignment.
//!
//! Buffer shapes use the config's names (`dim`, `q_dim`, `kv_dim`,
//! `hidden_dim`, `n_rot`, `vocab_size`) and, per step, `n_rows` (tokens of
//! all entries, at most `max_step_tokens`) and `n_logit_rows` (rows whose
//! logits are returned, at most `max_logit_rows`).

#![forbid(unsafe_code)]

use super::config::Config;
use super::engine::Limits;
use super::weights::{Model, TensorRef};
use crate::kernels::{self, RopeStyle, matmul_scratch_len};
use crate::kv::Reservation;
use crate::quant::{ActKind, GgmlType, QActs};
use crate::{Arena, Error, F32, Parallel, Result};
use bytemuck::Pod;

/// Which activation kinds the matrices at one input width read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ActKinds {
    q8: bool,
    f16: bool,
    f32: bool,
}

impl ActKinds {
    /// The kinds the matrices of the GGML type ids `types` read.
    fn read_by(types: &[u32]) -> Result<ActKinds> {
        let mut kinds = ActKinds::default();
        for &id in types {
            let ty = GgmlType::from_u32(id).ok_or(Error::UnsupportedType { ggml_type: id })?;
            match ActKind::for_weight(ty) {
                ActKind::Q8 => kinds.q8 = true,
                ActKind::F16 => kinds.f16 = true,
                ActKind::F32 => kinds.f32 = true,
            }
        }
        Ok(kinds)
    }

    fn union(self, other: ActKinds) -> ActKinds {
        ActKinds {
            q8: self.q8 | other.q8,
            f16: self.f16 | other.f16,
            f32: self.f32 | other.f32,
        }
    }
}

/// The activation kinds read at each input width of the model.
#[derive(Clone, Copy, Debug)]
struct InputKinds {
    dim: ActKinds,    // wq, wk, wv, w_gate, w_up
    q_dim: ActKinds,  // wo
    hidden: ActKinds, // w_down
    head: ActKinds,   // output head
}

impl InputKinds {
    fn of(model: &Model<'_>) -> Result<InputKinds> {
        let ty = |r: &TensorRef| r.ty;
        let mut kinds = InputKinds {
            dim: ActKinds::default(),
            q_dim: ActKinds::default(),
            hidden: ActKinds::default(),
            head: ActKinds::read_by(&[model.output.ty])?,
        };
        for l in 0..model.cfg.n_layers {
            let w = model.layer(l)?;
            let dim = [ty(&w.wq), ty(&w.wk), ty(&w.wv), ty(&w.w_gate), ty(&w.w_up)];
            kinds.dim = kinds.dim.union(ActKinds::read_by(&dim)?);
            kinds.q_dim = kinds.q_dim.union(ActKinds::read_by(&[w.wo.ty])?);
            kinds.hidden = kinds.hidden.union(ActKinds::read_by(&[w.w_down.ty])?);
        }
        Ok(kinds)
    }
}

/// Activation buffers of one input width: one per kind its matrices read.
pub(super) struct Acts<'a> {
    q8: Option<QActs<'a>>,
    f16: Option<QActs<'a>>,
    f32: Option<QActs<'a>>,
}

impl<'a> Acts<'a> {
    /// `rows` rows of `width` for each kind in `kinds`.
    fn carve(
        carve: &mut Carve<'_, 'a>,
        kinds: ActKinds,
        rows: usize,
        width: usize,
    ) -> Result<Self> {
        Ok(Acts {
            q8: carve.acts(kinds.q8, ActKind::Q8, rows, width)?,
            f16: carve.acts(kinds.f16, ActKind::F16, rows, width)?,
            f32: carve.acts(kinds.f32, ActKind::F32, rows, width)?,
        })
    }

    /// Converts `x` into every kind held (Q8 rows split over the workers).
    pub(super) fn load<P: Parallel>(&mut self, par: &P, x: &[F32]) -> Result<()> {
        if let Some(a) = &mut self.q8 {
            a.quantize_par(par, x)?;
        }
        for a in [&mut self.f16, &mut self.f32].into_iter().flatten() {
            a.quantize(x)?;
        }
        Ok(())
    }

    /// The activations a matrix of type `ty` reads.
    pub(super) fn for_type(&self, ty: GgmlType) -> Result<&QActs<'a>> {
        let a = match ActKind::for_weight(ty) {
            ActKind::Q8 => &self.q8,
            ActKind::F16 => &self.f16,
            ActKind::F32 => &self.f32,
        };
        a.as_ref().ok_or(Error::UnsupportedType {
            ggml_type: ty as u32,
        })
    }
}

/// Where run-state buffers come from.
pub(super) enum Carve<'s, 'a> {
    /// Sum each buffer's worst-case arena bytes; buffers come back empty.
    Count {
        /// Bytes so far.
        bytes: usize,
    },
    /// Take each buffer from the arena.
    Arena(&'s mut Arena<'a>),
}

impl<'a> Carve<'_, 'a> {
    fn count(bytes: &mut usize, more: Option<usize>) -> Result<()> {
        *bytes = more
            .and_then(|b| bytes.checked_add(b))
            .ok_or(Error::SizeOverflow)?;
        Ok(())
    }

    /// `n` zeroed values of `T`.
    fn slice<T: Pod>(&mut self, n: usize) -> Result<&'a mut [T]> {
        match self {
            Carve::Count { bytes } => {
                Self::count(bytes, Arena::bytes_for::<T>(n))?;
                Ok(Default::default())
            }
            Carve::Arena(arena) => arena.alloc::<T>(n),
        }
    }

    /// Activations of `kind` for `rows` rows of `width`, if `held`.
    fn acts(
        &mut self,
        held: bool,
        kind: ActKind,
        rows: usize,
        width: usize,
    ) -> Result<Option<QActs<'a>>> {
        if !held {
            return Ok(None);
        }
        match self {
            Carve::Count { bytes } => {
                Self::count(bytes, QActs::bytes_for(kind, rows, width))?;
                Ok(None)
            }
            Carve::Arena(arena) => QActs::new(arena, kind, rows, width).map(Some),
        }
    }
}

/// Fewest output-head rows per pass when the head runs in passes.
const HEAD_MIN_ROWS: usize = 1024;

/// Output-head rows per pass for up to `n_logit_rows` logit rows, given the
/// layers' matmul scratch (`layer_scratch` elements). A head of more than
/// one row needs `n_logit_rows · rows` scratch plus an output block as large
/// per pass (copied into the logits), so rather than a
/// `n_logit_rows · vocab_size` scratch the head runs in passes of as many
/// rows as half the layers' scratch holds (at least [`HEAD_MIN_ROWS`], a
/// multiple of 16). Every logit is the same exact dot whatever the pass.
fn head_pass_rows(layer_scratch: usize, n_logit_rows: usize, vocab: usize) -> usize {
    if n_logit_rows <= 1 || n_logit_rows.saturating_mul(vocab) <= layer_scratch {
        return vocab;
    }
    let rows = (layer_scratch / n_logit_rows.saturating_mul(2)) / 16 * 16;
    rows.max(HEAD_MIN_ROWS).min(vocab)
}

/// Query heads per KV head that attention processes together (its scores
/// buffer holds that many rows of `max_seq_len`).
fn attn_group(cfg: &Config) -> usize {
    (cfg.n_heads / cfg.n_kv_heads.max(1)).clamp(1, kernels::attention::MAX_GROUP)
}

/// Elements of one attention unit (one row, one KV head):
/// `group·head_dim` outputs, the group's rotated queries (as many) and
/// `group·max_seq_len` scores.
pub(super) fn attn_unit_len(cfg: &Config, max_seq_len: usize) -> usize {
    let group = cfg.n_heads / cfg.n_kv_heads.max(1);
    group
        .saturating_mul(cfg.head_dim)
        .saturating_mul(2)
        .saturating_add(group.saturating_mul(max_seq_len))
}

/// Largest output width (`n_out`) of the per-layer matrices.
fn layer_n_out_max(cfg: &Config) -> usize {
    cfg.dim
        .max(cfg.q_dim())
        .max(cfg.kv_dim())
        .max(cfg.hidden_dim)
}

/// Element counts of every run-state buffer, for one model and [`Limits`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Layout {
    cfg: Config,
    rope_style: RopeStyle,
    max_seqs: usize,
    max_seq_len: usize,
    max_rows: usize,       // max_step_tokens
    max_logit_rows: usize, // max_logit_rows
    head_pass_rows: usize,
    attn_scratch: usize,
    matmul_scratch: usize,
    inputs: InputKinds,
}

impl Layout {
    /// The layout for `model` under `lim` (already validated).
    ///
    /// Errors: [`Error::SizeOverflow`], [`Error::UnsupportedType`] (a
    /// matrix type without an activation kind).
    pub(super) fn new(model: &Model<'_>, lim: &Limits) -> Result<Layout> {
        let cfg = model.cfg;
        let (rows, logit_rows) = (lim.max_step_tokens, lim.max_logit_rows);
        let layer_scratch = matmul_scratch_len(rows, layer_n_out_max(&cfg));
        let head_pass_rows = head_pass_rows(layer_scratch, logit_rows, cfg.vocab_size);
        let head_scratch = if head_pass_rows == cfg.vocab_size {
            matmul_scratch_len(logit_rows, cfg.vocab_size)
        } else {
            // A pass's (n_logit_rows, head_pass_rows) block, then the
            // matmul's scratch as large.
            (logit_rows.checked_mul(head_pass_rows))
                .and_then(|n| n.checked_mul(2))
                .ok_or(Error::SizeOverflow)?
        };
        // Per row: out | rotated queries (q_dim each) | scores of the group;
        // at least one (row, KV head) unit per KV head.
        let per_row = (cfg.q_dim().checked_mul(2))
            .and_then(|q2| q2.checked_add(lim.max_seq_len.checked_mul(attn_group(&cfg))?))
            .and_then(|n| n.checked_mul(rows))
            .ok_or(Error::SizeOverflow)?;
        let per_kv_head = attn_unit_len(&cfg, lim.max_seq_len)
            .checked_mul(cfg.n_kv_heads.max(1))
            .ok_or(Error::SizeOverflow)?;
        Ok(Layout {
            cfg,
            rope_style: model.rope_style,
            max_seqs: lim.max_seqs,
            max_seq_len: lim.max_seq_len,
            max_rows: rows,
            max_logit_rows: logit_rows,
            head_pass_rows,
            attn_scratch: per_row.max(per_kv_head),
            matmul_scratch: layer_scratch.max(head_scratch),
            inputs: InputKinds::of(model)?,
        })
    }

    /// Worst-case arena bytes of [`RunState::carve`] (its counting run).
    ///
    /// Errors: [`Error::SizeOverflow`].
    pub(super) fn bytes(&self) -> Result<usize> {
        let mut count = Carve::Count { bytes: 0 };
        RunState::carve(self, &mut count)?;
        match count {
            Carve::Count { bytes } => Ok(bytes),
            Carve::Arena(_) => Err(Error::SizeOverflow),
        }
    }
}

/// Sets of RoPE angles a row needs: 2 when sliding-window layers exist (their
/// own base), else 1.
fn rope_sets(cfg: &Config) -> usize {
    if cfg.has_swa() { 2 } else { 1 }
}

/// `a · b`, or [`Error::SizeOverflow`].
fn mul(a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b).ok_or(Error::SizeOverflow)
}

/// Everything a step computes in, plus the constants derived once from the
/// config and limits. `n_rows` / `n_logit_rows` are those of the current step.
pub(super) struct RunState<'a> {
    pub(super) cfg: Config,
    pub(super) rope_style: RopeStyle,
    pub(super) max_seq_len: usize,
    /// `base^(-2/n_rot)`: the RoPE angle step between pairs.
    pub(super) theta_scale: F32,
    /// `base_swa^(-2/n_rot)`: the same for the sliding-window layers.
    pub(super) theta_scale_swa: F32,
    /// Sets of RoPE angles per row: 2 when the sliding-window layers have
    /// their own base (global set first), else 1.
    pub(super) rope_sets: usize,
    /// `1/sqrt(head_dim)` ([`Config::attn_scale_dim`]), as llama.cpp's
    /// `kq_scale` (Gemma 3 scales Q by it instead: the same real product,
    /// rounded once less).
    pub(super) attn_scale: F32,
    /// Output-head rows per pass (`vocab_size`: one pass).
    pub(super) head_pass_rows: usize,
    /// Rows of the current step (set by `embed_rows`).
    pub(super) n_rows: usize,
    /// Rows of the current step whose logits are returned.
    pub(super) n_logit_rows: usize,
    pub(super) residual: &'a mut [F32], // (n_rows, dim) the residual stream x
    pub(super) normed: &'a mut [F32],   // (n_rows, dim) rmsnorm(x) · w: input of a block's matmuls
    pub(super) q: &'a mut [F32],        // (n_rows, q_dim)
    pub(super) k: &'a mut [F32],        // (n_rows, kv_dim)
    pub(super) v: &'a mut [F32],        // (n_rows, kv_dim)
    /// Attention units in passes: `(unit, attn_unit_len)` = out | rotated
    /// queries | scores of one (row, KV head).
    pub(super) attn_scratch: &'a mut [F32],
    pub(super) attn_out: &'a mut [F32], // (n_rows, q_dim) attention output, wo's input
    pub(super) block_out: &'a mut [F32], // (n_rows, dim) wo / w_down output, added to x
    pub(super) gate: &'a mut [F32],     // (n_rows, hidden_dim) w_gate output, then SwiGLU
    pub(super) up: &'a mut [F32],       // (n_rows, hidden_dim) w_up output
    /// Matmul cells weight-row-major before the transpose, `(n_out, n_rows)`;
    /// in head passes: the pass's `(n_logit_rows, head_pass_rows)` block,
    /// then the matmul's scratch.
    pub(super) matmul_scratch: &'a mut [F32],
    pub(super) logits: &'a mut [F32], // (n_logit_rows, vocab_size)
    pub(super) rope_sin_cos: &'a mut [F32], // (n_rows, rope_sets, n_rot) sin | cos of each row's angles
    pub(super) row_entry: &'a mut [u32],    // (n_rows) entry index of each row
    pub(super) row_pos: &'a mut [u32],      // (n_rows) position of each row in its sequence
    pub(super) logit_rows: &'a mut [u32],   // (n_logit_rows) rows whose logits are returned
    pub(super) reservations: &'a mut [Reservation], // (max_seqs) KV room a step asks for
    pub(super) acts_dim: Acts<'a>,          // (n_rows, dim) quantized: wq wk wv w_gate w_up inputs
    pub(super) acts_q_dim: Acts<'a>,        // (n_rows, q_dim) quantized: wo input
    pub(super) acts_hidden: Acts<'a>,       // (n_rows, hidden_dim) quantized: w_down input
    pub(super) acts_head: Acts<'a>,         // (n_logit_rows, dim) quantized: output head input
}

impl<'a> RunState<'a> {
    /// Every buffer of `layout`, in carve order; the one list both the plan
    /// ([`Layout::bytes`]) and the engine's carve go through.
    ///
    /// Errors: [`Error::SizeOverflow`], [`Error::ArenaExhausted`] (arena
    /// mode), and those of `QActs::new`.
    pub(super) fn carve(layout: &Layout, c: &mut Carve<'_, 'a>) -> Result<Self> {
        let cfg = layout.cfg;
        let (rows, logit_rows) = (layout.max_rows, layout.max_logit_rows);
        let (d, qd, kvd, hd) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.hidden_dim);
        Ok(RunState {
            cfg,
            rope_style: layout.rope_style,
            max_seq_len: layout.max_seq_len,
            theta_scale: kernels::rope_theta_scale(cfg.rope_base, cfg.n_rot),
            theta_scale_swa: kernels::rope_theta_scale(cfg.rope_base_swa, cfg.n_rot),
            rope_sets: rope_sets(&cfg),
            attn_scale: F32::ONE / F32::from_u32(cfg.attn_scale_dim() as u32).sqrt(),
            head_pass_rows: layout.head_pass_rows,
            n_rows: 0,
            n_logit_rows: 0,
            residual: c.slice(mul(rows, d)?)?,
            normed: c.slice(mul(rows, d)?)?,
            q: c.slice(mul(rows, qd)?)?,
            k: c.slice(mul(rows, kvd)?)?,
            v: c.slice(mul(rows, kvd)?)?,
            attn_scratch: c.slice(layout.attn_scratch)?,
            attn_out: c.slice(mul(rows, qd)?)?,
            block_out: c.slice(mul(rows, d)?)?,
            gate: c.slice(mul(rows, hd)?)?,
            up: c.slice(mul(rows, hd)?)?,
            matmul_scratch: c.slice(layout.matmul_scratch)?,
            logits: c.slice(mul(logit_rows, cfg.vocab_size)?)?,
            rope_sin_cos: c.slice(mul(rows, mul(cfg.n_rot, rope_sets(&cfg))?)?)?,
            row_entry: c.slice(rows)?,
            row_pos: c.slice(rows)?,
            logit_rows: c.slice(logit_rows)?,
            reservations: c.slice(layout.max_seqs)?,
            acts_dim: Acts::carve(c, layout.inputs.dim, rows, d)?,
            acts_q_dim: Acts::carve(c, layout.inputs.q_dim, rows, qd)?,
            acts_hidden: Acts::carve(c, layout.inputs.hidden, rows, hd)?,
            acts_head: Acts::carve(c, layout.inputs.head, logit_rows, d)?,
        })
    }

    /// The logits of the current step, `(n_logit_rows, vocab_size)`.
    pub(super) fn logits(&self) -> &[F32] {
        let n = self.n_logit_rows * self.cfg.vocab_size;
        self.logits.get(..n).unwrap_or(&[])
    }
}
