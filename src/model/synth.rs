//! Deterministic synthetic models, written as real GGUF bytes.
//!
//! For tests, fuzzing, benchmarks and the bare-metal examples: seeded random
//! weights for any small configuration and any weight format, so every test
//! also exercises the GGUF reader and the weight binding. Weights are random
//! *blocks* (random quants with small random f16 scales), not quantized
//! floats, so no quantizer is involved. The byte stream is a pure function of
//! the [`SynthSpec`], identical on every target.

#![forbid(unsafe_code)]

use super::config::Arch;
use crate::gguf::{TensorSpec, Writer};
use crate::quant::GgmlType;
use crate::sample::SplitMix64;
use crate::{Error, F32, Result};
use core::fmt::Write as _;

/// Most layers a synthetic model may have.
pub const MAX_LAYERS: usize = 8;
const MAX_TENSORS: usize = 4 + 16 * MAX_LAYERS;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthSpec {
    /// `llama`, `qwen2` (q/k/v biases, NEOX RoPE), `qwen3` (Q/K head
    /// norms) or `gemma3` (Q/K head norms, post-norms, GEGLU, sliding
    /// window).
    pub arch: Arch,
    /// Residual width.
    pub dim: usize,
    /// Feed-forward width.
    pub hidden_dim: usize,
    /// Blocks (≤ [`MAX_LAYERS`]).
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads.
    pub n_kv_heads: usize,
    /// RoPE dimensions per head.
    pub n_rot: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Format of the per-layer matrices.
    pub weight_type: GgmlType,
    /// Format of the embedding (and of the head when tied).
    pub embd_type: GgmlType,
    /// Separate output head (else tied to the embedding).
    pub separate_output: bool,
    /// Seed of the weights.
    pub seed: u64,
    /// Dimensions per head, written as `attention.key_length` (and
    /// `value_length`); 0: `dim / n_heads`, no key written.
    pub head_dim: usize,
    /// Gemma 3's `attention.sliding_window` (ignored by the other archs).
    pub sliding_window: usize,
    /// Write a `rope_freqs.weight` tensor of `n_rot / 2` frequency factors
    /// (Llama 3.x).
    pub rope_freqs: bool,
}

impl SynthSpec {
    /// A tiny llama: dim 64, 2 layers, 4 heads / 2 KV heads, vocab 96, Q4_1 + Q8_0.
    pub const TINY: SynthSpec = SynthSpec {
        arch: Arch::Llama,
        dim: 64,
        hidden_dim: 128,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        n_rot: 16,
        vocab_size: 96,
        weight_type: GgmlType::Q4_1,
        embd_type: GgmlType::Q8_0,
        separate_output: false,
        seed: 1,
        head_dim: 0,
        sliding_window: 0,
        rope_freqs: false,
    };

    /// A small gemma3 (q_dim 128 over dim 96, window 5, every 2nd layer
    /// global), Q8_0: compared with llama.cpp by `tests/llamacpp/arch.rs`.
    pub const GEMMA3: SynthSpec = SynthSpec {
        arch: Arch::Gemma3,
        dim: 96,
        hidden_dim: 128,
        n_layers: 2,
        n_heads: 4,
        n_kv_heads: 2,
        n_rot: 32,
        vocab_size: 96,
        weight_type: GgmlType::Q8_0,
        embd_type: GgmlType::Q8_0,
        separate_output: false,
        seed: 7,
        head_dim: 32,
        sliding_window: 5,
        rope_freqs: false,
    };

    /// A small qwen3 (q_dim 128 over dim 64), Q8_0.
    pub const QWEN3: SynthSpec = SynthSpec {
        arch: Arch::Qwen3,
        dim: 64,
        head_dim: 32,
        n_rot: 32,
        weight_type: GgmlType::Q8_0,
        seed: 8,
        ..SynthSpec::TINY
    };

    /// A small llama with Llama 3.x frequency factors, Q8_0.
    pub const LLAMA3: SynthSpec = SynthSpec {
        rope_freqs: true,
        weight_type: GgmlType::Q8_0,
        seed: 9,
        ..SynthSpec::TINY
    };

    /// Dimensions per head: [`SynthSpec::head_dim`], or `dim / n_heads`.
    pub const fn head_dim(&self) -> usize {
        if self.head_dim > 0 {
            self.head_dim
        } else {
            match self.dim.checked_div(self.n_heads) {
                Some(h) => h,
                None => 0,
            }
        }
    }
}

/// Fixed-capacity storage for tensor names.
struct Names {
    buf: [[u8; 40]; MAX_TENSORS],
    len: [usize; MAX_TENSORS],
    n: usize,
}

impl Names {
    const EMPTY: Names = Names {
        buf: [[0; 40]; MAX_TENSORS],
        len: [0; MAX_TENSORS],
        n: 0,
    };

    /// Stores `blk.{layer}.{name}` (or `name`); returns its index.
    /// `SizeOverflow` if the table or the name's slot is full.
    fn push(&mut self, layer: Option<usize>, name: &str) -> Result<usize> {
        let i = self.n;
        let slot = self.buf.get_mut(i).ok_or(Error::SizeOverflow)?;
        let mut w = SliceWriter { buf: slot, len: 0 };
        let r = match layer {
            Some(l) => write!(w, "blk.{l}.{name}"),
            None => w.write_str(name),
        };
        r.map_err(|_| Error::SizeOverflow)?;
        self.len[i] = w.len;
        self.n += 1;
        Ok(i)
    }

    fn get(&self, i: usize) -> &str {
        core::str::from_utf8(&self.buf[i][..self.len[i]]).unwrap_or("")
    }
}

struct SliceWriter<'b> {
    buf: &'b mut [u8],
    len: usize,
}

impl core::fmt::Write for SliceWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(core::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// One tensor to generate: name index, type, shape, fill.
#[derive(Clone, Copy)]
struct Plan {
    name: usize,
    ty: GgmlType,
    ne: [u64; 2],
    n_dims: usize,
    fill: Fill,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Random weights.
    Weight,
    /// Norm weights around 1.
    Norm,
    /// Small biases.
    Bias,
    /// RoPE frequency factors in `[1, 8)`.
    Factor,
}

/// Collects the [`Plan`]s of a model in file order.
struct Planner<'p> {
    names: &'p mut Names,
    out: &'p mut [Option<Plan>; MAX_TENSORS],
    n: usize,
}

impl Planner<'_> {
    fn add(
        &mut self,
        layer: Option<usize>,
        name: &str,
        ty: GgmlType,
        ne: [u64; 2],
        n_dims: usize,
        fill: Fill,
    ) -> Result<()> {
        let name = self.names.push(layer, name)?;
        *self.out.get_mut(self.n).ok_or(Error::SizeOverflow)? = Some(Plan {
            name,
            ty,
            ne,
            n_dims,
            fill,
        });
        self.n += 1;
        Ok(())
    }

    /// A 2-D weight of `ne = [columns, rows]`, random.
    fn matrix(
        &mut self,
        layer: Option<usize>,
        name: &str,
        ty: GgmlType,
        ne: [u64; 2],
    ) -> Result<()> {
        self.add(layer, name, ty, ne, 2, Fill::Weight)
    }

    /// A 1-D F32 vector (norm weights or biases).
    fn vector(&mut self, layer: Option<usize>, name: &str, len: u64, fill: Fill) -> Result<()> {
        self.add(layer, name, GgmlType::F32, [len, 1], 1, fill)
    }
}

/// The tensors of `spec` in file order (llama.cpp's names); returns how many.
fn plans(
    spec: &SynthSpec,
    names: &mut Names,
    out: &mut [Option<Plan>; MAX_TENSORS],
) -> Result<usize> {
    let (d, h, v) = (
        spec.dim as u64,
        spec.hidden_dim as u64,
        spec.vocab_size as u64,
    );
    let hd = spec.head_dim();
    let q = (spec.n_heads * hd) as u64;
    let kv = (spec.n_kv_heads * hd) as u64;
    let wt = spec.weight_type;
    let mut p = Planner { names, out, n: 0 };
    p.matrix(None, "token_embd.weight", spec.embd_type, [d, v])?;
    if spec.rope_freqs {
        let pairs = (spec.n_rot.min(hd) / 2) as u64;
        p.vector(None, "rope_freqs.weight", pairs, Fill::Factor)?;
    }
    for l in (0..spec.n_layers).map(Some) {
        p.vector(l, "attn_norm.weight", d, Fill::Norm)?;
        p.matrix(l, "attn_q.weight", wt, [d, q])?;
        p.matrix(l, "attn_k.weight", wt, [d, kv])?;
        p.matrix(l, "attn_v.weight", wt, [d, kv])?;
        if spec.arch.has_qkv_bias() {
            p.vector(l, "attn_q.bias", q, Fill::Bias)?;
            p.vector(l, "attn_k.bias", kv, Fill::Bias)?;
            p.vector(l, "attn_v.bias", kv, Fill::Bias)?;
        }
        if spec.arch.has_qk_norm() {
            p.vector(l, "attn_q_norm.weight", hd as u64, Fill::Norm)?;
            p.vector(l, "attn_k_norm.weight", hd as u64, Fill::Norm)?;
        }
        p.matrix(l, "attn_output.weight", wt, [q, d])?;
        if spec.arch.has_post_norms() {
            p.vector(l, "post_attention_norm.weight", d, Fill::Norm)?;
        }
        p.vector(l, "ffn_norm.weight", d, Fill::Norm)?;
        p.matrix(l, "ffn_gate.weight", wt, [d, h])?;
        p.matrix(l, "ffn_up.weight", wt, [d, h])?;
        p.matrix(l, "ffn_down.weight", wt, [h, d])?;
        if spec.arch.has_post_norms() {
            p.vector(l, "post_ffw_norm.weight", d, Fill::Norm)?;
        }
    }
    p.vector(None, "output_norm.weight", d, Fill::Norm)?;
    if spec.separate_output {
        p.matrix(None, "output.weight", wt, [d, v])?;
    }
    Ok(p.n)
}

fn tensor_bytes(p: &Plan) -> Result<usize> {
    p.ty.row_bytes(p.ne[0] as usize)?
        .checked_mul(p.ne[1] as usize)
        .ok_or(Error::SizeOverflow)
}

/// f16 bits of a random scale `m · 2^-e` with m in [512, 1023], e in [e_lo, e_hi].
fn f16_scale(rng: &mut SplitMix64, e_lo: u64, e_hi: u64, neg: bool) -> u16 {
    let r = rng.next_u64();
    let m = 512 + (r & 511) as i32;
    let e = e_lo + (r >> 9) % (e_hi - e_lo + 1);
    let v = F32::from_i128_scaled(if neg { -(m as i128) } else { m as i128 }, -(e as i32) - 10);
    v.to_f16_bits()
}

/// Random but well-scaled contents for one tensor.
fn fill(p: &Plan, rng: &mut SplitMix64, data: &mut [u8]) {
    match (p.fill, p.ty) {
        (Fill::Norm, _) => {
            for c in data.chunks_exact_mut(4) {
                // 1 + u/64 with u in [-8, 8): norm weights near one.
                let u = (rng.next_u64() % 16) as i32 - 8;
                let v = F32::ONE + F32::from_i128_scaled(u as i128, -6);
                c.copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        (Fill::Factor, _) => {
            for c in data.chunks_exact_mut(4) {
                // 1 + u/4 with u in [0, 28): factors in [1, 8).
                let u = (rng.next_u64() % 28) as i32;
                let v = F32::ONE + F32::from_i128_scaled(u as i128, -2);
                c.copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        (Fill::Bias, _) | (Fill::Weight, GgmlType::F32) => {
            for c in data.chunks_exact_mut(4) {
                let u = (rng.next_u64() % 4096) as i32 - 2048;
                let v = F32::from_i128_scaled(u as i128, -15);
                c.copy_from_slice(&v.to_bits().to_le_bytes());
            }
        }
        (Fill::Weight, GgmlType::F16) => {
            for c in data.chunks_exact_mut(2) {
                let u = (rng.next_u64() % 4096) as i32 - 2048;
                let v = F32::from_i128_scaled(u as i128, -15).to_f16_bits();
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        (Fill::Weight, GgmlType::BF16) => {
            for c in data.chunks_exact_mut(2) {
                let u = (rng.next_u64() % 4096) as i32 - 2048;
                let v = F32::from_i128_scaled(u as i128, -15).to_bf16_bits();
                c.copy_from_slice(&v.to_le_bytes());
            }
        }
        (Fill::Weight, ty) => {
            let bs = ty.type_size();
            for block in data.chunks_exact_mut(bs) {
                for b in block.iter_mut() {
                    *b = rng.next_u64() as u8;
                }
                // Overwrite the scale fields with sane values.
                match ty {
                    GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => {
                        let e = if ty == GgmlType::Q8_0 {
                            (10, 12)
                        } else {
                            (7, 9)
                        };
                        block[0..2].copy_from_slice(&f16_scale(rng, e.0, e.1, false).to_le_bytes());
                    }
                    GgmlType::Q4_1 | GgmlType::Q5_1 => {
                        block[0..2].copy_from_slice(&f16_scale(rng, 8, 10, false).to_le_bytes());
                        // m ≈ -d·(levels/2) keeps weights centred.
                        let levels = if ty == GgmlType::Q4_1 { 3 } else { 4 };
                        block[2..4].copy_from_slice(
                            &f16_scale(rng, 8 - levels, 10 - levels, true).to_le_bytes(),
                        );
                    }
                    GgmlType::Q4_K => {
                        block[0..2].copy_from_slice(&f16_scale(rng, 12, 13, false).to_le_bytes());
                        block[2..4].copy_from_slice(&f16_scale(rng, 11, 12, false).to_le_bytes());
                    }
                    GgmlType::Q5_K => {
                        // Quants twice Q4_K's range: half its super-scale.
                        block[0..2].copy_from_slice(&f16_scale(rng, 13, 14, false).to_le_bytes());
                        block[2..4].copy_from_slice(&f16_scale(rng, 11, 12, false).to_le_bytes());
                    }
                    GgmlType::Q6_K => {
                        for s in &mut block[192..208] {
                            *s = (*s % 32) as i8 as u8;
                        }
                        block[208..210]
                            .copy_from_slice(&f16_scale(rng, 13, 14, false).to_le_bytes());
                    }
                    _ => {}
                }
            }
        }
    }
}

/// `Err` unless `spec` describes a model the writer and the engine accept:
/// 1 to [`MAX_LAYERS`] layers, query heads a non-zero multiple of the KV
/// heads and dividing `dim` (unless `head_dim` is given), and (gemma3) a
/// sliding window.
fn validate(spec: &SynthSpec) -> Result<()> {
    if spec.n_layers == 0 || spec.n_layers > MAX_LAYERS {
        return Err(Error::InvalidModelConfig {
            key: "block_count",
            value: spec.n_layers,
        });
    }
    if spec.n_heads == 0
        || spec.n_kv_heads == 0
        || (spec.head_dim == 0 && !spec.dim.is_multiple_of(spec.n_heads))
        || !spec.n_heads.is_multiple_of(spec.n_kv_heads)
    {
        return Err(Error::InvalidHeads {
            n_head: spec.n_heads,
            n_kv_head: spec.n_kv_heads,
            head_dim: spec.dim.checked_div(spec.n_heads).unwrap_or(0),
        });
    }
    if spec.arch == Arch::Gemma3 && spec.sliding_window == 0 {
        return Err(Error::InvalidModelConfig {
            key: "attention.sliding_window",
            value: 0,
        });
    }
    Ok(())
}

/// Writes the GGUF file for `spec` into `out`, using `scratch` for the
/// tensor data; returns the file length. [`synth_sizes`] gives both sizes.
///
/// Errors: [`Error::InvalidModelConfig`] (layer count) or
/// [`Error::InvalidHeads`] for a spec the engine could not run,
/// [`Error::BufferTooSmall`] if `scratch` or `out` is too small.
pub fn write_synth(spec: &SynthSpec, scratch: &mut [u8], out: &mut [u8]) -> Result<usize> {
    validate(spec)?;
    let mut names = Names::EMPTY;
    let mut pl = [None; MAX_TENSORS];
    let n = plans(spec, &mut names, &mut pl)?;
    let ranges = fill_tensors(spec.seed, &pl[..n], scratch)?;
    let mut shapes = [[0u64; 2]; MAX_TENSORS];
    for (shape, p) in shapes.iter_mut().zip(pl[..n].iter().flatten()) {
        *shape = p.ne;
    }
    let mut list = [TensorSpec {
        name: "",
        ty: GgmlType::F32,
        ne: &[],
        data: &[],
    }; MAX_TENSORS];
    for (i, p) in pl[..n].iter().flatten().enumerate() {
        list[i] = TensorSpec {
            name: names.get(p.name),
            ty: p.ty,
            ne: &shapes[i][..p.n_dims],
            data: &scratch[ranges[i].0..ranges[i].1],
        };
    }
    let mut w = Writer::new(out);
    write_metadata(&mut w, spec)?;
    w.finish(&list[..n])
}

/// Carves each planned tensor's bytes from `scratch`, in order, and fills
/// them from one generator seeded with `seed`; returns the byte ranges.
fn fill_tensors(
    seed: u64,
    plans: &[Option<Plan>],
    scratch: &mut [u8],
) -> Result<[(usize, usize); MAX_TENSORS]> {
    let mut rng = SplitMix64::new(seed);
    let mut ranges = [(0usize, 0usize); MAX_TENSORS];
    let mut at = 0usize;
    for (range, p) in ranges.iter_mut().zip(plans.iter().flatten()) {
        let len = tensor_bytes(p)?;
        let end = at.checked_add(len).ok_or(Error::SizeOverflow)?;
        let avail = scratch.len();
        let dst = scratch.get_mut(at..end).ok_or(Error::BufferTooSmall {
            needed: end,
            available: avail,
        })?;
        fill(p, &mut rng, dst);
        *range = (at, end);
        at = end;
    }
    Ok(ranges)
}

/// The architecture and hyper-parameter keys llama.cpp reads.
fn write_metadata(w: &mut Writer<'_>, spec: &SynthSpec) -> Result<()> {
    let hd = spec.head_dim();
    let arch = spec.arch.name();
    let mut kb = [0u8; 64];
    w.add_str("general.architecture", arch)?;
    w.add_str("general.name", "detllm-synthetic")?;
    let u32_keys = [
        ("context_length", 4096),
        ("embedding_length", spec.dim),
        ("feed_forward_length", spec.hidden_dim),
        ("block_count", spec.n_layers),
        ("attention.head_count", spec.n_heads),
        ("attention.head_count_kv", spec.n_kv_heads),
        ("rope.dimension_count", spec.n_rot.min(hd)),
    ];
    for (suffix, value) in u32_keys {
        w.add_u32(arch_key(&mut kb, arch, suffix)?, value as u32)?;
    }
    // Keys only the newer specs carry (older files stay byte-identical).
    if spec.head_dim > 0 {
        w.add_u32(arch_key(&mut kb, arch, "attention.key_length")?, hd as u32)?;
        w.add_u32(
            arch_key(&mut kb, arch, "attention.value_length")?,
            hd as u32,
        )?;
    }
    if spec.arch == Arch::Gemma3 {
        // Every 2nd layer global (so a 2-layer model has both kinds), the
        // local layers' RoPE base 1000 (not the global 10000), logits
        // soft-capped at 0.5 (the synthetic logits are small: a larger cap
        // would hardly act).
        let window = spec.sliding_window as u32;
        w.add_u32(arch_key(&mut kb, arch, "attention.sliding_window")?, window)?;
        w.add_u32(
            arch_key(&mut kb, arch, "attention.sliding_window_pattern")?,
            2,
        )?;
        w.add_f32(
            arch_key(&mut kb, arch, "rope.freq_base_swa")?,
            F32::from_u32(1000),
        )?;
        w.add_f32(
            arch_key(&mut kb, arch, "final_logit_softcapping")?,
            F32::from_bits(0x3F00_0000), // 0.5
        )?;
    }
    // 10000 and 1e-5 (0x3727C5AC) as binary32 bits.
    w.add_f32(
        arch_key(&mut kb, arch, "rope.freq_base")?,
        F32::from_bits(0x461C_4000),
    )?;
    w.add_f32(
        arch_key(&mut kb, arch, "attention.layer_norm_rms_epsilon")?,
        F32::from_bits(0x3727_C5AC),
    )
}

fn arch_key<'k>(buf: &'k mut [u8; 64], arch: &str, suffix: &str) -> Result<&'k str> {
    let mut w = SliceWriter { buf, len: 0 };
    write!(w, "{arch}.{suffix}").map_err(|_| Error::SizeOverflow)?;
    let len = w.len;
    core::str::from_utf8(&buf[..len]).map_err(|_| Error::InvalidUtf8)
}

/// `(scratch, out)` byte sizes [`write_synth`] needs for `spec`.
///
/// Errors: as [`write_synth`] for a spec it would reject.
pub fn synth_sizes(spec: &SynthSpec) -> Result<(usize, usize)> {
    validate(spec)?;
    let mut names = Names::EMPTY;
    let mut pl = [None; MAX_TENSORS];
    let n = plans(spec, &mut names, &mut pl)?;
    let mut total = 0usize;
    for p in pl[..n].iter().flatten() {
        total = total
            .checked_add(tensor_bytes(p)?)
            .ok_or(Error::SizeOverflow)?;
    }
    // The file: data (with padding) plus header and metadata, bounded generously.
    let out = total
        .checked_add(n * (32 + 64 + 64) + 4096)
        .ok_or(Error::SizeOverflow)?;
    Ok((total, out))
}

/// The GGUF bytes of `spec` in a `Vec` ([`synth_sizes`] + [`write_synth`];
/// hosts with the `std` feature).
#[cfg(feature = "std")]
pub fn synth_vec(spec: &SynthSpec) -> Result<std::vec::Vec<u8>> {
    let (s, o) = synth_sizes(spec)?;
    let (mut scratch, mut out) = (std::vec![0u8; s], std::vec![0u8; o]);
    let n = write_synth(spec, &mut scratch, &mut out)?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_specs_say_what() {
        let no_layers = SynthSpec {
            n_layers: 0,
            ..SynthSpec::TINY
        };
        let block_count = Error::InvalidModelConfig {
            key: "block_count",
            value: 0,
        };
        assert_eq!(synth_sizes(&no_layers), Err(block_count));
        assert_eq!(write_synth(&no_layers, &mut [], &mut []), Err(block_count));
        let odd_heads = SynthSpec {
            n_heads: 3,
            ..SynthSpec::TINY
        };
        assert_eq!(
            synth_sizes(&odd_heads),
            Err(Error::InvalidHeads {
                n_head: 3,
                n_kv_head: 2,
                head_dim: 21
            })
        );
        assert!(synth_sizes(&SynthSpec::TINY).is_ok());
    }
}
