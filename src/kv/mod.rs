//! KV caches: contiguous and paged (copy-on-write forks).
//!
//! Two caches implement one trait, [`KvStore`], so the engine is generic over
//! the layout:
//!
//! * [`ContiguousCache`] — every sequence slot owns `max_seq_len` rows per
//!   layer; `fork` copies. Simplest layout, the reference for the paged one.
//! * [`PagedCache`] — a pool of fixed-size pages (`page_size` tokens of every
//!   layer's K and V) with a page table per sequence and a reference count per
//!   page; `fork` shares every page, and a shared page is copied before a
//!   sequence appends into it (copy-on-write).
//!
//! ## Life of a step (what makes a failing step harmless)
//!
//! 1. [`KvStore::reserve`] secures room for the new tokens of **every**
//!    sequence in the step: it allocates pages and privatizes shared tail
//!    pages. It is all-or-nothing: it first validates every request and counts
//!    the pages needed, and only then changes anything.
//! 2. [`KvStore::write`] stores K and V rows at positions in `[len, room)` —
//!    never at a committed position, and never into a shared page.
//! 3. [`KvStore::set_len`] commits the new length.
//!
//! A sequence is `(len, room)`: `len` committed rows (immutable until a
//! truncation) and `room ≥ len` positions secured by `reserve`. Rows in
//! `[len, room)` are writable; their contents are unspecified until written
//! (zeros, or rows inherited from a fork parent) but never another user's data.
//!
//! Invariant (checked by [`PagedCache::audit`] in tests and fuzzing): every
//! page covering a position in `[len, room)` of a sequence has reference
//! count 1, so a write can never reach another sequence's rows.
//!
//! ## Handles
//!
//! [`SeqId`] is a slot index plus a generation; freeing a sequence bumps its
//! slot's generation, so a stale handle is rejected with
//! [`Error::UnknownSequence`]. Generations wrap
//! after 2^32 reuses of one slot. A handle from another cache with a valid
//! index and generation is not detected.

#![forbid(unsafe_code)]

mod contiguous;
mod paged;
mod rows;
mod slots;

pub use contiguous::{ContiguousCache, ContiguousView};
pub use paged::{PagedCache, PagedView};

use crate::{Error, F32, Result};

/// Element type of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvType {
    /// IEEE binary16 bits (llama.cpp's default).
    F16,
    /// binary32.
    F32,
}

impl KvType {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            KvType::F16 => 2,
            KvType::F32 => 4,
        }
    }
}

/// One cached row: `kv_dim` elements of one layer at one position.
#[derive(Clone, Copy, Debug)]
pub enum KvSlice<'a> {
    /// binary16 bits.
    F16(&'a [u16]),
    /// binary32 values.
    F32(&'a [F32]),
}

impl KvSlice<'_> {
    /// Number of elements (0 for a position outside the readable range).
    pub fn len(&self) -> usize {
        match self {
            KvSlice::F16(s) => s.len(),
            KvSlice::F32(s) => s.len(),
        }
    }

    /// True for an empty row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to F32 (exact), `None` past the end.
    pub fn get(&self, i: usize) -> Option<F32> {
        match self {
            KvSlice::F16(s) => s.get(i).map(|&h| F32::from_f16_bits(h)),
            KvSlice::F32(s) => s.get(i).copied(),
        }
    }
}

/// Read access to one layer of one sequence's cached keys and values.
pub trait KvRead: Sync {
    /// Key row at `pos` (`kv_dim` elements).
    fn k(&self, pos: usize) -> KvSlice<'_>;
    /// Value row at `pos` (`kv_dim` elements).
    fn v(&self, pos: usize) -> KvSlice<'_>;
}

/// Shape and capacity of a cache. All limits are explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvConfig {
    /// Transformer layers.
    pub n_layers: usize,
    /// Elements per K (and per V) row: `n_kv_heads * head_dim`.
    pub kv_dim: usize,
    /// Element type of the stored rows.
    pub elem: KvType,
    /// Sequence slots (live sequences at once), at most `u32::MAX`.
    pub max_seqs: usize,
    /// Longest sequence in tokens.
    pub max_seq_len: usize,
    /// Tokens per page (paged cache only).
    pub page_size: usize,
    /// Pages in the pool (paged cache only), at most `u32::MAX`.
    pub n_pages: usize,
}

impl KvConfig {
    /// Pages one sequence may hold: `ceil(max_seq_len / page_size)`
    /// (0 for a zero page size, which `validate` rejects for the paged cache).
    pub const fn pages_per_seq(&self) -> usize {
        if self.page_size == 0 {
            0
        } else {
            self.max_seq_len.div_ceil(self.page_size)
        }
    }

    /// Checks the fields both caches use (the page fields are checked by the
    /// paged cache).
    ///
    /// Errors: [`Error::InvalidLimit`] naming the first field that is zero
    /// (`n_layers`, `kv_dim`, `max_seqs`, `max_seq_len`) or too large
    /// (`max_seqs` above `u32::MAX`).
    pub(crate) fn validate_common(&self) -> Result<()> {
        for (name, value) in [
            ("n_layers", self.n_layers),
            ("kv_dim", self.kv_dim),
            ("max_seqs", self.max_seqs),
            ("max_seq_len", self.max_seq_len),
        ] {
            if value == 0 {
                return Err(Error::InvalidLimit { name, value });
            }
        }
        if u32::try_from(self.max_seqs).is_err() {
            return Err(Error::InvalidLimit {
                name: "max_seqs",
                value: self.max_seqs,
            });
        }
        Ok(())
    }
}

/// Handle of a live sequence: slot index + generation. `Copy`; a handle of a
/// freed sequence is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct SeqId {
    index: u32,
    generation: u32,
}

impl SeqId {
    /// The slot index (stable while the sequence lives; reused after `free`).
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The slot generation this handle was issued for.
    pub const fn generation(self) -> u32 {
        self.generation
    }
}

/// One entry of a reservation batch: a sequence and how many new tokens it
/// needs room for. Implemented by `(SeqId, usize)` and by the arena-friendly
/// [`Reservation`].
pub trait ReserveReq: Copy {
    /// `(seq, n_new)`.
    fn req(self) -> (SeqId, usize);
}

impl ReserveReq for (SeqId, usize) {
    fn req(self) -> (SeqId, usize) {
        self
    }
}

/// A reservation entry that can live in an [`crate::Arena`] (`Pod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Reservation {
    /// The sequence.
    pub seq: SeqId,
    /// New tokens it needs room for.
    pub n_new: u32,
}

impl Reservation {
    /// `(seq, n_new)`; `n_new` saturates at `u32::MAX`.
    pub fn new(seq: SeqId, n_new: usize) -> Self {
        Reservation {
            seq,
            n_new: u32::try_from(n_new).unwrap_or(u32::MAX),
        }
    }
}

impl ReserveReq for Reservation {
    fn req(self) -> (SeqId, usize) {
        (self.seq, self.n_new as usize)
    }
}

/// A KV cache holding many sequences; both layouts implement it, and a given
/// sequence of calls gives the same results (and the same rows) on both.
pub trait KvStore {
    /// Read view of one layer of one sequence.
    type View<'s>: KvRead
    where
        Self: 's;

    /// The configuration the cache was built with.
    fn config(&self) -> &KvConfig;

    /// A new empty sequence (`len = room = 0`).
    /// Errors: [`Error::TooManySequences`] when every slot is live.
    fn new_seq(&mut self) -> Result<SeqId>;

    /// A new sequence with the same committed rows as `seq` (`len = room =
    /// len(seq)`). Paged: shares every page; contiguous: copies. Ends the
    /// parent's outstanding reservation (its `room` becomes its `len`).
    /// Errors: unknown `seq`, [`Error::TooManySequences`]; nothing changes.
    fn fork(&mut self, seq: SeqId) -> Result<SeqId>;

    /// Frees `seq`, returning its pages whose reference count reaches zero;
    /// its handle becomes stale.
    fn free(&mut self, seq: SeqId) -> Result<()>;

    /// Shortens `seq` to `len ≤ len(seq)` and ends its reservation
    /// (`room = len`), releasing pages past `len`. Other owners of a shared
    /// page are unaffected. Errors: [`Error::KvOutOfRange`] if `len` is longer.
    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()>;

    /// Committed length of `seq`.
    fn len(&self, seq: SeqId) -> Result<usize>;

    /// Positions secured for `seq` (`room ≥ len`); `[len, room)` is writable.
    fn room(&self, seq: SeqId) -> Result<usize>;

    /// Secures room for `n_new` more tokens for **every** `(seq, n_new)` in
    /// `reqs` (`room = max(room, len + n_new)`), privatizing shared pages that
    /// the new positions fall in (copy-on-write) — all or nothing: on `Err`
    /// nothing changed (lengths, rooms, pages, contents, reference counts).
    /// `n_new = 0` changes nothing. Errors: unknown sequence,
    /// [`Error::DuplicateSequence`], [`Error::BatchTooLarge`] (more entries
    /// than slots), [`Error::SequenceTooLong`], [`Error::KvPagesExhausted`].
    fn reserve<R: ReserveReq>(&mut self, reqs: &[R]) -> Result<()>;

    /// Writes K and V rows (`kv_dim` values each, converted to the element
    /// type: f16 rounds to nearest even) at `pos` of `layer`.
    /// `pos` must lie in `[len, room)` ([`Error::KvOutOfRange`] otherwise);
    /// the target page is private by construction (checked).
    fn write(&mut self, seq: SeqId, layer: usize, pos: usize, k: &[F32], v: &[F32]) -> Result<()>;

    /// Commits the length: `len(seq) ≤ len ≤ room(seq)`
    /// ([`Error::KvOutOfRange`] otherwise; use `truncate` to shorten).
    fn set_len(&mut self, seq: SeqId, len: usize) -> Result<()>;

    /// Read view of one layer: rows at positions `< room` are readable; other
    /// positions read as empty rows.
    fn view(&self, seq: SeqId, layer: usize) -> Result<Self::View<'_>>;
}
