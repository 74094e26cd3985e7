//! Weights bound zero-copy to the tensors of a GGUF file.
//!
//! The large matrices stay in the model bytes (`&'a [u8]`: an mmap on a
//! host, flash on a microcontroller); only the small norm and bias vectors
//! are decoded into the arena (little-endian `f32` → [`F32`]).

#![forbid(unsafe_code)]

use super::config::{Arch, Config};
use crate::error::Name as ErrName;
use crate::gguf::{File, TensorInfo};
use crate::kernels::RopeStyle;
use crate::quant::{GgmlType, QMatrix};
use crate::{Arena, Error, F32, Result};
use bytemuck::{Pod, Zeroable};
use core::fmt::Write;

/// Where a matrix lives in the model bytes: `(n_out, n_in)` of type `ty`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct TensorRef {
    /// Byte offset of the data in the model bytes.
    pub offset: u64,
    /// GGML type id.
    pub ty: u32,
    /// Row length.
    pub n_in: u32,
    /// Rows.
    pub n_out: u32,
    _pad: u32,
}

/// The matrices of one transformer block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct LayerRefs {
    /// `(q_dim, dim)`
    pub wq: TensorRef,
    /// `(kv_dim, dim)`
    pub wk: TensorRef,
    /// `(kv_dim, dim)`
    pub wv: TensorRef,
    /// `(dim, q_dim)`
    pub wo: TensorRef,
    /// `(hidden_dim, dim)`
    pub w_gate: TensorRef,
    /// `(hidden_dim, dim)`
    pub w_up: TensorRef,
    /// `(dim, hidden_dim)`
    pub w_down: TensorRef,
}

/// A model: configuration plus weights, borrowed from the file bytes.
pub struct Model<'a> {
    /// Hyper-parameters.
    pub cfg: Config,
    /// RoPE pairing.
    pub rope_style: RopeStyle,
    bytes: &'a [u8],
    /// `(vocab_size, dim)` embedding.
    pub token_embd: TensorRef,
    /// `(vocab_size, dim)` output head (the embedding when tied).
    pub output: TensorRef,
    layers: &'a [LayerRefs], // (n_layers)
    norms: &'a [F32],        // (n_layers, 2, dim): attn_norm, ffn_norm
    output_norm: &'a [F32],  // (dim)
    biases: &'a [F32],       // (n_layers, q_dim + 2 kv_dim) or empty
    qk_norms: &'a [F32],     // (n_layers, 2, head_dim): attn_q_norm, attn_k_norm, or empty
    post_norms: &'a [F32],   // (n_layers, 2, dim): post_attention_norm, post_ffw_norm, or empty
    rope_freqs: &'a [F32],   // (n_rot / 2) RoPE frequency factors, or empty
}

/// A tensor name such as `blk.12.attn_q.weight`, formatted on the stack.
struct NameBuf {
    buf: [u8; 64],
    len: usize,
}

impl Write for NameBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The name `blk.{layer}.{name}` (or `name`) as an error payload.
fn tensor_name(layer: Option<usize>, name: &str) -> ErrName {
    let mut n = NameBuf {
        buf: [0; 64],
        len: 0,
    };
    let _ = match layer {
        Some(l) => write!(n, "blk.{l}.{name}"),
        None => n.write_str(name),
    };
    ErrName::new(core::str::from_utf8(&n.buf[..n.len]).unwrap_or(name))
}

fn missing(layer: Option<usize>, name: &str) -> Error {
    Error::MissingTensor {
        name: tensor_name(layer, name),
    }
}

fn tensor<'a>(file: &File<'a>, layer: Option<usize>, name: &str) -> Option<TensorInfo<'a>> {
    let mut n = NameBuf {
        buf: [0; 64],
        len: 0,
    };
    match layer {
        Some(l) => write!(n, "blk.{l}.{name}").ok()?,
        None => n.write_str(name).ok()?,
    }
    let s = core::str::from_utf8(&n.buf[..n.len]).ok()?;
    file.tensor(s)
}

fn key(arch: &str, suffix: &str) -> NameBuf {
    let mut n = NameBuf {
        buf: [0; 64],
        len: 0,
    };
    // Arch names are short; an overlong one makes the lookup miss.
    let _ = write!(n, "{arch}.{suffix}");
    n
}

impl NameBuf {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

fn missing_key(arch: &str, suffix: &str) -> Error {
    Error::MissingMetadata {
        key: ErrName::new(key(arch, suffix).as_str()),
    }
}

fn get_usize(file: &File<'_>, arch: &str, suffix: &str) -> Result<Option<usize>> {
    let k = key(arch, suffix);
    Ok(file.get_u64(k.as_str())?.map(|v| v as usize))
}

fn need(file: &File<'_>, arch: &str, suffix: &str) -> Result<usize> {
    get_usize(file, arch, suffix)?.ok_or_else(|| missing_key(arch, suffix))
}

impl Config {
    /// Reads the hyper-parameters of a `llama`, `qwen2`, `qwen3` or `gemma3`
    /// GGUF file.
    ///
    /// Errors: [`Error::MissingMetadata`] (a required key, named),
    /// [`Error::UnsupportedArchitecture`], [`Error::MissingTensor`] (no
    /// `token_embd.weight` to take the vocabulary size from),
    /// [`Error::InvalidHeads`] (`embedding_length` not a multiple of the head
    /// count), [`Error::Gguf`] (a key of the wrong type), and those of
    /// [`Config::validate`].
    pub fn from_gguf(file: &File<'_>) -> Result<Config> {
        let arch_name = file
            .get_str("general.architecture")?
            .ok_or(Error::MissingMetadata {
                key: ErrName::new("general.architecture"),
            })?;
        let arch = Arch::from_name(arch_name).ok_or(Error::UnsupportedArchitecture {
            name: ErrName::new(arch_name),
        })?;
        let a = arch_name;
        let dim = need(file, a, "embedding_length")?;
        let hidden_dim = need(file, a, "feed_forward_length")?;
        let n_layers = need(file, a, "block_count")?;
        let n_heads = need(file, a, "attention.head_count")?;
        let n_kv_heads = get_usize(file, a, "attention.head_count_kv")?.unwrap_or(n_heads);
        // head_dim: `attention.key_length` when given (Gemma 3, Qwen3: it
        // need not be dim / n_heads), else dim / n_heads.
        let head_dim = match get_usize(file, a, "attention.key_length")? {
            Some(k) => k,
            None => {
                if n_heads == 0 || !dim.is_multiple_of(n_heads) {
                    return Err(Error::InvalidHeads {
                        n_head: n_heads,
                        n_kv_head: n_kv_heads,
                        head_dim: dim.checked_div(n_heads).unwrap_or(0),
                    });
                }
                dim / n_heads
            }
        };
        if let Some(v) = get_usize(file, a, "attention.value_length")?
            && v != head_dim
        {
            return Err(Error::InvalidModelConfig {
                key: "attention.value_length",
                value: v,
            });
        }
        // Linear/YaRN RoPE scaling is not implemented: refuse rather than
        // compute something else.
        if let Some(f) = file.get_f32(key(a, "rope.scaling.factor").as_str())?
            && f.to_bits() != F32::ONE.to_bits()
            && f.to_bits() != 0
        {
            return Err(Error::InvalidModelConfig {
                key: "rope.scaling.factor",
                value: f.to_bits() as usize,
            });
        }
        let n_rot = get_usize(file, a, "rope.dimension_count")?.unwrap_or(head_dim);
        let context_len = need(file, a, "context_length")?;
        let rope_base = file
            .get_f32(key(a, "rope.freq_base").as_str())?
            .unwrap_or(F32::from_bits(0x461C_4000)); // 10000.0
        // Gemma 3 as llama.cpp loads it: a window from
        // `attention.sliding_window` (absent or 0: none), layer l global iff
        // l % p == p - 1 with p = `attention.sliding_window_pattern` or 6,
        // the local layers' RoPE base `rope.freq_base_swa` or 10000.
        let (sliding_window, swa_pattern) = match arch {
            Arch::Gemma3 => match get_usize(file, a, "attention.sliding_window")? {
                Some(w) if w > 0 => (
                    w,
                    get_usize(file, a, "attention.sliding_window_pattern")?.unwrap_or(6),
                ),
                _ => (0, 0),
            },
            _ => (0, 0),
        };
        let rope_base_swa = file
            .get_f32(key(a, "rope.freq_base_swa").as_str())?
            .unwrap_or(F32::from_bits(0x461C_4000)); // 10000.0
        let final_softcap = match arch {
            Arch::Gemma3 => file.get_f32(key(a, "final_logit_softcapping").as_str())?,
            _ => None,
        }
        .unwrap_or(F32::ZERO);
        let eps = file
            .get_f32(key(a, "attention.layer_norm_rms_epsilon").as_str())?
            .ok_or_else(|| missing_key(a, "attention.layer_norm_rms_epsilon"))?;
        let embd = file
            .tensor("token_embd.weight")
            .ok_or_else(|| missing(None, "token_embd.weight"))?;
        let vocab_size = embd.ne[1] as usize;
        let cfg = Config {
            arch,
            dim,
            hidden_dim,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            n_rot,
            vocab_size,
            context_len,
            rope_base,
            eps,
            sliding_window,
            swa_pattern,
            rope_base_swa,
            final_softcap,
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

impl<'a> Model<'a> {
    /// Arena bytes [`Model::from_gguf`] takes for `cfg`.
    pub fn bytes_required(cfg: &Config) -> Option<usize> {
        let (biases, qk, post) = Self::extra_lens(cfg)?;
        Arena::bytes_for::<LayerRefs>(cfg.n_layers)?
            .checked_add(Arena::bytes_for::<F32>(
                cfg.n_layers.checked_mul(2 * cfg.dim)?,
            )?)?
            .checked_add(Arena::bytes_for::<F32>(cfg.dim)?)?
            .checked_add(Arena::bytes_for::<F32>(biases)?)?
            .checked_add(Arena::bytes_for::<F32>(qk)?)?
            .checked_add(Arena::bytes_for::<F32>(post)?)?
            .checked_add(Arena::bytes_for::<F32>(cfg.n_rot / 2)?)
    }

    /// Elements of the per-architecture vectors: `(biases, qk_norms,
    /// post_norms)`.
    fn extra_lens(cfg: &Config) -> Option<(usize, usize, usize)> {
        let a = cfg.arch;
        let biases = if a.has_qkv_bias() {
            cfg.n_layers.checked_mul(cfg.q_dim() + 2 * cfg.kv_dim())?
        } else {
            0
        };
        let qk = if a.has_qk_norm() {
            cfg.n_layers.checked_mul(2 * cfg.head_dim)?
        } else {
            0
        };
        let post = if a.has_post_norms() {
            cfg.n_layers.checked_mul(2 * cfg.dim)?
        } else {
            0
        };
        Some((biases, qk, post))
    }

    /// Binds every tensor of `file` (whose bytes are `bytes`), checking each
    /// one's type and shape; the arena is untouched on error.
    ///
    /// Errors: those of [`Config::from_gguf`]; [`Error::SizeOverflow`] (a
    /// plan that does not fit `usize`), [`Error::ArenaExhausted`] (fewer
    /// than [`Model::bytes_required`] bytes left); [`Error::MissingTensor`]
    /// (named), [`Error::ShapeMismatch`] (a tensor of the wrong shape, or a
    /// norm or bias that is not F32).
    pub fn from_gguf(file: &File<'a>, bytes: &'a [u8], arena: &mut Arena<'a>) -> Result<Self> {
        let cfg = Config::from_gguf(file)?;
        let need = Self::bytes_required(&cfg).ok_or(Error::SizeOverflow)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        let (d, q, kv, h) = (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.hidden_dim);
        let mat = |layer, name, n_out: usize, n_in: usize| -> Result<TensorRef> {
            let t = tensor(file, layer, name).ok_or_else(|| missing(layer, name))?;
            matrix_ref(file, bytes, &t, n_out, n_in)
        };
        let token_embd = mat(None, "token_embd.weight", cfg.vocab_size, d)?;
        let output = match tensor(file, None, "output.weight") {
            Some(t) => matrix_ref(file, bytes, &t, cfg.vocab_size, d)?,
            None => token_embd,
        };
        // Validate every layer before carving anything.
        for l in 0..cfg.n_layers {
            layer_refs(&mat, l, d, q, kv, h)?;
            for name in ["attn_norm.weight", "ffn_norm.weight"] {
                vector(file, Some(l), name, d)?;
            }
            if cfg.arch.has_qkv_bias() {
                vector(file, Some(l), "attn_q.bias", q)?;
                vector(file, Some(l), "attn_k.bias", kv)?;
                vector(file, Some(l), "attn_v.bias", kv)?;
            }
            if cfg.arch.has_qk_norm() {
                vector(file, Some(l), "attn_q_norm.weight", cfg.head_dim)?;
                vector(file, Some(l), "attn_k_norm.weight", cfg.head_dim)?;
            }
            if cfg.arch.has_post_norms() {
                vector(file, Some(l), "post_attention_norm.weight", d)?;
                vector(file, Some(l), "post_ffw_norm.weight", d)?;
            }
        }
        let out_norm_t = vector(file, None, "output_norm.weight", d)?;
        // Llama 3.x frequency factors, optional (n_rot / 2 of them).
        let rope_freqs_t = match tensor(file, None, "rope_freqs.weight") {
            Some(_) => Some(vector(file, None, "rope_freqs.weight", cfg.n_rot / 2)?),
            None => None,
        };
        let (n_bias, n_qk, n_post) = Self::extra_lens(&cfg).ok_or(Error::SizeOverflow)?;

        let layers = arena.alloc::<LayerRefs>(cfg.n_layers)?;
        let norms = arena.alloc::<F32>(cfg.n_layers * 2 * d)?;
        let output_norm = arena.alloc::<F32>(d)?;
        let biases = arena.alloc::<F32>(n_bias)?;
        let qk_norms = arena.alloc::<F32>(n_qk)?;
        let post_norms = arena.alloc::<F32>(n_post)?;
        let rope_freqs = arena.alloc::<F32>(if rope_freqs_t.is_some() {
            cfg.n_rot / 2
        } else {
            0
        })?;
        let hdim = cfg.head_dim;
        for l in 0..cfg.n_layers {
            layers[l] = layer_refs(&mat, l, d, q, kv, h)?;
            let nl = &mut norms[l * 2 * d..(l + 1) * 2 * d];
            decode_f32(&vector(file, Some(l), "attn_norm.weight", d)?, &mut nl[..d]);
            decode_f32(&vector(file, Some(l), "ffn_norm.weight", d)?, &mut nl[d..]);
            if n_qk > 0 {
                let nq = &mut qk_norms[l * 2 * hdim..(l + 1) * 2 * hdim];
                decode_f32(
                    &vector(file, Some(l), "attn_q_norm.weight", hdim)?,
                    &mut nq[..hdim],
                );
                decode_f32(
                    &vector(file, Some(l), "attn_k_norm.weight", hdim)?,
                    &mut nq[hdim..],
                );
            }
            if n_post > 0 {
                let np = &mut post_norms[l * 2 * d..(l + 1) * 2 * d];
                decode_f32(
                    &vector(file, Some(l), "post_attention_norm.weight", d)?,
                    &mut np[..d],
                );
                decode_f32(
                    &vector(file, Some(l), "post_ffw_norm.weight", d)?,
                    &mut np[d..],
                );
            }
            if n_bias > 0 {
                let b = &mut biases[l * (q + 2 * kv)..(l + 1) * (q + 2 * kv)];
                decode_f32(&vector(file, Some(l), "attn_q.bias", q)?, &mut b[..q]);
                decode_f32(
                    &vector(file, Some(l), "attn_k.bias", kv)?,
                    &mut b[q..q + kv],
                );
                decode_f32(&vector(file, Some(l), "attn_v.bias", kv)?, &mut b[q + kv..]);
            }
        }
        decode_f32(&out_norm_t, output_norm);
        if let Some(t) = rope_freqs_t {
            decode_f32(&t, rope_freqs);
        }
        let rope_style = match cfg.arch {
            Arch::Llama => RopeStyle::Norm,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => RopeStyle::Neox,
        };
        Ok(Model {
            cfg,
            rope_style,
            bytes,
            token_embd,
            output,
            layers,
            norms,
            output_norm,
            biases,
            qk_norms,
            post_norms,
            rope_freqs,
        })
    }

    /// The matrix a [`TensorRef`] points at.
    ///
    /// Errors: [`Error::UnsupportedType`] (a type id this crate cannot
    /// compute with), [`Error::SizeOverflow`] (bytes outside the model
    /// bytes), and those of [`QMatrix::new`].
    pub fn matrix(&self, r: &TensorRef) -> Result<QMatrix<'a>> {
        let ty = GgmlType::from_u32(r.ty).ok_or(Error::UnsupportedType { ggml_type: r.ty })?;
        let len = ty
            .row_bytes(r.n_in as usize)?
            .checked_mul(r.n_out as usize)
            .ok_or(Error::SizeOverflow)?;
        let start = usize::try_from(r.offset).map_err(|_| Error::SizeOverflow)?;
        let end = start.checked_add(len).ok_or(Error::SizeOverflow)?;
        let data = self.bytes.get(start..end).ok_or(Error::SizeOverflow)?;
        QMatrix::new(ty, r.n_in as usize, r.n_out as usize, data)
    }

    /// Matrices of layer `l`.
    ///
    /// Errors: [`Error::LayerOutOfRange`] past the last layer.
    pub fn layer(&self, l: usize) -> Result<&LayerRefs> {
        self.layers.get(l).ok_or(Error::LayerOutOfRange {
            layer: l,
            n_layers: self.cfg.n_layers,
        })
    }

    /// Everything layer `l` computes with, bound and checked once: its
    /// seven matrices, its two norms and (qwen2) its q/k/v biases.
    ///
    /// Errors: [`Error::LayerOutOfRange`] past the last layer; from
    /// [`Model::matrix`] for a matrix whose bytes or type do not check.
    pub fn layer_weights(&self, l: usize) -> Result<LayerWeights<'_>> {
        let refs = self.layer(l)?;
        let (attn_norm, ffn_norm) = self.norms(l);
        Ok(LayerWeights {
            attn_norm,
            wq: self.matrix(&refs.wq)?,
            wk: self.matrix(&refs.wk)?,
            wv: self.matrix(&refs.wv)?,
            qkv_bias: self.biases(l),
            qk_norm: self.qk_norms(l),
            post_norms: self.post_norms(l),
            wo: self.matrix(&refs.wo)?,
            ffn_norm,
            w_gate: self.matrix(&refs.w_gate)?,
            w_up: self.matrix(&refs.w_up)?,
            w_down: self.matrix(&refs.w_down)?,
        })
    }

    /// `(attn_norm, ffn_norm)` weights of layer `l`, `dim` each (empty past
    /// the last layer).
    pub fn norms(&self, l: usize) -> (&[F32], &[F32]) {
        let d = self.cfg.dim;
        let nl = self.norms.get(l * 2 * d..(l + 1) * 2 * d).unwrap_or(&[]);
        nl.split_at(nl.len() / 2)
    }

    /// `(q_norm, k_norm)` of layer `l`, `head_dim` each (qwen3, gemma3), or
    /// `None`.
    pub fn qk_norms(&self, l: usize) -> Option<(&[F32], &[F32])> {
        let h = self.cfg.head_dim;
        let n = self.qk_norms.get(l * 2 * h..(l + 1) * 2 * h)?;
        (!n.is_empty()).then(|| n.split_at(h))
    }

    /// `(post_attention_norm, post_ffw_norm)` of layer `l`, `dim` each
    /// (gemma3), or `None`.
    pub fn post_norms(&self, l: usize) -> Option<(&[F32], &[F32])> {
        let d = self.cfg.dim;
        let n = self.post_norms.get(l * 2 * d..(l + 1) * 2 * d)?;
        (!n.is_empty()).then(|| n.split_at(d))
    }

    /// RoPE frequency factors (`rope_freqs.weight`, `n_rot / 2`: pair `i`'s
    /// angle is divided by factor `i`), or empty.
    pub fn rope_freqs(&self) -> &[F32] {
        self.rope_freqs
    }

    /// The final norm's weights.
    pub fn output_norm(&self) -> &[F32] {
        self.output_norm
    }

    /// `(bq, bk, bv)` of layer `l` (qwen2), or `None` (llama, or past the
    /// last layer).
    pub fn biases(&self, l: usize) -> Option<(&[F32], &[F32], &[F32])> {
        let (q, kv) = (self.cfg.q_dim(), self.cfg.kv_dim());
        let per_layer = q + 2 * kv;
        let b = self.biases.get(l * per_layer..(l + 1) * per_layer)?;
        if b.is_empty() {
            return None;
        }
        let (bq, rest) = b.split_at(q);
        let (bk, bv) = rest.split_at(kv);
        Some((bq, bk, bv))
    }
}

/// One transformer block's weights as the step uses them (from
/// [`Model::layer_weights`]): the matrices bound to their bytes, the norm
/// and bias vectors borrowed from the arena.
#[derive(Clone, Copy, Debug)]
pub struct LayerWeights<'m> {
    /// `(dim)` RMSNorm weight before attention.
    pub attn_norm: &'m [F32],
    /// `(q_dim, dim)`
    pub wq: QMatrix<'m>,
    /// `(kv_dim, dim)`
    pub wk: QMatrix<'m>,
    /// `(kv_dim, dim)`
    pub wv: QMatrix<'m>,
    /// `(q_dim)`, `(kv_dim)`, `(kv_dim)` biases added to Q, K, V (qwen2), or `None`.
    pub qkv_bias: Option<(&'m [F32], &'m [F32], &'m [F32])>,
    /// `(head_dim)` RMSNorm weights of every Q head and every K head, before
    /// RoPE (qwen3, gemma3), or `None`.
    pub qk_norm: Option<(&'m [F32], &'m [F32])>,
    /// `(dim)` RMSNorm weights applied to the attention block's and the
    /// feed-forward block's outputs before the residual add (gemma3), or
    /// `None`.
    pub post_norms: Option<(&'m [F32], &'m [F32])>,
    /// `(dim, q_dim)`
    pub wo: QMatrix<'m>,
    /// `(dim)` RMSNorm weight before the feed-forward block.
    pub ffn_norm: &'m [F32],
    /// `(hidden_dim, dim)`
    pub w_gate: QMatrix<'m>,
    /// `(hidden_dim, dim)`
    pub w_up: QMatrix<'m>,
    /// `(dim, hidden_dim)`
    pub w_down: QMatrix<'m>,
}

fn layer_refs(
    mat: &dyn Fn(Option<usize>, &'static str, usize, usize) -> Result<TensorRef>,
    l: usize,
    d: usize,
    q: usize,
    kv: usize,
    h: usize,
) -> Result<LayerRefs> {
    Ok(LayerRefs {
        wq: mat(Some(l), "attn_q.weight", q, d)?,
        wk: mat(Some(l), "attn_k.weight", kv, d)?,
        wv: mat(Some(l), "attn_v.weight", kv, d)?,
        wo: mat(Some(l), "attn_output.weight", d, q)?,
        w_gate: mat(Some(l), "ffn_gate.weight", h, d)?,
        w_up: mat(Some(l), "ffn_up.weight", h, d)?,
        w_down: mat(Some(l), "ffn_down.weight", d, h)?,
    })
}

fn matrix_ref(
    file: &File<'_>,
    bytes: &[u8],
    t: &TensorInfo<'_>,
    n_out: usize,
    n_in: usize,
) -> Result<TensorRef> {
    if t.ne[0] != n_in as u64 || t.ne[1] != n_out as u64 || t.ne[2] != 1 || t.ne[3] != 1 {
        return Err(Error::ShapeMismatch {
            expected: n_in,
            found: t.ne[0] as usize,
        });
    }
    let offset = file
        .data_offset()
        .checked_add(t.offset)
        .ok_or(Error::SizeOverflow)?;
    // The reader guarantees the bytes are inside the file; check anyway
    // that `bytes` is the file the infos came from.
    let end = offset
        .checked_add(t.data.len() as u64)
        .ok_or(Error::SizeOverflow)?;
    if end > bytes.len() as u64 {
        return Err(Error::MissingTensor {
            name: ErrName::new(core::str::from_utf8(t.name).unwrap_or("?")),
        });
    }
    let r = TensorRef {
        offset,
        ty: t.ty as u32,
        n_in: u32::try_from(n_in).map_err(|_| Error::SizeOverflow)?,
        n_out: u32::try_from(n_out).map_err(|_| Error::SizeOverflow)?,
        _pad: 0,
    };
    Ok(r)
}

fn vector<'a>(
    file: &File<'a>,
    layer: Option<usize>,
    name: &str,
    n: usize,
) -> Result<TensorInfo<'a>> {
    let t = tensor(file, layer, name).ok_or_else(|| missing(layer, name))?;
    if t.ty != GgmlType::F32 || t.ne[0] != n as u64 || t.ne[1] != 1 {
        return Err(Error::ShapeMismatch {
            expected: n,
            found: t.ne[0] as usize,
        });
    }
    Ok(t)
}

fn decode_f32(t: &TensorInfo<'_>, out: &mut [F32]) {
    for (o, c) in out.iter_mut().zip(t.data.chunks_exact(4)) {
        *o = F32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
}
