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
    /// Qwen3: as Qwen2 without biases, plus an RMSNorm of every Q and K head
    /// before RoPE.
    Qwen3,
    /// Gemma 3: embedding scaled by `√dim`, Q/K head norms, norms after the
    /// attention and feed-forward blocks, GELU-tanh gating (GEGLU), NEOX
    /// RoPE, sliding-window attention on all but every
    /// [`Config::swa_pattern`]-th layer, with their own RoPE base.
    Gemma3,
}

/// The gating activation of the feed-forward block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `silu(gate) · up` (LLaMA, Qwen).
    Silu,
    /// `gelu_tanh(gate) · up` (Gemma).
    Gelu,
}

impl Arch {
    /// The `general.architecture` name of the family.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// The family named `name`, if this crate runs it.
    pub fn from_name(name: &str) -> Option<Arch> {
        match name {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "qwen3" => Some(Arch::Qwen3),
            "gemma3" => Some(Arch::Gemma3),
            _ => None,
        }
    }

    /// Q, K and V carry biases (`attn_{q,k,v}.bias`).
    pub const fn has_qkv_bias(self) -> bool {
        matches!(self, Arch::Qwen2)
    }

    /// Each Q and K head is RMS-normalized before RoPE
    /// (`attn_q_norm.weight`, `attn_k_norm.weight`, `head_dim` each).
    pub const fn has_qk_norm(self) -> bool {
        matches!(self, Arch::Qwen3 | Arch::Gemma3)
    }

    /// The outputs of the attention and feed-forward blocks are
    /// RMS-normalized before the residual add (`post_attention_norm.weight`,
    /// `post_ffw_norm.weight`).
    pub const fn has_post_norms(self) -> bool {
        matches!(self, Arch::Gemma3)
    }

    /// The feed-forward gating activation.
    pub const fn activation(self) -> Activation {
        match self {
            Arch::Gemma3 => Activation::Gelu,
            _ => Activation::Silu,
        }
    }

    /// The token embedding is multiplied by `√dim` (rounded to binary32)
    /// before the first block.
    pub const fn scales_embedding(self) -> bool {
        matches!(self, Arch::Gemma3)
    }
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
    /// Sliding-window length of the local layers (a row at position `p`
    /// attends to positions `p - sliding_window + 1 ..= p`); 0: every layer
    /// attends to the whole sequence.
    pub sliding_window: usize,
    /// Local/global layer pattern: with a window, layer `l` is global when
    /// `l % swa_pattern == swa_pattern - 1`, local otherwise (Gemma 3: 6);
    /// 0: every layer local (as llama.cpp reads a pattern of 0).
    pub swa_pattern: usize,
    /// RoPE frequency base of the sliding-window layers.
    pub rope_base_swa: F32,
    /// Final logit soft-capping `c` (`logits = c · tanh(logits / c)`); 0:
    /// none.
    pub final_softcap: F32,
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

    /// Whether layer `l` attends through the sliding window.
    pub const fn is_swa_layer(&self, l: usize) -> bool {
        self.sliding_window > 0
            && (self.swa_pattern == 0 || l % self.swa_pattern < self.swa_pattern - 1)
    }

    /// The width whose `1/sqrt` scales the attention scores: `head_dim`,
    /// except for the 62-layer Gemma 3 (27B), where llama.cpp takes
    /// `dim / n_heads`.
    pub const fn attn_scale_dim(&self) -> usize {
        match self.arch {
            Arch::Gemma3 if self.n_layers == 62 && self.n_heads > 0 => self.dim / self.n_heads,
            _ => self.head_dim,
        }
    }

    /// Whether any layer uses the sliding window (and so its own RoPE base).
    pub const fn has_swa(&self) -> bool {
        self.sliding_window > 0 && self.swa_pattern != 1
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
        if self.has_swa() && (!self.rope_base_swa.is_finite() || !self.rope_base_swa.gt(F32::ZERO))
        {
            return bad("rope.freq_base_swa", self.rope_base_swa.to_bits() as usize);
        }
        if !self.final_softcap.is_finite() || self.final_softcap.is_sign_negative() {
            return bad(
                "final_logit_softcapping",
                self.final_softcap.to_bits() as usize,
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's `set_swa_pattern(n)`: layer `l` is local iff `n == 0` or
    /// `l % n < n - 1`; no window, no local layer.
    #[test]
    fn swa_layers_follow_the_pattern() {
        let cfg = |sliding_window, swa_pattern| Config {
            arch: Arch::Gemma3,
            dim: 64,
            hidden_dim: 64,
            n_layers: 18,
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 32,
            n_rot: 32,
            vocab_size: 10,
            context_len: 64,
            rope_base: F32::from_u32(10000),
            eps: F32::ZERO,
            sliding_window,
            swa_pattern,
            rope_base_swa: F32::from_u32(10000),
            final_softcap: F32::ZERO,
        };
        let global = (0..18).filter(|&l| !cfg(512, 6).is_swa_layer(l));
        assert!(global.eq([5, 11, 17]));
        assert!((0..18).all(|l| cfg(512, 0).is_swa_layer(l)));
        assert!((0..18).all(|l| !cfg(512, 1).is_swa_layer(l)));
        assert!((0..18).all(|l| !cfg(0, 6).is_swa_layer(l)));
        assert!(cfg(512, 6).has_swa() && cfg(512, 0).has_swa());
        assert!(!cfg(512, 1).has_swa() && !cfg(0, 6).has_swa());
    }
}
