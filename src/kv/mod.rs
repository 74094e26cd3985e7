//! KV caches: contiguous and paged (copy-on-write forks).

use crate::F32;

/// Element type of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvType {
    /// IEEE binary16 bits (llama.cpp's default).
    F16,
    /// binary32.
    F32,
}

/// One cached row: `kv_dim` elements of one layer at one position.
#[derive(Clone, Copy, Debug)]
pub enum KvSlice<'a> {
    /// binary16 bits.
    F16(&'a [u16]),
    /// binary32 values.
    F32(&'a [F32]),
}

/// Read access to one layer of one sequence's cached keys and values.
pub trait KvRead: Sync {
    /// Key row at `pos` (`kv_dim` elements).
    fn k(&self, pos: usize) -> KvSlice<'_>;
    /// Value row at `pos` (`kv_dim` elements).
    fn v(&self, pos: usize) -> KvSlice<'_>;
}
