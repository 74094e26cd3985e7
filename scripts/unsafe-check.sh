#!/usr/bin/env bash
# Checks the crate's `unsafe` with tools (docs/UNSAFE.md says which covers what):
#   loom  the thread pool's protocol, every interleaving (tests/pool_loom.rs)
#   miri  undefined behaviour, data races, out-of-bounds: tests/pool.rs, the
#         tokenizer's unit tests, the portable fast-path kernels
#         (tests/kernels_guarded.rs) and tests/kv_unit.rs (the rest of the
#         library's tests takes hours in Miri)
#   tsan  ThreadSanitizer over tests/pool.rs and the threaded engine test
#   inventory  every src file has `#![forbid(unsafe_code)]` or a row in
#         docs/UNSAFE.md's inventory with its count of `unsafe` (no build)
#   asan  AddressSanitizer over the SIMD fast paths with guarded inputs
#         (tests/kernels_guarded.rs)
#   all   all of them in turn (default)
# Installs what it needs (nightly with miri and rust-src) and fails on any
# finding. Each tool builds into its own target directory, so the normal
# build's cache is left alone.
# Measured from cold caches on the 2-core machine (CPU time; wall time was
# 3-6x that with the machine shared): loom build 2m10 + run 1 min; Miri
# sysroot 0m30, build 1m05, run 20 s; TSan build (with -Zbuild-std) 4m20,
# run about a minute; ASan build (-Zbuild-std) 4m05 CPU, 17m36 wall, run
# 0.2 s; the second Miri build (AVX2 features) 1m00 CPU, run 30 s.
# Warm (each tool rebuilds only detllm), `all` took 4m32 wall, 1m32 CPU,
# with the machine shared: inventory 0 s, loom 1m31, miri 2m20, tsan 25 s,
# asan 13 s.
#   bash scripts/unsafe-check.sh [inventory|loom|miri|tsan|asan|all]
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
host=x86_64-unknown-linux-gnu
start=$(date +%s)
stamp() { echo "== unsafe-check $1 ($(($(date +%s) - start)) s)"; }

ensure_nightly() {
    rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
    rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1
}

# The inventory (docs/UNSAFE.md): no build, a second or two. Every file under
# src/ has `#![forbid(unsafe_code)]` or a row in the inventory table whose
# `unsafe` count matches the file's code (comments stripped).
run_inventory() {
    stamp inventory
    local doc=docs/UNSAFE.md rows fails=0 f n listed
    rows=$(sed -n '/<!-- inventory begin -->/,/<!-- inventory end -->/p' "$doc" |
        sed -n 's/^| `\(\(cli\/\)\{0,1\}src\/[^`]*\)` | \([0-9][0-9]*\) |.*/\1 \3/p')
    if [ -z "$rows" ]; then
        echo "inventory: no rows between the inventory markers in $doc" >&2
        return 1
    fi
    while read -r f listed; do
        if [ ! -f "$f" ]; then
            echo "inventory: $doc lists $f, which does not exist: drop or rename its row" >&2
            fails=$((fails + 1))
        fi
    done <<<"$rows"
    while read -r f; do
        n=$(sed 's://.*$::' "$f" | { grep -ow unsafe || true; } | wc -l)
        listed=$(awk -v f="$f" '$1 == f { print $2 }' <<<"$rows")
        if [ -n "$listed" ]; then
            if [ "$n" -ne "$listed" ]; then
                echo "inventory: $f has $n \`unsafe\` in its code, $doc lists $listed:" \
                    "update its row (and the table of its items)" >&2
                fails=$((fails + 1))
            fi
        elif [ "$n" -ne 0 ]; then
            echo "inventory: $f has $n \`unsafe\` but no row in $doc's inventory:" \
                "add one (file, count, why) and its items' invariants and checks" >&2
            fails=$((fails + 1))
        elif ! grep -qx '#!\[forbid(unsafe_code)\]' "$f"; then
            echo "inventory: $f lacks \`#![forbid(unsafe_code)]\` after its module header" \
                "and has no row in $doc's inventory: add the line (or a row saying why not)" >&2
            fails=$((fails + 1))
        fi
    done < <(find src cli/src -name '*.rs' | LC_ALL=C sort)
    if [ "$fails" -ne 0 ]; then
        echo "inventory: $fails problem(s)" >&2
        return 1
    fi
    echo "inventory: $(find src cli/src -name '*.rs' | wc -l) files, $(wc -l <<<"$rows") listed, all consistent"
}

run_loom() {
    stamp loom
    # The three-thread models use a preemption bound of 2, the others 3
    # (tests/pool_loom.rs); LOOM_MAX_PREEMPTIONS overrides both.
    RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
        nice cargo test --release --features std --test pool_loom
}

run_miri() {
    stamp miri
    ensure_nightly
    cargo +nightly miri setup >/dev/null
    nice cargo +nightly miri test --features std --test pool
    # The library's portable paths: the tokenizer's unit tests finish in
    # minutes under Miri; the float, math and kernel tests loop over millions
    # of inputs and would take hours. (Under Miri the SIMD dispatch finds no
    # CPU features, so only portable code runs.)
    nice cargo +nightly miri test --features std --lib -- tokenizer::
    # The portable blocked matmul kernels of every fast-path format on
    # exact-size allocations (fewer, smaller cases under cfg(miri)) and the
    # KV cache scenarios.
    nice cargo +nightly miri test --features std --test kernels_guarded --test kv_unit
    # The hand-written AVX2 fused kernels too: with the AVX2 level's features
    # enabled at compile time, `simd::level()` is `Avx2` under Miri, which
    # interprets the intrinsics (AVX-512 ones it does not; ASan covers those).
    RUSTFLAGS="-Ctarget-feature=+avx2,+bmi1,+bmi2,+lzcnt" CARGO_TARGET_DIR=target/miri-avx2 \
        nice cargo +nightly miri test --features std --test kernels_guarded
}

run_tsan() {
    stamp tsan
    ensure_nightly
    # The threaded engine test: props::threads_change_nothing (tests/engine) runs the
    # engine's real regions on pools of 2 to 4 threads.
    RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1" \
        nice cargo +nightly test -Zbuild-std --target "$host" --features std \
        --test pool --test engine -- \
        chunks_match_serial panic_is_raised sleeping_workers quantize_par threads_change_nothing
}

run_asan() {
    stamp asan
    ensure_nightly
    # AddressSanitizer over the fast-path kernels with their inputs flush
    # against guard pages and in exact-size heap allocations
    # (tests/kernels_guarded.rs: every format, portable, AVX2 and the widest
    # build the CPU has). Its own target directory: the flags differ from
    # the TSan build's.
    RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
        ASAN_OPTIONS="halt_on_error=1:detect_leaks=1" CARGO_TARGET_DIR=target/asan \
        nice cargo +nightly test -Zbuild-std --target "$host" --features std \
        --test kernels_guarded
}

case "$what" in
    loom) run_loom ;;
    miri) run_miri ;;
    tsan) run_tsan ;;
    asan) run_asan ;;
    inventory) run_inventory ;;
    all) run_inventory; run_loom; run_miri; run_tsan; run_asan ;;
    *) echo "usage: $0 [inventory|loom|miri|tsan|asan|all]" >&2; exit 2 ;;
esac
stamp done
