//! [`Parallel`]: how a host lends threads to the library.
//!
//! The library only ever splits *independent outputs* (disjoint chunks of an
//! output buffer, each computed by the same per-cell code); a reduction is
//! never split. So results do not depend on the implementation or on the
//! number of threads.
//!
//! Fallible work goes through [`Parallel::try_for_each_chunk`], whose error is
//! deterministic too: the lowest failing chunk's own error, whichever thread
//! ran it and whatever the thread count (tested below on [`Serial`], on a
//! backwards-running implementation and, with `std`, on the `ThreadPool`).

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};

/// A fallible chunk closure for [`Parallel::try_for_each_chunk`]:
/// `f(index, chunk)`.
pub type TryChunkFn<'f, T, E> = dyn Fn(usize, &mut [T]) -> Result<(), E> + Sync + 'f;

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

    /// [`Parallel::for_each_chunk`] with a fallible `f`: `Ok` when every
    /// chunk succeeded, otherwise the error of the **lowest-indexed** chunk
    /// that failed — the same error whatever the thread count or the order
    /// the chunks ran in.
    ///
    /// Every chunk runs once in the region; a failing chunk only raises a
    /// flag (an atomic store: the one atomic operation every target has —
    /// rv32imc and Cortex-M0 have no `fetch_min`). Only when the flag is up,
    /// the chunks run again in order on the calling thread up to the first
    /// error, which is returned (no lock, no allocation, no cost on success).
    /// So `f` must fail *reproducibly*: a chunk that failed fails the same
    /// way when run again on what it left — true of every closure that
    /// checks its inputs before it writes, as the library's kernels do.
    /// (Precisely, the result is that of running all chunks in order on the
    /// calling thread and stopping at the first error; for a reproducible
    /// `f` that is the lowest failing chunk's error.) The contents of `data`
    /// after an error are unspecified.
    fn try_for_each_chunk<T: Send, E>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: &TryChunkFn<'_, T, E>,
    ) -> Result<(), E> {
        let chunk_len = chunk_len.max(1);
        let failed = AtomicBool::new(false);
        self.for_each_chunk(data, chunk_len, &|i, chunk| {
            if f(i, chunk).is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        });
        if !failed.into_inner() {
            return Ok(());
        }
        for (i, chunk) in data.chunks_mut(chunk_len).enumerate() {
            f(i, chunk)?;
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize;

    /// Chunks in reverse order, so the lowest failing chunk fails last.
    struct Backwards;

    impl Parallel for Backwards {
        fn threads(&self) -> usize {
            3
        }

        fn for_each_chunk<T: Send>(
            &self,
            data: &mut [T],
            chunk_len: usize,
            f: &(dyn Fn(usize, &mut [T]) + Sync),
        ) {
            let n = data.chunks_mut(chunk_len.max(1)).count();
            for (i, c) in data.chunks_mut(chunk_len.max(1)).rev().enumerate() {
                f(n - 1 - i, c);
            }
        }
    }

    /// Over 40 elements in chunks of 3: marks every element of a chunk with
    /// its index plus one, failing with `Err(i)` on the chunks in `failing`
    /// (before writing). Returns the result and the marks.
    fn run<P: Parallel>(par: &P, failing: &[usize]) -> (Result<(), usize>, [usize; 40]) {
        let mut data = [0usize; 40];
        let r = par.try_for_each_chunk(&mut data, 3, &|i, c| {
            if failing.contains(&i) {
                return Err(i);
            }
            c.fill(i + 1);
            Ok(())
        });
        (r, data)
    }

    fn check<P: Parallel>(par: &P) {
        let (r, data) = run(par, &[]);
        assert_eq!(r, Ok(()));
        for (k, &v) in data.iter().enumerate() {
            assert_eq!(v, k / 3 + 1, "element {k} not written by its chunk");
        }
        for failing in [&[0][..], &[13], &[5, 2, 9], &[13, 12, 11], &[7, 1]] {
            let lowest = failing.iter().copied().min();
            for _ in 0..20 {
                assert_eq!(run(par, failing).0, Err(lowest.unwrap_or(0)));
            }
        }
    }

    #[test]
    fn lowest_failing_chunk_serial() {
        check(&Serial);
    }

    #[test]
    fn lowest_failing_chunk_backwards() {
        check(&Backwards);
    }

    #[cfg(feature = "std")]
    #[test]
    fn lowest_failing_chunk_thread_pool() {
        for threads in 1..=4 {
            let pool = ThreadPool::new(threads).unwrap_or_else(|e| panic!("pool: {e}"));
            check(&pool);
        }
    }

    /// A closure that fails only the first time it runs a chunk breaks the
    /// contract; the result is then that of running the chunks in order.
    #[test]
    fn unreproducible_failure_reruns_in_order() {
        let tries = AtomicUsize::new(0);
        let mut data = [0u8; 10];
        let r: Result<(), usize> = Backwards.try_for_each_chunk(&mut data, 2, &|i, c| {
            if i == 1 && tries.fetch_add(1, Ordering::Relaxed) == 0 {
                return Err(i);
            }
            c.fill(1);
            Ok(())
        });
        assert_eq!(r, Ok(()));
        assert_eq!(data, [1; 10]);
    }
}
