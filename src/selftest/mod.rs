//! The determinism suite: SHA-256 digests of fixed computations, the same
//! functions on every target.
//!
//! Every [`Case`] in [`CASES`] runs a fixed computation and returns the
//! SHA-256 of its results. The host test (`tests/determinism.rs`), the
//! cross-target script (`scripts/cross-test.sh`: s390x, aarch64, i686,
//! wasm32, and the bare-metal Cortex-M4 and RISC-V examples under
//! `embedded/`) all call these same functions and compare the digests with
//! the committed goldens in `tests/golden/<group>.txt`, where `<group>` is
//! the part of the case name before the first `.`. One differing bit on one
//! target fails CI.
//!
//! Nothing here allocates: sweeps hash each result as it is produced, and a
//! case that needs buffers carves them from the caller's `scratch` (at least
//! [`SCRATCH_BYTES`]) through a fresh [`Arena`](crate::Arena), so cases do
//! not depend on each other or on their order.
//!
//! ## Inputs
//! Pseudo-random inputs come from the profile's [`SplitMix64`](crate::sample::SplitMix64) seeded with
//! [`SEED`] (one fresh generator per case), so anyone can regenerate them:
//!
//! * unary `F32` sweeps ([`UnarySweep`]): the [`SPECIALS`] in order, then
//!   [`draw`] until [`SWEEP_LEN`] inputs;
//! * binary sweeps ([`BinarySweep`]): every (special, special) pair in
//!   row-major order, then pairs `(x, y)` with `x = draw()` and, one time in
//!   four, `y` a near neighbour of `±x` (cancellation in add/sub), otherwise
//!   `y = draw()`, until [`SWEEP_LEN`] pairs;
//! * integer sweeps ([`I32Sweep`]): [`I32_SPECIALS`], then random integers of
//!   random bit length;
//! * binary16 and bfloat16 sources: all 65536 bit patterns.
//!
//! ## Digest
//! SHA-256 over the concatenated little-endian encodings of the results, in
//! sweep order: 4 bytes per `F32` or `i32`, 2 per f16/bf16, nothing else (no
//! inputs, no names), so an independent implementation that produces the
//! same result bits (hardware IEEE arithmetic, CORE-MATH) reproduces the
//! digest; `tests/determinism.rs` checks exactly that on x86-64 hosts.
//!
//! ## Adding a case
//! Write `fn my_case(scratch: &mut [u8]) -> Result<Digest>`, add one line
//! `Case { name: "group.my_case", run: my_case }` to [`CASES`], raise
//! [`SCRATCH_BYTES`] if it needs more scratch, and run
//! `scripts/regen-goldens.sh`.
//!
//! ## Layout
//! `inputs` (seed, specials, sweeps) ← `scalar`, [`kernels`], [`model`]
//! (the cases) ← this module (the registry [`CASES`]); nothing points back.

#![forbid(unsafe_code)]

mod inputs;
pub mod kernels;
pub mod model;
mod scalar;

pub use inputs::{
    BinarySweep, Digest, I32_SPECIALS, I32Sweep, SEED, SPECIALS, SWEEP_LEN, UnarySweep, draw,
};
pub use scalar::ordering_byte;

use crate::Result;
use scalar::*;

/// Bytes of scratch memory the caller must pass to [`Case::run`] / [`all`]
/// (the largest need of any case in [`CASES`]).
pub const SCRATCH_BYTES: usize = model::MODEL_SCRATCH_BYTES;

/// One case of the suite.
#[derive(Clone, Copy)]
pub struct Case {
    /// `group.name`; the group names the golden file `tests/golden/<group>.txt`.
    pub name: &'static str,
    /// Runs the case with at least [`SCRATCH_BYTES`] of scratch memory.
    pub run: fn(scratch: &mut [u8]) -> Result<Digest>,
}

impl Case {
    /// The golden-file group: the name up to the first `.`.
    pub fn group(&self) -> &'static str {
        match self.name.split_once('.') {
            Some((g, _)) => g,
            None => self.name,
        }
    }
}

/// Every case, in report order. New cases are one line each.
///
/// Groups: `f32` (the soft operations), `conv` (conversions), `math`
/// (elementary functions), `kernel` (every weight block format decoded and
/// multiplied; the f32 kernels: [`kernels`]) and `model`
/// (synthetic-model schedules and seeded sampled generation; every
/// architecture — llama, qwen2, qwen3, gemma3, llama with `rope_freqs` —
/// and every weight format of the Q4_K_M/Q5_K_M mixes as a whole model:
/// [`model`]). Cases are appended, so older goldens keep their values.
pub const CASES: &[Case] = &[
    Case {
        name: "f32.add",
        run: f32_add,
    },
    Case {
        name: "f32.sub",
        run: f32_sub,
    },
    Case {
        name: "f32.mul",
        run: f32_mul,
    },
    Case {
        name: "f32.div",
        run: f32_div,
    },
    Case {
        name: "f32.sqrt",
        run: f32_sqrt,
    },
    Case {
        name: "f32.min_max",
        run: f32_min_max,
    },
    Case {
        name: "f32.cmp",
        run: f32_cmp,
    },
    Case {
        name: "conv.f16_to_f32",
        run: conv_f16_to_f32,
    },
    Case {
        name: "conv.f32_to_f16",
        run: conv_f32_to_f16,
    },
    Case {
        name: "conv.bf16_to_f32",
        run: conv_bf16_to_f32,
    },
    Case {
        name: "conv.f32_to_bf16",
        run: conv_f32_to_bf16,
    },
    Case {
        name: "conv.i32_to_f32",
        run: conv_i32_to_f32,
    },
    Case {
        name: "conv.f32_to_i32_trunc",
        run: conv_to_i32_trunc,
    },
    Case {
        name: "conv.f32_to_i32_ties_away",
        run: conv_to_i32_ties_away,
    },
    Case {
        name: "conv.f32_to_i32_ties_even",
        run: conv_to_i32_ties_even,
    },
    Case {
        name: "conv.round_ties_away",
        run: conv_round_ties_away,
    },
    Case {
        name: "math.exp",
        run: math_exp,
    },
    Case {
        name: "math.exp2",
        run: math_exp2,
    },
    Case {
        name: "math.ln",
        run: math_ln,
    },
    Case {
        name: "math.sin",
        run: math_sin,
    },
    Case {
        name: "math.cos",
        run: math_cos,
    },
    Case {
        name: "math.sin_cos",
        run: math_sin_cos,
    },
    Case {
        name: "math.powf",
        run: math_powf,
    },
    Case {
        name: "math.silu",
        run: math_silu,
    },
    Case {
        name: "math.tanh",
        run: math_tanh,
    },
    Case {
        name: "math.gelu",
        run: math_gelu,
    },
    Case {
        name: "kernel.matmul",
        run: kernels::case_matmul,
    },
    Case {
        name: "kernel.ops",
        run: kernels::case_ops,
    },
    Case {
        name: "kernel.matmul_q5_k",
        run: kernels::case_matmul_q5_k,
    },
    Case {
        name: "kernel.geglu",
        run: kernels::case_geglu,
    },
    Case {
        name: "model.schedules",
        run: model::schedules,
    },
    Case {
        name: "model.sampled",
        run: model::sampled,
    },
    Case {
        name: "model.gemma3",
        run: model::gemma3,
    },
    Case {
        name: "model.qwen3",
        run: model::qwen3,
    },
    Case {
        name: "model.llama3_rope_freqs",
        run: model::llama3,
    },
    Case {
        name: "model.q5_0",
        run: model::q5_0,
    },
    Case {
        name: "model.q4_k",
        run: model::q4_k,
    },
    Case {
        name: "model.q5_k",
        run: model::q5_k,
    },
    Case {
        name: "model.q6_k",
        run: model::q6_k,
    },
];

/// Runs every case in [`CASES`] order with the caller's scratch memory,
/// yielding `(case, digest or error)`. Allocates nothing.
pub fn all<'s>(
    scratch: &'s mut [u8],
) -> impl Iterator<Item = (&'static Case, Result<Digest>)> + 's {
    CASES.iter().map(move |c| (c, (c.run)(scratch)))
}

/// The case named `name`, if any.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// Lower-case hex of a digest, for printing without `alloc`.
pub fn hex(d: &Digest) -> [u8; 64] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 64];
    for (pair, &b) in out.chunks_exact_mut(2).zip(d.iter()) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 15)];
    }
    out
}

/// A digest displayed as lower-case hex.
pub struct Hex<'d>(pub &'d Digest);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
