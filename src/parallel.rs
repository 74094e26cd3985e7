//! [`Parallel`]: how a host lends threads to the library.
//!
//! The library only ever splits *independent outputs* (disjoint chunks of an
//! output buffer, each computed by the same per-cell code); a reduction is
//! never split. So results do not depend on the implementation or on the
//! number of threads.

/// Runs a closure over disjoint chunks of a buffer, in any order, on any threads.
pub trait Parallel: Sync {
    /// Number of workers; used only to choose chunk sizes.
    fn threads(&self) -> usize;

    /// Calls `f(index, chunk)` once for each chunk of `data` split into
    /// pieces of `chunk_len` elements (the last may be shorter).
    fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    );
}

/// Everything on the calling thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct Serial;

impl Parallel for Serial {
    fn threads(&self) -> usize {
        1
    }

    fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        for (i, c) in data.chunks_mut(chunk_len.max(1)).enumerate() {
            f(i, c);
        }
    }
}

#[cfg(feature = "std")]
pub use crate::pool::ThreadPool;
