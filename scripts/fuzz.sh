#!/usr/bin/env bash
# Runs every cargo-fuzz target listed in fuzz/Cargo.toml for N seconds each
# (default 30) and fails on any crash. Installs cargo-fuzz if missing.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
rustup toolchain list | grep -q nightly || rustup toolchain install nightly --profile minimal
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^detllm-fuzz$')
# Seed corpora (generated, not committed): a failure to make them fails the run.
corpus_log="$(mktemp)"
if ! bash scripts/make-fuzz-corpus.sh >"$corpus_log" 2>&1; then
    cat "$corpus_log" >&2
    echo "scripts/make-fuzz-corpus.sh FAILED" >&2
    exit 1
fi
rm -f "$corpus_log"
cd fuzz
for t in $targets; do
    echo "== fuzz $t (${secs}s)"
    mkdir -p "corpus/$t"
    log="$(mktemp)"
    if ! cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=4096 >"$log" 2>&1; then
        tail -40 "$log" >&2
        echo "fuzz target $t FAILED" >&2
        exit 1
    fi
    grep -E "^Done" "$log" || tail -3 "$log"
    rm -f "$log"
done
