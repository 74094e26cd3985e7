//! The `std` thread pool: every chunk is visited exactly once, with its own
//! index and bounds, on any number of threads, and a panicking closure is
//! re-raised on the caller without breaking the pool.

use detllm::parallel::{Parallel, Serial, ThreadPool};
use proptest::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Proptest settings: under Miri (which interprets every instruction) a few
/// small cases, without the failure file Miri's isolation forbids.
fn config(cases: u32) -> ProptestConfig {
    if cfg!(miri) {
        ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::with_cases(2)
        }
    } else {
        ProptestConfig::with_cases(cases)
    }
}

/// Upper bounds of the generated sizes (smaller under Miri).
const MAX_LEN: usize = if cfg!(miri) { 50 } else { 3000 };
const MAX_CHUNK: usize = if cfg!(miri) { 20 } else { 400 };
const MAX_REPS: usize = if cfg!(miri) { 3 } else { 20 };
const MAX_BLOCKS: usize = if cfg!(miri) { 2 } else { 40 };

/// Marks every element with its chunk index, counting calls.
fn mark<P: Parallel>(par: &P, len: usize, chunk_len: usize) -> (Vec<usize>, usize) {
    let mut data = vec![usize::MAX; len];
    let calls = AtomicUsize::new(0);
    par.for_each_chunk(&mut data, chunk_len, &|i, c| {
        calls.fetch_add(1, Ordering::Relaxed);
        for v in c.iter_mut() {
            assert_eq!(*v, usize::MAX, "element visited twice");
            *v = i;
        }
    });
    (data, calls.into_inner())
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn chunks_match_serial(threads in 1usize..5, len in 0usize..MAX_LEN, chunk_len in 0usize..MAX_CHUNK, reps in 1usize..MAX_REPS) {
        let pool = ThreadPool::new(threads).unwrap();
        let want = mark(&Serial, len, chunk_len);
        prop_assert_eq!(want.1, len.div_ceil(chunk_len.max(1)));
        for _ in 0..reps {
            prop_assert_eq!(&mark(&pool, len, chunk_len), &want);
        }
    }
}

#[test]
fn panic_is_raised_on_the_caller_and_pool_survives() {
    let pool = ThreadPool::new(3).unwrap();
    for bad in [0usize, 7, 15] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut data = vec![0u32; 16];
            pool.for_each_chunk(&mut data, 1, &|i, c| {
                if i == bad {
                    panic!("chunk {i}");
                }
                c[0] = 1;
            });
        }));
        assert!(r.is_err(), "panic in chunk {bad} was swallowed");
        assert_eq!(mark(&pool, 100, 9), mark(&Serial, 100, 9));
    }
}

#[test]
fn sleeping_workers_wake_up() {
    let pool = ThreadPool::new(2).unwrap();
    assert_eq!(mark(&pool, 64, 8), mark(&Serial, 64, 8));
    // Longer than the spin budget, so the worker has gone to sleep.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let seen = std::sync::Mutex::new(std::collections::HashSet::new());
    for _ in 0..200 {
        let mut data = vec![0u8; 64];
        pool.for_each_chunk(&mut data, 1, &|_, _| {
            seen.lock().unwrap().insert(std::thread::current().id());
            std::thread::sleep(std::time::Duration::from_micros(50));
        });
        if seen.lock().unwrap().len() == 2 {
            return;
        }
    }
    panic!("the worker never took a chunk after sleeping");
}

proptest! {
    #![proptest_config(config(48))]

    /// Q8 quantization with the rows split over a pool is byte-identical to
    /// the serial conversion (quants, scales, chunk ranges, flags), for any
    /// number of rows, including more than one batch of 64.
    #[test]
    fn quantize_par_equals_quantize(seed in any::<u64>(), m in 1usize..140, nb in 1usize..MAX_BLOCKS,
                                    threads in 1usize..4) {
        use detllm::quant::{ActKind, QActs};
        use detllm::{Arena, F32};
        let n = 32 * nb;
        let mut s = seed | 1;
        let x: Vec<F32> = (0..m * n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                // Finite values over a wide range, some zeros.
                let e = (s >> 40) % 40;
                let v = f32::from_bits(((s as u32) & 0x807F_FFFF) | ((100 + e as u32) << 23));
                F32::from_bits(if s % 97 == 0 { 0 } else { v.to_bits() })
            })
            .collect();
        let bytes = QActs::bytes_for(ActKind::Q8, m, n).unwrap();
        let (mut b1, mut b2) = (vec![0u8; bytes], vec![0u8; bytes]);
        let (mut a1, mut a2) = (Arena::new(&mut b1), Arena::new(&mut b2));
        let mut q1 = QActs::new(&mut a1, ActKind::Q8, m, n).unwrap();
        let mut q2 = QActs::new(&mut a2, ActKind::Q8, m, n).unwrap();
        q1.quantize(&x).unwrap();
        let pool = ThreadPool::new(threads).unwrap();
        q2.quantize_par(&pool, &x).unwrap();
        prop_assert_eq!(q1.rows(), q2.rows());
        for r in 0..m {
            let (r1, r2) = (q1.row(r).unwrap(), q2.row(r).unwrap());
            prop_assert_eq!(r1.qs, r2.qs);
            prop_assert_eq!(r1.sc, r2.sc);
            prop_assert_eq!(r1.ch, r2.ch);
            prop_assert_eq!(r1.flags, r2.flags);
        }
    }
}
