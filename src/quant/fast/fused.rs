//! The interface of the fused chunk kernels (the SIMD builds in `x86/`:
//! the weight scales decoded on the fly against guessed bases, each input
//! row told whether every shift stayed in range): the trait the drivers are
//! generic over ([`FusedChunkKernel`]), so that a SIMD build of a driver
//! inlines its kernels, the tiles of input rows a kernel takes
//! ([`ActTile`]) and what it returns ([`ChunkSums`], [`WideTileOut`]).
//!
//! Contract: a fused kernel's [`ChunkSums`] that fit `i64` are the same
//! integers as the portable kernels of `super::chunk` (relative to the
//! bases they report); a row it rounds itself ([`WideTileOut`]) is
//! [`ExactAcc::finish`] of that sum. The drivers add the sums to the cells
//! ([`ChunkSums::add_to`]) or sum the chunk by `chunk_in_i128` where they
//! do not fit. Verified by the proptests of `tests/kernels/matmul.rs` on
//! the `Auto` and `Avx2` paths, which run the fused kernels the CPU has.
#![forbid(unsafe_code)]

use super::chunk::ROW_GROUP;
use crate::F32;
use crate::quant::act::{ActScale, ChunkScale};
use crate::quant::fixed::ExactAcc;

/// What a fused chunk kernel returns for one row group and one input row.
#[derive(Clone, Copy)]
pub(crate) struct ChunkSums {
    /// False when a relative shift fell outside the `i64`-exact range; the
    /// caller then sums the chunk in `i128` ([`chunk_in_i128`]).
    pub fits_i64: bool,
    /// Σ d terms per row, in units of `2^d_base[r]` (×2^-48).
    pub d_sum: [i64; ROW_GROUP],
    /// Base shift of `d_sum` per row (weight base + activation chunk base).
    pub d_base: [u32; ROW_GROUP],
    /// Σ m·s terms per row (Q4_1), in units of `2^m_base[r]`.
    pub m_sum: [i64; ROW_GROUP],
    /// Base shift of `m_sum`.
    pub m_base: [u32; ROW_GROUP],
    /// A weight scale of the chunk is ±∞/NaN (valid even when `!fits_i64`).
    pub nonfinite: [bool; ROW_GROUP],
}

impl ChunkSums {
    /// Zero sums that fit: adding them changes no cell.
    pub const ZERO: ChunkSums = ChunkSums {
        fits_i64: true,
        ..ChunkSums::NOT_COMPUTED
    };

    /// "Not computed": the caller sums the chunk in `i128` instead.
    pub const NOT_COMPUTED: ChunkSums = ChunkSums {
        fits_i64: false,
        d_sum: [0; ROW_GROUP],
        d_base: [0; ROW_GROUP],
        m_sum: [0; ROW_GROUP],
        m_base: [0; ROW_GROUP],
        nonfinite: [false; ROW_GROUP],
    };

    /// Adds row `r`'s sums to `cell` if they fit `i64` (returns whether
    /// they did; else the caller sums the chunk in `i128`), and its
    /// non-finite flag (with the input row's, `act_bad`) either way.
    #[inline(always)]
    pub(super) fn add_to(&self, r: usize, has_m: bool, act_bad: bool, cell: &mut ExactAcc) -> bool {
        if self.fits_i64 {
            cell.add_shifted(self.d_sum[r], self.d_base[r]);
            if has_m {
                cell.add_shifted(self.m_sum[r], self.m_base[r]);
            }
        }
        cell.nonfinite |= self.nonfinite[r] || act_bad;
        self.fits_i64
    }
}

/// Input rows a multi-row fused kernel takes per pass over a weight chunk.
pub(crate) const ACT_TILE: usize = 8;

/// Row groups a wide fused kernel (the AVX-512 VNNI build's, for Q4_1,
/// Q5_0 and Q8_0) takes at once: sixteen weight rows, one per 32-bit lane.
pub const WIDE_GROUPS: usize = 4;

/// Input rows a wide kernel takes per pass over a weight chunk.
pub(crate) const WIDE_TILE: usize = 32;

/// Weight rows of a wide group.
pub(crate) const WIDE_ROWS: usize = WIDE_GROUPS * ROW_GROUP;

/// One chunk of up to `T` (by default [`ACT_TILE`]) input rows: quantized
/// values, block scales and chunk ranges of rows `0..n`.
pub(crate) struct ActTile<'x, const T: usize = ACT_TILE> {
    #[cfg_attr(not(all(feature = "std", target_arch = "x86_64")), allow(dead_code))]
    pub n: usize,
    pub qs: [&'x [i8]; T],
    pub sc: [&'x [ActScale]; T],
    pub ch: [ChunkScale; T],
}

impl<const T: usize> ActTile<'_, T> {
    /// A tile holding no input row.
    pub(super) const EMPTY: Self = ActTile {
        n: 0,
        qs: [&[]; T],
        sc: [&[]; T],
        ch: [ChunkScale {
            dbase: 0,
            dspread: 0,
            sbase: 0,
            sspread: 0,
        }; T],
    };
}

/// A pair of fused chunk kernels (the weight scales decoded on the fly
/// against guessed bases, each input row told whether every shift stayed
/// in range): one input row, and up to [`ACT_TILE`] rows per pass over a
/// weight chunk. `group` holds the four weight rows back to back (`rb`
/// bytes each). The drivers below are generic over it so that a SIMD build
/// of them inlines the kernels and the cell rounding into one loop.
pub(crate) trait FusedChunkKernel: Copy {
    /// The chunk sums for one input row.
    #[allow(clippy::too_many_arguments)]
    fn one_input(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        qs: &[i8],
        sc: &[ActScale],
        ch: &ChunkScale,
    ) -> ChunkSums;
    /// The chunk sums for each of the tile's input rows.
    fn tile(
        self,
        group: &[u8],
        rb: usize,
        b0: usize,
        nb: usize,
        t: &ActTile<'_>,
    ) -> [ChunkSums; ACT_TILE];
    /// Whether [`Self::tile_wide`] computes anything.
    const HAS_WIDE: bool = false;
    /// Fewest input rows in a tile for which the drivers run
    /// [`Self::tile_wide`] (fewer: the group kernel per group).
    const WIDE_MIN: usize = usize::MAX;
    /// [`Self::tile`] for [`WIDE_GROUPS`] groups back to back in `rows`,
    /// into `out`; where the chunk is the rows' only one (`whole`), an input
    /// row's cells may come back rounded instead ([`WideTileOut`]). Sets
    /// the entries of the tile's input rows and no others. By default
    /// nothing computed (the drivers call it only where [`Self::HAS_WIDE`]).
    fn tile_wide(
        self,
        rows: &[u8],
        rb: usize,
        (b0, nb, whole): (usize, usize, bool),
        t: &ActTile<'_, WIDE_TILE>,
        out: &mut WideTileOut<WIDE_TILE>,
    ) {
        let _ = (self, rows, rb, b0, nb, whole);
        out.set_not_computed(t.n);
    }
}

/// What a wide kernel returns for the input rows of a tile: per row either
/// its [`WIDE_ROWS`] cells already rounded (`finished`, the values in
/// `rounded`: the chunk was the rows' only one and every cell's sum fit and
/// rounded to a normal binary32 — the value [`ExactAcc::finish`] gives the
/// cell), or its
/// [`ChunkSums`] per group (`sums[group][input row]`, not computed for a
/// finished row).
pub(crate) struct WideTileOut<const N: usize> {
    pub sums: [[ChunkSums; N]; WIDE_GROUPS],
    pub finished: [bool; N],
    pub rounded: [[F32; WIDE_ROWS]; N],
}

impl<const N: usize> WideTileOut<N> {
    /// Nothing computed: every chunk summed in `i128` by the caller.
    pub const NOT_COMPUTED: Self = WideTileOut {
        sums: [[ChunkSums::NOT_COMPUTED; N]; WIDE_GROUPS],
        finished: [false; N],
        rounded: [[F32::ZERO; WIDE_ROWS]; N],
    };

    /// Marks the first `n` input rows (at most `N`) not computed.
    #[inline(always)]
    pub fn set_not_computed(&mut self, n: usize) {
        for j in 0..n.min(N) {
            self.finished[j] = false;
            for group in self.sums.iter_mut() {
                group[j] = ChunkSums::NOT_COMPUTED;
            }
        }
    }
}
