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
//! Transactional: everything that can fail is checked, and KV room for every
//! entry is secured, before anything is written; a failing step changes
//! nothing.

use super::config::Config;
use super::weights::{Model, TensorRef};
use crate::kernels::{self, matmul_scratch_len};
use crate::kv::{KvConfig, KvRead, KvSlice, KvStore, KvType, Reservation, SeqId};
use crate::quant::{ActKind, GgmlType, QActs, QMatrix};
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

    fn validate(&self) -> Result<()> {
        if self.max_seqs == 0
            || self.max_seq_len == 0
            || self.max_step_tokens == 0
            || self.max_logit_rows == 0
            || self.max_step_tokens > u32::MAX as usize
            || self.max_seq_len > u32::MAX as usize
        {
            return Err(Error::InvalidConfig);
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
    /// Arena bytes `new` takes.
    fn bytes_required(cfg: &KvConfig) -> Option<usize>;
    /// A cache carved from `arena`.
    fn build(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self>;
}

/// Activation buffers of one input width, one per kind the weights read.
struct Acts<'a> {
    q8: Option<QActs<'a>>,
    f16: Option<QActs<'a>>,
    f32: Option<QActs<'a>>,
}

impl<'a> Acts<'a> {
    fn kinds(types: &[GgmlType]) -> [bool; 3] {
        let mut k = [false; 3];
        for &t in types {
            match ActKind::for_weight(t) {
                ActKind::Q8 => k[0] = true,
                ActKind::F16 => k[1] = true,
                ActKind::F32 => k[2] = true,
            }
        }
        k
    }

    fn bytes_for(kinds: [bool; 3], m: usize, n: usize) -> Option<usize> {
        let mut total = 0usize;
        for (i, kind) in [ActKind::Q8, ActKind::F16, ActKind::F32]
            .into_iter()
            .enumerate()
        {
            if kinds[i] {
                total = total.checked_add(QActs::bytes_for(kind, m, n)?)?;
            }
        }
        Some(total)
    }

    fn new(arena: &mut Arena<'a>, kinds: [bool; 3], m: usize, n: usize) -> Result<Self> {
        let mk = |arena: &mut Arena<'a>, on: bool, kind| -> Result<Option<QActs<'a>>> {
            if on {
                QActs::new(arena, kind, m, n).map(Some)
            } else {
                Ok(None)
            }
        };
        Ok(Acts {
            q8: mk(arena, kinds[0], ActKind::Q8)?,
            f16: mk(arena, kinds[1], ActKind::F16)?,
            f32: mk(arena, kinds[2], ActKind::F32)?,
        })
    }

    /// Converts `x` into every kind held (Q8 rows split over the workers).
    fn load<P: Parallel>(&mut self, par: &P, x: &[F32]) -> Result<()> {
        if let Some(a) = &mut self.q8 {
            a.quantize_par(par, x)?;
        }
        for a in [&mut self.f16, &mut self.f32].into_iter().flatten() {
            a.quantize(x)?;
        }
        Ok(())
    }

    fn for_type(&self, ty: GgmlType) -> Result<&QActs<'a>> {
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

/// The engine: a model, a KV cache and the run state, all in one arena.
pub struct Engine<'a, K: KvBuild<'a>> {
    model: Model<'a>,
    kv: K,
    lim: Limits,
    head_rows: usize, // output-head rows per pass
    theta_scale: F32,
    attn_scale: F32,
    x: &'a mut [F32],            // (T, dim) residual stream
    xb: &'a mut [F32],           // (T, dim) normed input of a sub-layer
    q: &'a mut [F32],            // (T, q_dim)
    k: &'a mut [F32],            // (T, kv_dim)
    v: &'a mut [F32],            // (T, kv_dim)
    att: &'a mut [F32],          // (T, q_dim + max_seq_len) per-row out | scores
    ob: &'a mut [F32],           // (T, q_dim) attention output
    proj: &'a mut [F32],         // (T, dim)
    hb: &'a mut [F32],           // (T, hidden_dim)
    hb2: &'a mut [F32],          // (T, hidden_dim)
    mm: &'a mut [F32],           // matmul transpose scratch; head passes: block + scratch
    logits: &'a mut [F32],       // (R, vocab_size)
    rope: &'a mut [F32],         // (T, n_rot) sin | cos of each row's RoPE angles
    row_entry: &'a mut [u32],    // (T) entry index of each row
    row_pos: &'a mut [u32],      // (T) position of each row
    out_rows: &'a mut [u32],     // (R) rows whose logits are returned
    reqs: &'a mut [Reservation], // (max_seqs) KV reservations of a step
    acts_dim: Acts<'a>,          // inputs of wq/wk/wv/w_gate/w_up
    acts_q: Acts<'a>,            // inputs of wo
    acts_hidden: Acts<'a>,       // inputs of w_down
    acts_out: Acts<'a>,          // inputs of the output head
}

/// Element counts of the run-state buffers, in carve order.
struct Sizes {
    t: usize,
    r: usize,
    /// Output-head rows per pass (`vocab_size`: one pass).
    head_rows: usize,
    f32s: [usize; 13],
    u32s: [usize; 3],
}

/// Fewest output-head rows per pass when the head runs in passes.
const HEAD_MIN_ROWS: usize = 1024;

/// Output-head rows per pass for up to `r` logit rows, given the layers'
/// matmul scratch (`layer_mm` elements). A head of `r > 1` rows needs
/// `r·rows` scratch plus an `r·rows` output block per pass (copied into the
/// logits), so rather than a `r·vocab` scratch the head runs in passes of as
/// many rows as half the layers' scratch holds (at least [`HEAD_MIN_ROWS`],
/// a multiple of 16). Every logit is the same exact dot whatever the pass.
fn head_rows(layer_mm: usize, r: usize, vocab: usize) -> usize {
    if r <= 1 || r.saturating_mul(vocab) <= layer_mm {
        return vocab;
    }
    let rows = (layer_mm / r.saturating_mul(2)) / 16 * 16;
    rows.max(HEAD_MIN_ROWS).min(vocab)
}

impl Sizes {
    fn new(cfg: &Config, lim: &Limits, w_out_max: usize) -> Option<Sizes> {
        let t = lim.max_step_tokens;
        let r = lim.max_logit_rows;
        let (d, q, kv, h) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.hidden_dim);
        let layer_mm = matmul_scratch_len(t, w_out_max);
        let head_rows = head_rows(layer_mm, r, cfg.vocab_size);
        let head_mm = if head_rows == cfg.vocab_size {
            matmul_scratch_len(r, cfg.vocab_size)
        } else {
            r.checked_mul(head_rows)?.checked_mul(2)?
        };
        let mm = layer_mm.max(head_mm);
        Some(Sizes {
            t,
            r,
            head_rows,
            f32s: [
                t.checked_mul(d)?,
                t.checked_mul(d)?,
                t.checked_mul(q)?,
                t.checked_mul(kv)?,
                t.checked_mul(kv)?,
                t.checked_mul(
                    q.checked_mul(2)?
                        .checked_add(lim.max_seq_len.checked_mul(attn_group(cfg))?)?,
                )?
                .max(attn_unit_len(cfg, lim.max_seq_len).checked_mul(cfg.n_kv_heads.max(1))?),
                t.checked_mul(q)?,
                t.checked_mul(d)?,
                t.checked_mul(h)?,
                t.checked_mul(h)?,
                mm,
                r.checked_mul(cfg.vocab_size)?,
                t.checked_mul(cfg.n_rot)?,
            ],
            u32s: [t, t, r],
        })
    }

    fn bytes(&self) -> Option<usize> {
        let mut total = 0usize;
        for &n in &self.f32s {
            total = total.checked_add(Arena::bytes_for::<F32>(n)?)?;
        }
        for &n in &self.u32s {
            total = total.checked_add(Arena::bytes_for::<u32>(n)?)?;
        }
        Some(total)
    }
}

/// Types of the matrices read at each input width: (dim, q_dim, hidden, output head).
/// Which activation kinds (Q8, F16, F32) the matrices at one input width read.
type Kinds = [bool; 3];

fn input_types(model: &Model<'_>) -> Result<(Kinds, Kinds, Kinds, Kinds)> {
    let ty =
        |r: &TensorRef| GgmlType::from_u32(r.ty).ok_or(Error::UnsupportedType { ggml_type: r.ty });
    let (mut kd, mut kq, mut kh) = ([false; 3], [false; 3], [false; 3]);
    let or = |a: [bool; 3], b: [bool; 3]| [a[0] | b[0], a[1] | b[1], a[2] | b[2]];
    for l in 0..model.cfg.n_layers {
        let w = model.layer(l)?;
        kd = or(
            kd,
            Acts::kinds(&[
                ty(&w.wq)?,
                ty(&w.wk)?,
                ty(&w.wv)?,
                ty(&w.w_gate)?,
                ty(&w.w_up)?,
            ]),
        );
        kq = or(kq, Acts::kinds(&[ty(&w.wo)?]));
        kh = or(kh, Acts::kinds(&[ty(&w.w_down)?]));
    }
    let ko = Acts::kinds(&[ty(&model.output)?]);
    Ok((kd, kq, kh, ko))
}

impl<'a, K: KvBuild<'a>> Engine<'a, K> {
    /// Arena bytes an engine for `model` and `lim` needs beyond the model's
    /// own ([`Model::bytes_required`]): KV cache, activations, logits.
    pub fn bytes_required(model: &Model<'_>, lim: &Limits) -> Result<usize> {
        lim.validate()?;
        let cfg = &model.cfg;
        let sizes = Sizes::new(cfg, lim, w_out_max(cfg)).ok_or(Error::SizeOverflow)?;
        let (kd, kq, kh, ko) = input_types(model)?;
        let t = lim.max_step_tokens;
        let parts = [
            K::bytes_required(&lim.kv_config(cfg)),
            sizes.bytes(),
            Arena::bytes_for::<Reservation>(lim.max_seqs),
            Acts::bytes_for(kd, t, cfg.dim),
            Acts::bytes_for(kq, t, cfg.q_dim()),
            Acts::bytes_for(kh, t, cfg.hidden_dim),
            Acts::bytes_for(ko, lim.max_logit_rows, cfg.dim),
        ];
        let mut total = 0usize;
        for p in parts {
            total = total
                .checked_add(p.ok_or(Error::SizeOverflow)?)
                .ok_or(Error::SizeOverflow)?;
        }
        Ok(total)
    }

    /// An engine for `model` with buffers for `lim`, carved from `arena`.
    /// Fails with [`Error::ArenaExhausted`] (arena untouched) if it is too small.
    pub fn new(model: Model<'a>, lim: Limits, arena: &mut Arena<'a>) -> Result<Self> {
        let need = Self::bytes_required(&model, &lim)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        let cfg = model.cfg;
        let sizes = Sizes::new(&cfg, &lim, w_out_max(&cfg)).ok_or(Error::SizeOverflow)?;
        let (kd, kq, kh, ko) = input_types(&model)?;
        let kv = K::build(arena, lim.kv_config(&cfg))?;
        let mut f = [0usize; 13].map(|_| None::<&'a mut [F32]>);
        for (slot, &n) in f.iter_mut().zip(sizes.f32s.iter()) {
            *slot = Some(arena.alloc::<F32>(n)?);
        }
        let [x, xb, q, k, v, att, ob, proj, hb, hb2, mm, logits, rope] =
            f.map(|s| s.unwrap_or_default());
        let row_entry = arena.alloc::<u32>(sizes.u32s[0])?;
        let row_pos = arena.alloc::<u32>(sizes.u32s[1])?;
        let out_rows = arena.alloc::<u32>(sizes.u32s[2])?;
        let reqs = arena.alloc::<Reservation>(lim.max_seqs)?;
        let t = sizes.t;
        let acts_dim = Acts::new(arena, kd, t, cfg.dim)?;
        let acts_q = Acts::new(arena, kq, t, cfg.q_dim())?;
        let acts_hidden = Acts::new(arena, kh, t, cfg.hidden_dim)?;
        let acts_out = Acts::new(arena, ko, sizes.r, cfg.dim)?;
        let theta_scale = kernels::rope_theta_scale(cfg.rope_base, cfg.n_rot);
        // 1 / sqrt(head_dim), as llama.cpp's kq_scale.
        let attn_scale = F32::ONE / F32::from_u32(cfg.head_dim as u32).sqrt();
        Ok(Engine {
            model,
            kv,
            lim,
            head_rows: sizes.head_rows,
            theta_scale,
            attn_scale,
            x,
            xb,
            q,
            k,
            v,
            att,
            ob,
            proj,
            hb,
            hb2,
            mm,
            logits,
            rope,
            row_entry,
            row_pos,
            out_rows,
            reqs,
            acts_dim,
            acts_q,
            acts_hidden,
            acts_out,
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
    pub fn new_seq(&mut self) -> Result<SeqId> {
        self.kv.new_seq()
    }

    /// A new sequence sharing everything `seq` has cached.
    pub fn fork(&mut self, seq: SeqId) -> Result<SeqId> {
        self.kv.fork(seq)
    }

    /// Ends a sequence and releases its cache.
    pub fn free(&mut self, seq: SeqId) -> Result<()> {
        self.kv.free(seq)
    }

    /// Cuts a sequence back to `len` tokens.
    pub fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        self.kv.truncate(seq, len)
    }

    /// Tokens a sequence holds.
    pub fn seq_len(&self, seq: SeqId) -> Result<usize> {
        self.kv.len(seq)
    }

    /// Checks a batch and secures KV room; returns (rows, logit rows).
    fn prepare(&mut self, batch: &[Entry<'_>]) -> Result<(usize, usize)> {
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
                return Err(Error::InvalidConfig);
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
        for (r, e) in self.reqs.iter_mut().zip(batch) {
            *r = Reservation::new(e.seq, e.tokens.len());
        }
        // The one fallible state change, all or nothing.
        self.kv.reserve(&self.reqs[..batch.len()])?;
        Ok((rows, out))
    }

    /// Runs one ragged batch and returns its logits `(rows, vocab_size)`: for
    /// each entry in order, its last token's row (or every token's row when
    /// `all_logits`). On error nothing changed.
    pub fn step<P: Parallel>(&mut self, par: &P, batch: &[Entry<'_>]) -> Result<&[F32]> {
        let (n_rows, n_out) = self.prepare(batch)?;
        let cfg = self.model.cfg;
        let (d, qd, kvd, hd) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.hidden_dim);
        let vocab = cfg.vocab_size;
        // Row bookkeeping and the embedding lookup.
        let embd = self.model.matrix(&self.model.token_embd)?;
        let mut r = 0;
        let mut o = 0;
        for (i, e) in batch.iter().enumerate() {
            let start = self.kv.len(e.seq)?;
            for (j, &tok) in e.tokens.iter().enumerate() {
                self.row_entry[r] = i as u32;
                self.row_pos[r] = (start + j) as u32;
                embd.dequantize_row(tok as usize, &mut self.x[r * d..(r + 1) * d])?;
                if e.all_logits || j + 1 == e.tokens.len() {
                    self.out_rows[o] = r as u32;
                    o += 1;
                }
                r += 1;
            }
        }
        let t = n_rows;
        // RoPE angles of every row, once per step (they depend on the
        // position only): (sin | cos) of n_rot / 2 pairs per row.
        let nr = cfg.n_rot;
        let half = nr / 2;
        if nr > 0 {
            let row_pos = &*self.row_pos;
            let ts = self.theta_scale;
            let failed = core::sync::atomic::AtomicBool::new(false);
            par.for_each_chunk(&mut self.rope[..t * nr], nr, &|r, buf| {
                match kernels::RopeAngles::new(nr, row_pos[r] as usize, ts) {
                    Ok(a) if buf.len() == nr => {
                        buf[..half].copy_from_slice(a.sin());
                        buf[half..].copy_from_slice(a.cos());
                    }
                    _ => failed.store(true, core::sync::atomic::Ordering::Relaxed),
                }
            });
            if failed.load(core::sync::atomic::Ordering::Relaxed) {
                return Err(Error::InvalidConfig);
            }
        }
        let style = self.model.rope_style;
        for l in 0..cfg.n_layers {
            let w = *self.model.layer(l)?;
            let (attn_norm, ffn_norm) = self.model.norms(l);
            // Attention sub-layer: xb = rmsnorm(x) * attn_norm.
            rmsnorm_rows(
                par,
                &self.x[..t * d],
                attn_norm,
                cfg.eps,
                &mut self.xb[..t * d],
                d,
            )?;
            self.acts_dim.load(par, &self.xb[..t * d])?;
            let wq = self.model.matrix(&w.wq)?;
            let wk = self.model.matrix(&w.wk)?;
            let wv = self.model.matrix(&w.wv)?;
            let acts = self.acts_dim.for_type(wq.ty)?;
            if one_region(par, t, acts, [&wk, &wv]) {
                // One row: Q, K and V in one parallel region.
                kernels::matmul::matvec_shares(
                    par,
                    acts,
                    [&wq, &wk, &wv],
                    [&mut self.q[..qd], &mut self.k[..kvd], &mut self.v[..kvd]],
                    &|_| Ok(()),
                )?;
            } else {
                kernels::matmul(par, &wq, acts, &mut self.q[..t * qd], self.mm)?;
                let acts = self.acts_dim.for_type(wk.ty)?;
                kernels::matmul(par, &wk, acts, &mut self.k[..t * kvd], self.mm)?;
                let acts = self.acts_dim.for_type(wv.ty)?;
                kernels::matmul(par, &wv, acts, &mut self.v[..t * kvd], self.mm)?;
            }
            if let Some((bq, bk, bv)) = self.model.biases(l) {
                add_bias(&mut self.q[..t * qd], bq);
                add_bias(&mut self.k[..t * kvd], bk);
                add_bias(&mut self.v[..t * kvd], bv);
            }
            // RoPE on K (the rows split over the workers), then the KV
            // writes; Q is rotated inside each attention unit below. Same
            // bits as `kernels::rope` on each row.
            {
                let angles = &*self.rope;
                let failed = core::sync::atomic::AtomicBool::new(false);
                let kv_rope = |r: usize, krow: &mut [F32]| {
                    let (sn, cs) = angles[r * nr..(r + 1) * nr].split_at(half);
                    if kernels::rope_apply(sn, cs, krow, cfg.n_kv_heads, cfg.head_dim, style)
                        .is_err()
                    {
                        failed.store(true, core::sync::atomic::Ordering::Relaxed);
                    }
                };
                if t == 1 {
                    kv_rope(0, &mut self.k[..kvd]);
                } else {
                    par.for_each_chunk(&mut self.k[..t * kvd], kvd, &kv_rope);
                }
                if failed.load(core::sync::atomic::Ordering::Relaxed) {
                    return Err(Error::InvalidConfig);
                }
            }
            for r in 0..t {
                let pos = self.row_pos[r] as usize;
                let seq = batch[self.row_entry[r] as usize].seq;
                self.kv.write(
                    seq,
                    l,
                    pos,
                    &self.k[r * kvd..(r + 1) * kvd],
                    &self.v[r * kvd..(r + 1) * kvd],
                )?;
            }
            // Attention, one (row, KV head) unit per chunk: (out group·head_dim |
            // scores group·max_seq_len). Each unit is the same per-head exact
            // arithmetic whatever the split, so a decode row's KV heads can run
            // on different threads. Units go in passes of what `att` holds.
            let group = cfg.n_heads / cfg.n_kv_heads.max(1);
            let n_kv = cfg.n_kv_heads.max(1);
            let unit = attn_unit_len(&cfg, self.lim.max_seq_len);
            let per_pass = (self.att.len() / unit.max(1)).max(1);
            let n_units = t * n_kv;
            let gq = group * cfg.head_dim;
            let mut u0 = 0;
            while u0 < n_units {
                let nu = per_pass.min(n_units - u0);
                let kv = &self.kv;
                let q = &*self.q;
                let row_entry = &*self.row_entry;
                let row_pos = &*self.row_pos;
                let angles = &*self.rope;
                let scale = self.attn_scale;
                let failed = core::sync::atomic::AtomicBool::new(false);
                let att = self.att.get_mut(..nu * unit).ok_or(Error::InvalidConfig)?;
                par.for_each_chunk(att, unit, &|i, chunk| {
                    let u = u0 + i;
                    let (r, g) = (u / n_kv, u % n_kv);
                    let (out, rest) = chunk.split_at_mut(gq);
                    let (qg, scores) = rest.split_at_mut(gq);
                    let seq = batch[row_entry[r] as usize].seq;
                    let n_ctx = row_pos[r] as usize + 1;
                    qg.copy_from_slice(&q[r * qd + g * gq..r * qd + (g + 1) * gq]);
                    let (sn, cs) = angles[r * nr..(r + 1) * nr].split_at(half);
                    let ok = kernels::rope_apply(sn, cs, qg, group, cfg.head_dim, style);
                    let ok = ok.and_then(|()| kv.view(seq, l)).and_then(|view| {
                        let head = KvHead {
                            inner: &view,
                            k0: g * cfg.head_dim,
                            len: cfg.head_dim,
                        };
                        kernels::attention(
                            qg,
                            &head,
                            n_ctx,
                            group,
                            1,
                            cfg.head_dim,
                            scale,
                            scores,
                            out,
                        )
                    });
                    if ok.is_err() {
                        failed.store(true, core::sync::atomic::Ordering::Relaxed);
                    }
                });
                if failed.load(core::sync::atomic::Ordering::Relaxed) {
                    return Err(Error::InvalidConfig);
                }
                for i in 0..nu {
                    let u = u0 + i;
                    let (r, g) = (u / n_kv, u % n_kv);
                    self.ob[r * qd + g * gq..r * qd + (g + 1) * gq]
                        .copy_from_slice(&self.att[i * unit..i * unit + gq]);
                }
                u0 += nu;
            }
            self.acts_q.load(par, &self.ob[..t * qd])?;
            let wo = self.model.matrix(&w.wo)?;
            kernels::matmul(
                par,
                &wo,
                self.acts_q.for_type(wo.ty)?,
                &mut self.proj[..t * d],
                self.mm,
            )?;
            add_rows(par, &mut self.x[..t * d], &self.proj[..t * d], d);
            // Feed-forward sub-layer: x += down(silu(gate(xb)) * up(xb)).
            rmsnorm_rows(
                par,
                &self.x[..t * d],
                ffn_norm,
                cfg.eps,
                &mut self.xb[..t * d],
                d,
            )?;
            self.acts_dim.load(par, &self.xb[..t * d])?;
            let wg = self.model.matrix(&w.w_gate)?;
            let wu = self.model.matrix(&w.w_up)?;
            let acts = self.acts_dim.for_type(wg.ty)?;
            if one_region(par, t, acts, [&wu]) && wg.n_out == wu.n_out {
                // One row: gate, up and SwiGLU on each thread's share of
                // the hidden rows, in one parallel region.
                kernels::matmul::matvec_shares(
                    par,
                    acts,
                    [&wg, &wu],
                    [&mut self.hb[..hd], &mut self.hb2[..hd]],
                    &|shares| match shares {
                        [Some(g), Some(u)] => kernels::swiglu(g, u),
                        [None, None] => Ok(()),
                        _ => Err(Error::InvalidConfig),
                    },
                )?;
            } else {
                kernels::matmul(par, &wg, acts, &mut self.hb[..t * hd], self.mm)?;
                let acts = self.acts_dim.for_type(wu.ty)?;
                kernels::matmul(par, &wu, acts, &mut self.hb2[..t * hd], self.mm)?;
                // Elementwise, so split over the workers (any split, same bits).
                let up = &self.hb2[..t * hd];
                let cl = (t * hd).div_ceil(par.threads().max(1)).max(1);
                let failed = core::sync::atomic::AtomicBool::new(false);
                par.for_each_chunk(&mut self.hb[..t * hd], cl, &|i, g| {
                    let ok = up
                        .get(i * cl..i * cl + g.len())
                        .ok_or(Error::InvalidConfig)
                        .and_then(|u| kernels::swiglu(g, u));
                    if ok.is_err() {
                        failed.store(true, core::sync::atomic::Ordering::Relaxed);
                    }
                });
                if failed.load(core::sync::atomic::Ordering::Relaxed) {
                    return Err(Error::InvalidConfig);
                }
            }
            self.acts_hidden.load(par, &self.hb[..t * hd])?;
            let wd = self.model.matrix(&w.w_down)?;
            kernels::matmul(
                par,
                &wd,
                self.acts_hidden.for_type(wd.ty)?,
                &mut self.proj[..t * d],
                self.mm,
            )?;
            add_rows(par, &mut self.x[..t * d], &self.proj[..t * d], d);
        }
        // Final norm of the rows whose logits are wanted, then the head.
        for (i, &r) in self.out_rows[..n_out].iter().enumerate() {
            let r = r as usize;
            kernels::rmsnorm(
                &self.x[r * d..(r + 1) * d],
                self.model.output_norm(),
                cfg.eps,
                &mut self.xb[i * d..(i + 1) * d],
            )?;
        }
        self.acts_out.load(par, &self.xb[..n_out * d])?;
        let wout = self.model.matrix(&self.model.output)?;
        let acts = self.acts_out.for_type(wout.ty)?;
        let rows = self.head_rows.max(1);
        if n_out <= 1 || rows >= vocab {
            kernels::matmul(par, &wout, acts, &mut self.logits[..n_out * vocab], self.mm)?;
        } else {
            // In passes of `rows` head rows: each pass's (n_out, rows) block
            // goes to the front of `mm`, the matmul scratch after it.
            let rb = wout.row_bytes();
            let mut o0 = 0;
            while o0 < vocab {
                let n = rows.min(vocab - o0);
                let data = wout
                    .data
                    .get(o0 * rb..(o0 + n) * rb)
                    .ok_or(Error::InvalidConfig)?;
                let part = QMatrix::new(wout.ty, wout.n_in, n, data)?;
                let (block, scratch) = self
                    .mm
                    .split_at_mut_checked(n_out * n)
                    .ok_or(Error::InvalidConfig)?;
                kernels::matmul(par, &part, acts, block, scratch)?;
                for (b, l) in block
                    .chunks_exact(n)
                    .zip(self.logits.chunks_exact_mut(vocab))
                {
                    l[o0..o0 + n].copy_from_slice(b);
                }
                o0 += n;
            }
        }
        // Commit the new lengths.
        for e in batch {
            let len = self.kv.len(e.seq)?;
            self.kv.set_len(e.seq, len + e.tokens.len())?;
        }
        Ok(&self.logits[..n_out * vocab])
    }
}

/// Whether one input row's matmuls with `acts` go in one parallel region
/// ([`kernels::matmul::matvec_shares`]): one row, a pool of at most
/// [`kernels::matmul::MAX_SHARES`] threads, and the other matrices reading
/// the same quantized input (the same activation kind).
fn one_region<P: Parallel, const N: usize>(
    par: &P,
    t: usize,
    acts: &crate::quant::QActs<'_>,
    others: [&QMatrix<'_>; N],
) -> bool {
    t == 1
        && par.threads() <= kernels::matmul::MAX_SHARES
        && others
            .iter()
            .all(|w| crate::quant::ActKind::for_weight(w.ty) == acts.kind())
}

/// Query heads per KV head that attention processes together (its scores
/// buffer holds that many rows of `max_seq_len`).
fn attn_group(cfg: &Config) -> usize {
    (cfg.n_heads / cfg.n_kv_heads.max(1)).clamp(1, kernels::attention::MAX_GROUP)
}

/// Elements of one attention unit (one row, one KV head):
/// `group·head_dim` outputs, the group's rotated queries (as many) and
/// `group·max_seq_len` scores.
fn attn_unit_len(cfg: &Config, max_seq_len: usize) -> usize {
    let group = cfg.n_heads / cfg.n_kv_heads.max(1);
    group
        .saturating_mul(cfg.head_dim)
        .saturating_mul(2)
        .saturating_add(group.saturating_mul(max_seq_len))
}

/// The columns `k0..k0 + len` (one KV head) of every cached row.
struct KvHead<'v, V: KvRead> {
    inner: &'v V,
    k0: usize,
    len: usize,
}

impl<V: KvRead> KvRead for KvHead<'_, V> {
    fn k(&self, pos: usize) -> KvSlice<'_> {
        head_cols(self.inner.k(pos), self.k0, self.len)
    }
    fn v(&self, pos: usize) -> KvSlice<'_> {
        head_cols(self.inner.v(pos), self.k0, self.len)
    }
}

/// Columns `k0..k0 + len` of a row; an empty row (rejected by the kernel's
/// shape check) if it is too short.
fn head_cols(row: KvSlice<'_>, k0: usize, len: usize) -> KvSlice<'_> {
    let end = k0.saturating_add(len);
    match row {
        KvSlice::F16(r) => KvSlice::F16(r.get(k0..end).unwrap_or(&[])),
        KvSlice::F32(r) => KvSlice::F32(r.get(k0..end).unwrap_or(&[])),
    }
}

/// Largest `n_out` of the per-layer matrices.
fn w_out_max(cfg: &Config) -> usize {
    cfg.dim
        .max(cfg.q_dim())
        .max(cfg.kv_dim())
        .max(cfg.hidden_dim)
}

/// `x[r] += b` for every row `r` of `x`.
fn add_bias(x: &mut [F32], b: &[F32]) {
    for row in x.chunks_exact_mut(b.len().max(1)) {
        for (xi, &bi) in row.iter_mut().zip(b) {
            *xi = *xi + bi;
        }
    }
}

/// `x += y` elementwise (residual connection).
fn add_into(x: &mut [F32], y: &[F32]) {
    kernels::add_assign(x, y);
}

/// Rows of `d` split evenly over the workers: the chunk length for
/// [`Parallel::for_each_chunk`] over `rows · d` elements.
fn rows_chunk<P: Parallel>(par: &P, rows: usize, d: usize) -> usize {
    rows.div_ceil(par.threads().max(1)).max(1) * d.max(1)
}

/// [`add_into`] over rows of `d`, the rows split over the workers.
fn add_rows<P: Parallel>(par: &P, x: &mut [F32], y: &[F32], d: usize) {
    let cl = rows_chunk(par, x.len() / d.max(1), d);
    par.for_each_chunk(x, cl, &|i, xc| {
        add_into(xc, y.get(i * cl..).unwrap_or(&[]));
    });
}

/// `out_r = rmsnorm(x_r) · w` for each row of `d`, the rows split over the
/// workers (each row is the same fixed-order arithmetic wherever it runs).
fn rmsnorm_rows<P: Parallel>(
    par: &P,
    x: &[F32],
    w: &[F32],
    eps: F32,
    out: &mut [F32],
    d: usize,
) -> Result<()> {
    let cl = rows_chunk(par, x.len() / d.max(1), d);
    let failed = core::sync::atomic::AtomicBool::new(false);
    par.for_each_chunk(out, cl, &|i, oc| {
        let xs = x.get(i * cl..i * cl + oc.len()).unwrap_or(&[]);
        let ok = xs.len() == oc.len()
            && w.len() == d
            && kernels::rmsnorm::rmsnorm_rows(xs, w, eps, oc).is_ok();
        if !ok {
            failed.store(true, core::sync::atomic::Ordering::Relaxed);
        }
    });
    if failed.load(core::sync::atomic::Ordering::Relaxed) {
        return Err(Error::InvalidConfig);
    }
    Ok(())
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
