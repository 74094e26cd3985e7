//! loom model tests of the thread pool's protocol: every interleaving (up to
//! a preemption bound) of the caller and one or two workers over one or two
//! regions. Built only with `--cfg loom`, where the pool's primitives
//! (`src/pool/sync.rs`) are loom's:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release --features std --test pool_loom
//! ```
//!
//! What each model checks, in every interleaving loom explores:
//! * each chunk runs exactly once (a call count, and every element written by
//!   its own chunk through a loom cell, so two writers would be a data race);
//! * a region never outlives its borrow: the caller writes, right after
//!   `for_each_chunk` returns, a cell every chunk reads and the data every
//!   chunk wrote; loom reports a race if any worker access is not ordered
//!   before the return;
//! * no lost wake-up and no deadlock: a worker that starts late, spins, or is
//!   asleep when a region (or the pool's drop) is published either joins it
//!   while it is open or finds it closed and leaves it alone, or loom reports
//!   a deadlock; a worker that joined is waited for;
//! * a panic in a chunk, on whichever thread ran it, is re-raised on the
//!   caller, and the pool still runs the next region.
#![cfg(all(loom, feature = "std"))]

use detllm::parallel::{Parallel, ThreadPool};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `f` under loom with a preemption bound (3 unless `LOOM_MAX_PREEMPTIONS`
/// says otherwise): the pool's waits are loops, and an unbounded search over
/// three threads does not finish.
fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f)
}

/// [`model`] with another default preemption bound (for three threads).
fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(preemptions);
    }
    b.check(f);
}

/// A loom cell the region's closure may read from any thread. Accesses are
/// checked by loom: one not ordered against a write is reported as a race.
struct Shared<T>(UnsafeCell<T>);
// SAFETY: every access goes through loom's checked `with`/`with_mut`; the
// point of the tests is that loom finds no unordered pair.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T: Copy> Shared<T> {
    fn get(&self) -> T {
        // SAFETY: checked by loom (see the type).
        self.0.with(|p| unsafe { *p })
    }
    fn set(&self, v: T) {
        // SAFETY: checked by loom (see the type).
        self.0.with_mut(|p| unsafe { *p = v })
    }
}

const UNSET: usize = usize::MAX;

/// One region over `len` elements in chunks of `chunk_len`: asserts exactly
/// once per chunk and that nothing of the region is touched after it returns.
fn region(pool: &ThreadPool, len: usize, chunk_len: usize) {
    let mut data: Vec<UnsafeCell<usize>> = (0..len).map(|_| UnsafeCell::new(UNSET)).collect();
    let calls = AtomicUsize::new(0);
    // What the closure borrows from the caller's frame.
    let borrowed = Shared(UnsafeCell::new(true));
    pool.for_each_chunk(&mut data, chunk_len, &|i, chunk| {
        assert!(borrowed.get(), "chunk {i} ran after its region returned");
        calls.fetch_add(1, Relaxed);
        for v in chunk.iter() {
            // SAFETY: checked by loom: two threads on one chunk would race.
            v.with_mut(|p| unsafe {
                assert_eq!(*p, UNSET, "element written twice");
                *p = i;
            });
        }
    });
    // The borrow ends here: a worker still reading it would race this write.
    borrowed.set(false);
    for (k, v) in data.iter().enumerate() {
        // SAFETY: checked by loom: a chunk write not ordered before the
        // return would race this read.
        v.with(|p| assert_eq!(unsafe { *p }, k / chunk_len, "element {k}"));
    }
    assert_eq!(calls.load(Relaxed), len.div_ceil(chunk_len));
}

/// The caller and one worker, one region of two chunks: the worker may start
/// before or after the region is published, spin, or fall asleep first.
#[test]
fn one_worker_one_region() {
    model(|| {
        let pool = ThreadPool::new(2).unwrap();
        region(&pool, 2, 1);
    });
}

/// Two regions back to back: the generation handoff, the reset of the chunk
/// counter and of `done`, and a worker that sleeps between the regions.
#[test]
fn one_worker_two_regions() {
    model(|| {
        let pool = ThreadPool::new(2).unwrap();
        region(&pool, 2, 1);
        region(&pool, 3, 2);
    });
}

/// The caller and two workers sharing three chunks.
#[test]
fn two_workers_one_region() {
    model_bounded(2, || {
        let pool = ThreadPool::new(3).unwrap();
        region(&pool, 3, 1);
    });
}

/// A pool dropped without any region: a worker that starts late, spins, or
/// sleeps still sees `quit`, so the drop's join returns.
#[test]
fn drop_wakes_every_worker() {
    model_bounded(2, || {
        let pool = ThreadPool::new(3).unwrap();
        drop(pool);
    });
}

/// A panic in either chunk (on whichever thread runs it) reaches the caller
/// after the region is over, and the pool runs the next region.
#[test]
fn panic_is_reraised_on_the_caller() {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.to_string().contains("planted panic") {
            quiet(info)
        }
    }));
    for bad in [0usize, 1] {
        model(move || {
            let pool = ThreadPool::new(2).unwrap();
            let mut data = [0u8; 2];
            let r = catch_unwind(AssertUnwindSafe(|| {
                pool.for_each_chunk(&mut data, 1, &|i, _| {
                    if i == bad {
                        panic!("planted panic in chunk {i}");
                    }
                })
            }));
            assert!(r.is_err(), "the panic in chunk {bad} was swallowed");
            region(&pool, 2, 1);
        });
    }
}

/// A region's closure calling the pool again runs the inner region serially
/// on its own thread instead of waiting for the busy pool.
#[test]
fn nested_region_runs_serially() {
    model(|| {
        let pool = ThreadPool::new(2).unwrap();
        let mut outer = [0usize; 2];
        pool.for_each_chunk(&mut outer, 1, &|i, o| {
            let mut inner = [0usize; 2];
            pool.for_each_chunk(&mut inner, 1, &|j, c| c[0] = j + 1);
            o[0] = i + inner[0] + inner[1];
        });
        assert_eq!(outer, [3, 4]);
    });
}
