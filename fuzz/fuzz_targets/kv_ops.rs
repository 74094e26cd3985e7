//! Fuzz target `kv_ops`: arbitrary bytes → a cache shape (first 8 bytes) and
//! an operation schedule (8 bytes per op: new, append, multi-sequence step,
//! half-done step, fork, free, truncate, misuse with stale handles and bad
//! positions), applied to both caches in lockstep with the reference model of
//! `tests/support/kv.rs`. Any mismatch of contents, lengths, rooms, free
//! pages, error variants, a failing call that changes state, a write into a
//! shared page, a failed audit or a leaked page after freeing everything
//! panics (a crash).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/kv.rs"]
mod kv_support;

/// Longest schedule run per input (bounded work).
const MAX_OPS: usize = 256;

fuzz_target!(|data: &[u8]| {
    let Some((head, body)) = data.split_first_chunk::<8>() else {
        return;
    };
    let cfg = kv_support::config_from_bytes(head);
    let ops = kv_support::ops_from_bytes(&body[..body.len().min(8 * MAX_OPS)]);
    kv_support::with_paged(cfg, |mut h| h.run(&ops));
    kv_support::with_contiguous(cfg, |mut h| h.run(&ops));
});
