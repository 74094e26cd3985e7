#!/usr/bin/env bash
# The exhaustive sweeps: every one of the 2^32 binary32 inputs of each
# one-argument function, against an independent oracle, bit for bit. The
# default test runs only sample them; these are the `#[ignore]`d tests and
# the stride switches that the module headers and docs/sections/{float,math}.md
# cite.
#
#   math   `exp`, `exp2`, `ln`, `sin`, `cos`, `tanh` vs CORE-MATH 1.4
#          (tests/math_{exp,ln,sincos,tanh}.rs, `*_exhaustive`);
#   lanes  the branch-free `exp_try` vs `F32::exp` on all 2^32 inputs
#          (src/math/exp_lanes.rs, DETLLM_EXP_LANES_STRIDE=1), and `gelu` on
#          every binary32 of [-10, 10] against the IEEE evaluation of the
#          same operations and its ulp bounds (tests/float/gelu.rs,
#          DETLLM_GELU_STRIDE=1);
#   float  `sqrt`, `to_f16`, `to_bf16`, the three `to_i32` roundings,
#          `from_i32` / `from_u32` vs Berkeley SoftFloat and the host's IEEE
#          hardware (tests/float/oracle.rs, `exhaustive_*`).
#
# They run in cargo's `test` profile (Cargo.toml: opt-level 3 with overflow
# checks and debug assertions), so every input is also a check that no
# integer arithmetic overflows; `CARGO_PROFILE=release` runs them in the
# release profile instead (no such checks; the timings in the docs).
# Each sweep spreads over the machine's threads (two for the math ones).
# Measured 2026-12-07 on the 2-core development VM in the test profile,
# shared (load average about 9) and from a cold build of the std,oracle
# features: 54 min in all, 0 mismatches. math 36m32 (exp2 180 s, exp 212 s,
# ln 642 s, sin 236 s, cos 255 s, tanh 367 s, the rest building), lanes
# 6m59 (exp_try 113 s, gelu 259 s), float 10m44 (the five sweeps 640 s).
# An idle machine does each math sweep in 1 to 2 minutes (release timings
# in docs/sections/math.md). The oracle feature compiles the CORE-MATH and
# SoftFloat C sources (needs cmake). Fails on any mismatch; each sweep prints
# its count and time.
#
#   bash scripts/exhaustive.sh [math|lanes|float|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt cmake
what="${1:-all}"
profile=()
[ "${CARGO_PROFILE:-test}" = release ] && profile=(--release)

run_math() {
    echo "== math: exp, exp2, ln, sin, cos, tanh vs CORE-MATH, all 2^32 each"
    cargo test "${profile[@]}" --features std,oracle \
        --test float -- --ignored --nocapture --test-threads 1 exp:: ln:: sincos:: tanh::
}

run_lanes() {
    echo "== lanes: exp_try vs F32::exp, all 2^32; gelu on every binary32 of [-10, 10]"
    DETLLM_EXP_LANES_STRIDE=1 cargo test "${profile[@]}" --features std,oracle --lib exp_lanes -- --nocapture
    DETLLM_GELU_STRIDE=1 cargo test "${profile[@]}" --features std,oracle --test float -- --nocapture gelu::
}

run_float() {
    echo "== float: sqrt, to_f16, to_bf16, to_i32 (3 modes), from_i32/u32 vs SoftFloat and hardware, all 2^32 each"
    cargo test "${profile[@]}" --features std,oracle --test float \
        -- --ignored --nocapture --test-threads 1 oracle::exhaustive_
}

# Runs `run_$1` and prints how long it took (building included).
timed() {
    local t0=$SECONDS
    "run_$1"
    echo "== $1: clean, $(( (SECONDS - t0) / 60 ))m$(( (SECONDS - t0) % 60 ))s"
}

start=$SECONDS
case "$what" in
    math | lanes | float) timed "$what" ;;
    all) timed math; timed lanes; timed float ;;
    *) echo "usage: $0 [math|lanes|float|all]" >&2; exit 2 ;;
esac
echo "exhaustive ($what): all clean, $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
