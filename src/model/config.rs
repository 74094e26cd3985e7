//! Model hyper-parameters.

#![forbid(unsafe_code)]

use crate::{Error, F32, Result};

/// Architecture family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// LLaMA: RMSNorm, RoPE on adjacent pairs (NORM), GQA, SwiGLU.
    Llama,
    /// Qwen2: as LLaMA plus q/k/v biases, RoPE on split halves (NEOX).
    Qwen2,
}

/// Hyper-parameters of a model; one set of names used everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Architecture family.
    pub arch: Arch,
    /// Width of the residual stream (`n_embd`).
    pub dim: usize,
    /// Width of the feed-forward layer (`n_ff`).
    pub hidden_dim: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (GQA: `n_heads` is a multiple of it).
    pub n_kv_heads: usize,
    /// Dimensions per head.
    pub head_dim: usize,
    /// Dimensions RoPE rotates per head (≤ `head_dim`, even).
    pub n_rot: usize,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Longest sequence the model was trained for.
    pub context_len: usize,
    /// RoPE frequency base.
    pub rope_base: F32,
    /// RMSNorm epsilon.
    pub eps: F32,
}

impl Config {
    /// Query width, `n_heads * head_dim`.
    pub const fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Key/value width, `n_kv_heads * head_dim`.
    pub const fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Checks the shape relations every kernel relies on.
    ///
    /// Errors: [`Error::InvalidHeads`] (no heads, `n_heads` not a multiple
    /// of `n_kv_heads`, `head_dim` zero), [`Error::InvalidRope`] (`n_rot`
    /// odd or above `head_dim`), [`Error::InvalidModelConfig`] for any other
    /// hyper-parameter out of range, named by its GGUF key (a float's value
    /// is its bits).
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &'static str, value: usize| Err(Error::InvalidModelConfig { key, value });
        if self.dim == 0 || self.dim > (1 << 20) {
            return bad("embedding_length", self.dim);
        }
        if self.hidden_dim == 0 || self.hidden_dim > (1 << 22) {
            return bad("feed_forward_length", self.hidden_dim);
        }
        if self.n_layers == 0 || self.n_layers > 1024 {
            return bad("block_count", self.n_layers);
        }
        if self.n_heads == 0
            || self.n_kv_heads == 0
            || !self.n_heads.is_multiple_of(self.n_kv_heads)
            || self.head_dim == 0
        {
            return Err(Error::InvalidHeads {
                n_head: self.n_heads,
                n_kv_head: self.n_kv_heads,
                head_dim: self.head_dim,
            });
        }
        // q_dim() ≤ 2^20 (and kv_dim() ≤ q_dim()).
        if self
            .n_heads
            .checked_mul(self.head_dim)
            .is_none_or(|q| q > (1 << 20))
        {
            return bad("attention.head_count", self.n_heads);
        }
        if self.n_rot > self.head_dim || !self.n_rot.is_multiple_of(2) {
            return Err(Error::InvalidRope {
                n_rot: self.n_rot,
                head_dim: self.head_dim,
            });
        }
        if self.vocab_size == 0 || self.vocab_size > u32::MAX as usize {
            return bad("vocab_size", self.vocab_size);
        }
        if self.context_len == 0 {
            return bad("context_length", self.context_len);
        }
        if !self.rope_base.is_finite() || !self.rope_base.gt(F32::ZERO) {
            return bad("rope.freq_base", self.rope_base.to_bits() as usize);
        }
        if !self.eps.is_finite() || self.eps.is_sign_negative() {
            return bad(
                "attention.layer_norm_rms_epsilon",
                self.eps.to_bits() as usize,
            );
        }
        Ok(())
    }
}
