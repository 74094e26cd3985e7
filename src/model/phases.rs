//! The phases of a step, in the order [`super::Engine::step`] runs them,
//! each over the rows of every entry at once:
//!
//! ```text
//! embed_rows      x = embedding[token]; row bookkeeping (entry, position, logit rows)
//! rope_angles     sin | cos of every row's RoPE angles (they depend on the position only)
//! per layer:
//!   attention_block  x += wo · attention(rope(q), rope(k) stored, v stored), from rmsnorm(x)
//!   ffn_block        x += w_down · (silu(w_gate · n) * (w_up · n)),     n = rmsnorm(x)
//! output_head     logits = output · rmsnorm(x) of the logit rows
//! ```
//!
//! Matrices see all rows together (each weight row is read once per step);
//! attention is per row over that row's own sequence. Every per-cell
//! computation is independent of the other rows and of how rows are split
//! over the workers, so no value depends on the batch, the chunking or the
//! thread count. Fallible parallel work goes through
//! [`Parallel::try_for_each_chunk`]: the error is the lowest failing chunk's.

#![forbid(unsafe_code)]

use super::config::Activation;
use super::engine::Entry;
use super::run_state::{RunState, attn_unit_len};
use super::weights::{LayerWeights, Model};
use crate::kernels::{self, check_len, matmul};
use crate::kv::{KvRead, KvSlice, KvStore};
use crate::quant::{ActKind, QActs, QMatrix};
use crate::{Error, F32, Parallel, Result};

/// Which block's output [`RunState::add_projection`] projects.
#[derive(Clone, Copy)]
enum BlockOutput {
    /// `attn_out` (n_rows, q_dim), through `wo`.
    Attention,
    /// The SwiGLU output in `gate` (n_rows, hidden_dim), through `w_down`.
    Ffn,
}

impl RunState<'_> {
    /// Fills the row bookkeeping for `batch` (already checked by the
    /// engine's `prepare`) and looks up each row's token embedding into the
    /// residual stream. Sets `n_rows` and `n_logit_rows`.
    pub(super) fn embed_rows<K: KvStore>(
        &mut self,
        model: &Model<'_>,
        kv: &K,
        batch: &[Entry<'_>],
    ) -> Result<()> {
        let d = self.cfg.dim;
        let embedding = model.matrix(&model.token_embd)?; // (vocab_size, dim)
        // Gemma: x = embedding · √dim (√ correctly rounded, as sqrtf).
        let embd_scale = self
            .cfg
            .arch
            .scales_embedding()
            .then(|| F32::from_u32(d as u32).sqrt());
        let mut r = 0;
        let mut o = 0;
        for (i, e) in batch.iter().enumerate() {
            let start = kv.len(e.seq)?;
            for (j, &tok) in e.tokens.iter().enumerate() {
                self.row_entry[r] = i as u32;
                self.row_pos[r] = (start + j) as u32;
                let x = &mut self.residual[r * d..(r + 1) * d];
                embedding.dequantize_row(tok as usize, x)?;
                if let Some(s) = embd_scale {
                    for xi in x.iter_mut() {
                        *xi = *xi * s;
                    }
                }
                if e.all_logits || j + 1 == e.tokens.len() {
                    self.logit_rows[o] = r as u32;
                    o += 1;
                }
                r += 1;
            }
        }
        self.n_rows = r;
        self.n_logit_rows = o;
        Ok(())
    }

    /// `(sin | cos)` of the `n_rot / 2` RoPE angles of every row, once per
    /// step (shared by Q and K of every layer), rows split over the workers:
    /// one set per base (global, then sliding-window when it has its own),
    /// each angle divided by its frequency factor when `freqs` is not empty.
    pub(super) fn rope_angles<P: Parallel>(&mut self, par: &P, freqs: &[F32]) -> Result<()> {
        let n_rot = self.cfg.n_rot;
        if n_rot == 0 {
            return Ok(());
        }
        let half = n_rot / 2;
        let sets = self.rope_sets;
        let (row_pos, scales) = (&*self.row_pos, [self.theta_scale, self.theta_scale_swa]);
        let sin_cos = &mut self.rope_sin_cos[..self.n_rows * n_rot * sets];
        par.try_for_each_chunk(sin_cos, n_rot * sets, &|r, row| {
            check_len(n_rot * sets, row.len())?;
            for (set, row) in row.chunks_exact_mut(n_rot).enumerate() {
                let pos = row_pos[r] as usize;
                let angles = kernels::RopeAngles::with_factors(n_rot, pos, scales[set], freqs)?;
                let (sin, cos) = row.split_at_mut(half);
                sin.copy_from_slice(angles.sin());
                cos.copy_from_slice(angles.cos());
            }
            Ok(())
        })
    }

    /// Offset of layer `layer`'s angle set within a row of `rope_sin_cos`.
    fn rope_set_offset(&self, layer: usize) -> usize {
        if self.rope_sets > 1 && self.cfg.is_swa_layer(layer) {
            self.cfg.n_rot
        } else {
            0
        }
    }

    /// The attention block of `layer`: `normed = rmsnorm(x) · attn_norm`,
    /// Q K V projections (plus biases), RoPE on K and the KV writes, then
    /// attention of each row over its own sequence, and `x += wo · out`.
    pub(super) fn attention_block<P: Parallel, K: KvStore + Sync>(
        &mut self,
        par: &P,
        w: &LayerWeights<'_>,
        kv: &mut K,
        batch: &[Entry<'_>],
        layer: usize,
    ) -> Result<()> {
        let (n, d) = (self.n_rows, self.cfg.dim);
        let (x, eps) = (&self.residual[..n * d], self.cfg.eps);
        rmsnorm_rows(par, x, w.attn_norm, eps, &mut self.normed[..n * d], d)?;
        self.qkv(par, w)?;
        if let Some((q_norm, k_norm)) = w.qk_norm {
            self.qk_norm(par, q_norm, k_norm)?;
        }
        self.rope_k_and_store(par, kv, batch, layer)?;
        self.attend(par, kv, batch, layer)?;
        let post = w.post_norms.map(|(a, _)| a);
        self.add_projection(par, BlockOutput::Attention, &w.wo, post)
    }

    /// Every Q head and every K head RMS-normalized over its `head_dim`
    /// (`attn_out` is the scratch: it is written by `attend` later).
    fn qk_norm<P: Parallel>(&mut self, par: &P, q_norm: &[F32], k_norm: &[F32]) -> Result<()> {
        let (n, hd, eps) = (self.n_rows, self.cfg.head_dim, self.cfg.eps);
        for (x, w) in [
            (&mut self.q[..n * self.cfg.q_dim()], q_norm),
            (&mut self.k[..n * self.cfg.kv_dim()], k_norm),
        ] {
            let available = self.attn_out.len();
            let tmp = self
                .attn_out
                .get_mut(..x.len())
                .ok_or(Error::BufferTooSmall {
                    needed: x.len(),
                    available,
                })?;
            rmsnorm_rows(par, x, w, eps, tmp, hd)?;
            x.copy_from_slice(tmp);
        }
        Ok(())
    }

    /// The tail both blocks share: the block's output (`attn_out`, q_dim
    /// wide, or the SwiGLU `gate`, hidden_dim wide) quantized for `w`,
    /// `block_out = w · output` (n_rows, dim), and `x += block_out` (or,
    /// with a post-norm (gemma3), `x += rmsnorm(block_out) · post_norm`).
    fn add_projection<P: Parallel>(
        &mut self,
        par: &P,
        from: BlockOutput,
        w: &QMatrix<'_>,
        post_norm: Option<&[F32]>,
    ) -> Result<()> {
        let (n, d) = (self.n_rows, self.cfg.dim);
        let (acts, input) = match from {
            BlockOutput::Attention => {
                (&mut self.acts_q_dim, &self.attn_out[..n * self.cfg.q_dim()])
            }
            BlockOutput::Ffn => (&mut self.acts_hidden, &self.gate[..n * self.cfg.hidden_dim]),
        };
        acts.load(par, input)?;
        let acts = acts.for_type(w.ty)?;
        matmul(
            par,
            w,
            acts,
            &mut self.block_out[..n * d],
            self.matmul_scratch,
        )?;
        let block_out = match post_norm {
            Some(w) => {
                let eps = self.cfg.eps;
                let out = &mut self.normed[..n * d];
                rmsnorm_rows(par, &self.block_out[..n * d], w, eps, out, d)?;
                &self.normed[..n * d]
            }
            None => &self.block_out[..n * d],
        };
        add_rows(par, &mut self.residual[..n * d], block_out, d);
        Ok(())
    }

    /// `q, k, v = normed · (wq, wk, wv)ᵀ (+ biases)`; one decode row runs
    /// the three in one parallel region.
    fn qkv<P: Parallel>(&mut self, par: &P, w: &LayerWeights<'_>) -> Result<()> {
        let (n, d, qd, kvd) = (
            self.n_rows,
            self.cfg.dim,
            self.cfg.q_dim(),
            self.cfg.kv_dim(),
        );
        self.acts_dim.load(par, &self.normed[..n * d])?;
        let acts = self.acts_dim.for_type(w.wq.ty)?;
        let (q, k, v) = (
            &mut self.q[..n * qd],
            &mut self.k[..n * kvd],
            &mut self.v[..n * kvd],
        );
        if fits_one_region(par, n, acts, [&w.wk, &w.wv]) {
            matmul::fused_matvecs(par, acts, [&w.wq, &w.wk, &w.wv], [q, k, v], &|_| Ok(()))?;
        } else {
            matmul(par, &w.wq, acts, q, self.matmul_scratch)?;
            matmul(
                par,
                &w.wk,
                self.acts_dim.for_type(w.wk.ty)?,
                k,
                self.matmul_scratch,
            )?;
            matmul(
                par,
                &w.wv,
                self.acts_dim.for_type(w.wv.ty)?,
                v,
                self.matmul_scratch,
            )?;
        }
        if let Some((bq, bk, bv)) = w.qkv_bias {
            add_bias(&mut self.q[..n * qd], bq);
            add_bias(&mut self.k[..n * kvd], bk);
            add_bias(&mut self.v[..n * kvd], bv);
        }
        Ok(())
    }

    /// RoPE on every row's K (rows split over the workers; the same bits as
    /// `kernels::rope` on each row), then K and V written to each row's
    /// sequence at its position. Q is rotated inside each attention unit.
    fn rope_k_and_store<P: Parallel, K: KvStore>(
        &mut self,
        par: &P,
        kv: &mut K,
        batch: &[Entry<'_>],
        layer: usize,
    ) -> Result<()> {
        let (n, kvd, n_rot) = (self.n_rows, self.cfg.kv_dim(), self.cfg.n_rot);
        let (n_kv_heads, head_dim, style) =
            (self.cfg.n_kv_heads, self.cfg.head_dim, self.rope_style);
        let (sin_cos, stride, off) = (
            &*self.rope_sin_cos,
            n_rot * self.rope_sets,
            self.rope_set_offset(layer),
        );
        let rope_k = |r: usize, k_row: &mut [F32]| {
            let at = r * stride + off;
            let (sin, cos) = sin_cos[at..at + n_rot].split_at(n_rot / 2);
            kernels::rope_apply(sin, cos, k_row, n_kv_heads, head_dim, style)
        };
        if n == 1 {
            rope_k(0, &mut self.k[..kvd])?;
        } else {
            par.try_for_each_chunk(&mut self.k[..n * kvd], kvd, &rope_k)?;
        }
        for r in 0..n {
            let pos = self.row_pos[r] as usize;
            let seq = batch[self.row_entry[r] as usize].seq;
            let (k, v) = (
                &self.k[r * kvd..(r + 1) * kvd],
                &self.v[r * kvd..(r + 1) * kvd],
            );
            kv.write(seq, layer, pos, k, v)?;
        }
        Ok(())
    }

    /// `attn_out = attention(rope(q), K, V)` of every row over its own
    /// sequence, one (row, KV head) unit per chunk: out | rotated queries |
    /// scores of the KV head's query group. Each unit is the same per-head
    /// exact arithmetic whatever the split, so a decode row's KV heads can
    /// run on different threads. Units go in passes of what `attn_scratch`
    /// holds.
    fn attend<P: Parallel, K: KvStore + Sync>(
        &mut self,
        par: &P,
        kv: &K,
        batch: &[Entry<'_>],
        layer: usize,
    ) -> Result<()> {
        let cfg = self.cfg;
        let (qd, n_rot, head_dim, style) = (cfg.q_dim(), cfg.n_rot, cfg.head_dim, self.rope_style);
        let n_kv = cfg.n_kv_heads.max(1);
        let group = cfg.n_heads / n_kv; // query heads per KV head
        let group_width = group * head_dim; // (group, head_dim) queries or outputs
        let unit = attn_unit_len(&cfg, self.max_seq_len);
        let per_pass = (self.attn_scratch.len() / unit.max(1)).max(1);
        let n_units = self.n_rows * n_kv;
        let (q, row_entry, row_pos) = (&*self.q, &*self.row_entry, &*self.row_pos);
        let (sin_cos, scale) = (&*self.rope_sin_cos, self.attn_scale);
        let (stride, off) = (n_rot * self.rope_sets, self.rope_set_offset(layer));
        // Sliding window: a row at position p sees p - window + 1 ..= p.
        let window = if cfg.is_swa_layer(layer) {
            cfg.sliding_window
        } else {
            usize::MAX
        };
        let mut u0 = 0;
        while u0 < n_units {
            let n_pass = per_pass.min(n_units - u0);
            let available = self.attn_scratch.len();
            let units =
                self.attn_scratch
                    .get_mut(..n_pass * unit)
                    .ok_or(Error::BufferTooSmall {
                        needed: n_pass * unit,
                        available,
                    })?;
            par.try_for_each_chunk(units, unit, &|i, chunk| {
                let (r, g) = ((u0 + i) / n_kv, (u0 + i) % n_kv);
                let (out, rest) = chunk.split_at_mut(group_width);
                let (q_group, scores) = rest.split_at_mut(group_width);
                let seq = batch[row_entry[r] as usize].seq;
                let end = row_pos[r] as usize + 1;
                let first_pos = end.saturating_sub(window);
                q_group
                    .copy_from_slice(&q[r * qd + g * group_width..r * qd + (g + 1) * group_width]);
                let at = r * stride + off;
                let (sin, cos) = sin_cos[at..at + n_rot].split_at(n_rot / 2);
                kernels::rope_apply(sin, cos, q_group, group, head_dim, style)?;
                let view = kv.view(seq, layer)?;
                let head = KvHead {
                    rows: &view,
                    first_pos,
                    first_col: g * head_dim,
                    n_cols: head_dim,
                };
                let n_ctx = end - first_pos;
                kernels::attention(
                    q_group, &head, n_ctx, group, 1, head_dim, scale, scores, out,
                )
            })?;
            for i in 0..n_pass {
                let (r, g) = ((u0 + i) / n_kv, (u0 + i) % n_kv);
                self.attn_out[r * qd + g * group_width..r * qd + (g + 1) * group_width]
                    .copy_from_slice(&self.attn_scratch[i * unit..i * unit + group_width]);
            }
            u0 += n_pass;
        }
        Ok(())
    }

    /// The feed-forward block: `normed = rmsnorm(x) · ffn_norm`,
    /// `x += w_down · (act(w_gate · normed) * (w_up · normed))` with `act`
    /// SiLU or (gemma3) GELU-tanh, and gemma3's post-norm before the add.
    pub(super) fn ffn_block<P: Parallel>(&mut self, par: &P, w: &LayerWeights<'_>) -> Result<()> {
        let (n, d, hd) = (self.n_rows, self.cfg.dim, self.cfg.hidden_dim);
        let (x, eps) = (&self.residual[..n * d], self.cfg.eps);
        rmsnorm_rows(par, x, w.ffn_norm, eps, &mut self.normed[..n * d], d)?;
        self.acts_dim.load(par, &self.normed[..n * d])?;
        let acts = self.acts_dim.for_type(w.w_gate.ty)?;
        let (gate, up) = (&mut self.gate[..n * hd], &mut self.up[..n * hd]);
        let act: fn(&mut [F32], &[F32]) -> Result<()> = match self.cfg.arch.activation() {
            Activation::Silu => kernels::swiglu,
            Activation::Gelu => kernels::geglu,
        };
        if fits_one_region(par, n, acts, [&w.w_up]) && w.w_gate.n_out == w.w_up.n_out {
            // One row: gate, up and SwiGLU on each thread's share of the
            // hidden rows, in one parallel region.
            matmul::fused_matvecs(par, acts, [&w.w_gate, &w.w_up], [gate, up], &|shares| {
                match shares {
                    [Some(gate), Some(up)] => act(gate, up),
                    [None, None] => Ok(()),
                    [gate, up] => check_len(share_len(gate), share_len(up)),
                }
            })?;
        } else {
            matmul(par, &w.w_gate, acts, gate, self.matmul_scratch)?;
            matmul(
                par,
                &w.w_up,
                self.acts_dim.for_type(w.w_up.ty)?,
                up,
                self.matmul_scratch,
            )?;
            // Elementwise, so split over the workers (any split, same bits).
            let up = &*up;
            let chunk_len = (n * hd).div_ceil(par.threads().max(1)).max(1);
            par.try_for_each_chunk(gate, chunk_len, &|i, gate| {
                let up = up
                    .get(i * chunk_len..i * chunk_len + gate.len())
                    .unwrap_or(&[]);
                act(gate, up)
            })?;
        }
        let post = w.post_norms.map(|(_, f)| f);
        self.add_projection(par, BlockOutput::Ffn, &w.w_down, post)
    }

    /// Final logit soft-capping (gemma3, when the file sets it), as
    /// llama.cpp: `l = c · tanh(l · (1/c))`, each step rounded; nothing when
    /// `final_softcap` is 0.
    pub(super) fn final_softcap(&mut self) {
        let c = self.cfg.final_softcap;
        if c.to_bits() == 0 {
            return;
        }
        let inv = F32::ONE / c;
        let n = self.n_logit_rows * self.cfg.vocab_size;
        for l in &mut self.logits[..n] {
            *l = (*l * inv).tanh() * c;
        }
    }

    /// `logits = output · rmsnorm(x) · output_norm` of the logit rows. A head
    /// of more than one row whose scratch would not fit runs in passes of
    /// `head_pass_rows` vocabulary rows (the same exact dots).
    pub(super) fn output_head<P: Parallel>(&mut self, par: &P, model: &Model<'_>) -> Result<()> {
        let (d, vocab, n_out) = (self.cfg.dim, self.cfg.vocab_size, self.n_logit_rows);
        for (i, &r) in self.logit_rows[..n_out].iter().enumerate() {
            let r = r as usize;
            let x = &self.residual[r * d..(r + 1) * d];
            kernels::rmsnorm(
                x,
                model.output_norm(),
                self.cfg.eps,
                &mut self.normed[i * d..(i + 1) * d],
            )?;
        }
        self.acts_head.load(par, &self.normed[..n_out * d])?;
        let head = model.matrix(&model.output)?; // (vocab_size, dim)
        let acts = self.acts_head.for_type(head.ty)?;
        let pass_rows = self.head_pass_rows.max(1);
        if n_out <= 1 || pass_rows >= vocab {
            return matmul(
                par,
                &head,
                acts,
                &mut self.logits[..n_out * vocab],
                self.matmul_scratch,
            );
        }
        // Each pass's (n_out, n) block goes to the front of the matmul
        // scratch, the matmul's own scratch after it.
        let row_bytes = head.row_bytes();
        let mut o0 = 0;
        while o0 < vocab {
            let n = pass_rows.min(vocab - o0);
            let bytes = head.data.get(o0 * row_bytes..(o0 + n) * row_bytes);
            let bytes = bytes.ok_or(Error::BufferTooSmall {
                needed: (o0 + n) * row_bytes,
                available: head.data.len(),
            })?;
            let pass = QMatrix::new(head.ty, head.n_in, n, bytes)?;
            let available = self.matmul_scratch.len();
            let (block, scratch) = self.matmul_scratch.split_at_mut_checked(n_out * n).ok_or(
                Error::BufferTooSmall {
                    needed: n_out * n,
                    available,
                },
            )?;
            matmul(par, &pass, acts, block, scratch)?;
            for (b, l) in block
                .chunks_exact(n)
                .zip(self.logits.chunks_exact_mut(vocab))
            {
                l[o0..o0 + n].copy_from_slice(b);
            }
            o0 += n;
        }
        Ok(())
    }
}

/// Whether one input row's matmuls with `acts` go in one parallel region
/// ([`matmul::fused_matvecs`]): one row, a pool of at most
/// [`matmul::MAX_FUSED_THREADS`] threads, and the other matrices reading the
/// same quantized input (the same activation kind).
fn fits_one_region<P: Parallel, const N: usize>(
    par: &P,
    n_rows: usize,
    acts: &QActs<'_>,
    others: [&QMatrix<'_>; N],
) -> bool {
    n_rows == 1
        && par.threads() <= matmul::MAX_FUSED_THREADS
        && others
            .iter()
            .all(|w| ActKind::for_weight(w.ty) == acts.kind())
}

/// Length of an optional output share (0 for none).
fn share_len(share: &Option<&mut [F32]>) -> usize {
    share.as_ref().map_or(0, |s| s.len())
}

/// One KV head of a cached sequence: columns `first_col..first_col + n_cols`
/// of the rows from position `first_pos` on (row `i` of the view is position
/// `first_pos + i`).
struct KvHead<'v, V: KvRead> {
    rows: &'v V,
    /// Position of the view's row 0 (the sliding window's start).
    first_pos: usize,
    first_col: usize,
    n_cols: usize,
}

impl<V: KvRead> KvRead for KvHead<'_, V> {
    fn k(&self, pos: usize) -> KvSlice<'_> {
        head_cols(
            self.rows.k(self.first_pos + pos),
            self.first_col,
            self.n_cols,
        )
    }
    fn v(&self, pos: usize) -> KvSlice<'_> {
        head_cols(
            self.rows.v(self.first_pos + pos),
            self.first_col,
            self.n_cols,
        )
    }
}

/// Columns `first..first + n` of a row; an empty row (rejected by the
/// kernel's shape check) if it is too short.
fn head_cols(row: KvSlice<'_>, first: usize, n: usize) -> KvSlice<'_> {
    let end = first.saturating_add(n);
    match row {
        KvSlice::F16(r) => KvSlice::F16(r.get(first..end).unwrap_or(&[])),
        KvSlice::F32(r) => KvSlice::F32(r.get(first..end).unwrap_or(&[])),
    }
}

/// `x[r] += b` for every row `r` of `x` (by [`kernels::add_assign`], the
/// same `+` in vector lanes).
fn add_bias(x: &mut [F32], b: &[F32]) {
    for row in x.chunks_exact_mut(b.len().max(1)) {
        kernels::add_assign(row, b);
    }
}

/// Rows of `d` split evenly over the workers: the chunk length for
/// [`Parallel::for_each_chunk`] over `rows · d` elements.
fn rows_chunk<P: Parallel>(par: &P, rows: usize, d: usize) -> usize {
    rows.div_ceil(par.threads().max(1)).max(1) * d.max(1)
}

/// `x += y` over rows of `d` (the residual connection), the rows split over
/// the workers.
fn add_rows<P: Parallel>(par: &P, x: &mut [F32], y: &[F32], d: usize) {
    let chunk_len = rows_chunk(par, x.len() / d.max(1), d);
    par.for_each_chunk(x, chunk_len, &|i, xc| {
        kernels::add_assign(xc, y.get(i * chunk_len..).unwrap_or(&[]));
    });
}

/// `out_r = rmsnorm(x_r) · w` for each row of `d`, the rows split over the
/// workers (each row is the same fixed-order arithmetic wherever it runs).
/// Errors: [`Error::ShapeMismatch`] if `w` is not `d` long or `x` and `out`
/// differ in length.
fn rmsnorm_rows<P: Parallel>(
    par: &P,
    x: &[F32],
    w: &[F32],
    eps: F32,
    out: &mut [F32],
    d: usize,
) -> Result<()> {
    check_len(d, w.len())?;
    check_len(x.len(), out.len())?;
    let chunk_len = rows_chunk(par, x.len() / d.max(1), d);
    par.try_for_each_chunk(out, chunk_len, &|i, out| {
        let x = x
            .get(i * chunk_len..i * chunk_len + out.len())
            .unwrap_or(&[]);
        kernels::rmsnorm::rmsnorm_rows(x, w, eps, out)
    })
}
