//! The one place a build is picked: for a weight matrix's format, the
//! [`KernelPath`] asked for and the CPU's [`Level`] (detected once,
//! [`crate::simd::level`]), which driver runs with which kernels
//! ([`Plan`]). The drivers and kernels below never choose a build, and only
//! this module names the CPU builds under `x86/` and `wasm32/` (the Q4_1
//! split kernel's SIMD128 build, chosen at compile time on `Auto`; an
//! `aarch64/` leaf would be named here too; on a target without x86, the
//! stand-in module at the end has no x86 build).
//!
//! | weights | [`KernelPath::Reference`] | `Portable` | `Auto` | `Avx2` |
//! |---|---|---|---|---|
//! | Q4_0, Q4_1, Q5_0, Q8_0 | `dot_row` | blocked, split kernel | blocked, widest fused build (VNNI, AVX2) or portable; on VNNI with at least `WIDE_MIN_ROWS` input rows, sixteen weight rows at a time | blocked, AVX2 fused build or portable |
//! | Q4_K, Q5_K, Q6_K | `dot_row` | row kernel, portable body | row kernel, widest build (AVX-512, AVX2; Q4_K and Q6_K: hand-written; every weight row through that build's decode kernel with one input row (on AVX-512 VNNI its VNNI build, up to `VNNI_DECODE_MAX_ROWS` input rows, or up to `DECODE_PASS_ROWS` of rows short enough for `vnni_decode_takes`), and with any number where there is no VNNI tile (blocks of weight rows, calls of up to 16 input rows); on AVX-512 VNNI with more, the VNNI tile: sixteen (else four) weight rows against up to 32 input rows at a time) or portable | row kernel, AVX2 build (Q4_K, Q5_K and Q6_K likewise: the decode kernel for any number of input rows) or portable |
//! | any other | `dot_row` | `dot_row` | `dot_row` | `dot_row` |
//!
//! Contract: every plan computes the same bits as `dot_row` per cell.
//! `tests/kernels/matmul.rs` asserts, for every format and path, which
//! build ran (`RowsRun`, reported from the plan) and that all give the same
//! bits; `tests/kernels_guarded.rs` runs every plan against guard pages.
#![forbid(unsafe_code)]

use super::blocked::BlockedRowsFn;
use super::chunk::{ChunkFn, split_kernel};
use super::kquant::{self, DecodeFn, KQuantKernels, KTile, RowFn, TileFn};
use crate::quant::GgmlType;
use crate::simd::Level;

#[cfg(all(feature = "std", target_arch = "x86_64"))]
use super::x86;

/// Which implementation computes the cells (all give the same bits;
/// the table above says which exist per format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelPath {
    /// [`crate::quant::dot::dot_row`] per cell (the reference).
    Reference,
    /// The blocked kernel in portable Rust.
    Portable,
    /// The blocked kernel with the best SIMD the CPU has (falls back to
    /// `Portable` where there is none).
    Auto,
    /// The blocked kernel's AVX2 version even where a wider one exists
    /// (falls back to `Portable` without AVX2), so tests cover both.
    Avx2,
}

/// What computes the cells of a matrix.
pub(super) enum Plan {
    /// [`crate::quant::dot::dot_row`] per cell.
    Reference,
    /// Q4_0, Q4_1, Q5_0, Q8_0: an instruction set's build of the blocked drivers
    /// with its fused kernels inlined, and that build's level.
    Fused(BlockedRowsFn, Level),
    /// Q4_0, Q4_1, Q5_0, Q8_0 in portable Rust: the blocked driver with this
    /// split chunk kernel.
    Split(ChunkFn),
    /// Q4_K, Q5_K, Q6_K: the K-quant tile driver with these kernels.
    KQuant(KQuantKernels),
}

/// The plan for a `ty` matrix on `path` on a CPU of level `cpu`.
pub(super) fn plan(ty: GgmlType, path: KernelPath, cpu: Level) -> Plan {
    if path == KernelPath::Reference {
        Plan::Reference
    } else if let Some(k) = kquant_kernels(ty, path, cpu) {
        Plan::KQuant(k)
    } else if let Some((rows, level)) = fused_rows(ty, path, cpu) {
        Plan::Fused(rows, level)
    } else if let Some(f) = simd128_split(ty, path).or(split_kernel(ty)) {
        Plan::Split(f)
    } else {
        Plan::Reference
    }
}

/// On wasm32 with `simd128` (chosen at compile time) and the `Auto`
/// path, the SIMD128 split kernel for `ty`; elsewhere `None`.
fn simd128_split(ty: GgmlType, path: KernelPath) -> Option<ChunkFn> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if path == KernelPath::Auto {
        return super::wasm32::split_kernel(ty);
    }
    let _ = (ty, path);
    None
}

/// The fused build of the blocked drivers for `ty` on `path`: the widest
/// this CPU runs, up to VNNI on `Auto` and AVX2 on `Avx2`; `None` on the
/// other paths, or where there is none.
fn fused_rows(ty: GgmlType, path: KernelPath, cpu: Level) -> Option<(BlockedRowsFn, Level)> {
    let widest = match path {
        KernelPath::Auto => Level::Avx512Vnni,
        KernelPath::Avx2 => Level::Avx2,
        KernelPath::Reference | KernelPath::Portable => return None,
    };
    match cpu.min(widest) {
        Level::Portable => None,
        Level::Avx512Vnni => x86::blocked::vnni_rows(ty)
            .map(|f| (f, Level::Avx512Vnni))
            .or_else(|| x86::blocked::avx2_rows(ty).map(|f| (f, Level::Avx2))),
        Level::Avx2 | Level::Avx512 => x86::blocked::avx2_rows(ty).map(|f| (f, Level::Avx2)),
    }
}

/// The kernels of a K-quant `ty` on `path`: the row kernel's widest build
/// allowed (`Auto`: AVX-512, else AVX2; `Avx2`: AVX2; else the portable
/// body) — for Q4_K and Q6_K the hand-written builds, else the
/// `multiversion!` ones — its tile kernel: on `Auto` the VNNI tile
/// where the CPU has it, else the tile build of the row kernel's level —
/// and the decode kernel of the row kernel's level (Q4_K, Q6_K).
fn kquant_kernels(ty: GgmlType, path: KernelPath, cpu: Level) -> Option<KQuantKernels> {
    let (body, compiled) = kquant::row_kernels(ty)?;
    let hand: [Option<(RowFn, TileFn)>; 2] = [x86::kquant::avx512(ty), x86::kquant::avx2(ty)];
    let builds = match hand {
        [_, Some(_)] => hand.map(|b| b.map(|(row, _)| row)),
        _ => compiled,
    };
    let (row, build) = match (path, builds) {
        (KernelPath::Auto, [Some(f), _]) => (f, Level::Avx512),
        (KernelPath::Auto | KernelPath::Avx2, [_, Some(f)]) => (f, Level::Avx2),
        _ => (body, Level::Portable),
    };
    let vnni = x86::kquant::vnni_tiles(ty)
        .filter(|_| path == KernelPath::Auto && cpu >= Level::Avx512Vnni);
    let one = match build {
        Level::Avx512 => hand[0].map(|(_, tile)| tile),
        Level::Avx2 => hand[1].map(|(_, tile)| tile),
        Level::Portable | Level::Avx512Vnni => None,
    };
    let tile = vnni.map(KTile::Wide).or(one.map(KTile::One));
    let decode_vnni = x86::kdecode::vnni(ty)
        .filter(|_| build == Level::Avx512 && path == KernelPath::Auto && cpu >= Level::Avx512Vnni);
    let (decode, decode_build): (Option<DecodeFn>, Level) = match (build, decode_vnni) {
        (_, Some(d)) => (Some(d), Level::Avx512Vnni),
        (Level::Avx512, None) => (x86::kdecode::avx512(ty), build),
        (Level::Avx2, None) => (x86::kdecode::avx2(ty), build),
        (Level::Portable | Level::Avx512Vnni, None) => (None, build),
    };
    Some(KQuantKernels {
        row,
        build,
        tile,
        decode,
        decode_build,
    })
}

/// The stand-in for the x86 builds on every other target: none.
#[cfg(not(all(feature = "std", target_arch = "x86_64")))]
mod x86 {
    pub mod blocked {
        use super::super::BlockedRowsFn;
        use crate::quant::GgmlType;

        pub fn avx2_rows(_: GgmlType) -> Option<BlockedRowsFn> {
            None
        }
        pub fn vnni_rows(_: GgmlType) -> Option<BlockedRowsFn> {
            None
        }
    }
    pub mod kdecode {
        use super::super::DecodeFn;
        use crate::quant::GgmlType;

        pub fn avx2(_: GgmlType) -> Option<DecodeFn> {
            None
        }
        pub fn avx512(_: GgmlType) -> Option<DecodeFn> {
            None
        }
        pub fn vnni(_: GgmlType) -> Option<DecodeFn> {
            None
        }
    }
    pub mod kquant {
        use super::super::{RowFn, TileFn};
        use crate::quant::GgmlType;
        use crate::quant::fast::kquant::MultiTileFns;

        pub fn avx2(_: GgmlType) -> Option<(RowFn, TileFn)> {
            None
        }
        pub fn avx512(_: GgmlType) -> Option<(RowFn, TileFn)> {
            None
        }
        pub fn vnni_tiles(_: GgmlType) -> Option<MultiTileFns> {
            None
        }
    }
}
