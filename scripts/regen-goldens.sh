#!/usr/bin/env bash
# Regenerates tests/golden/*.txt (the determinism suite's digests) from a host
# run, then checks them against independent implementations (hardware IEEE
# binary32, the `half` crate, CORE-MATH; x86-64 hosts) and shows what changed.
#
# Run it after an intended numeric change (a new arithmetic profile), after a
# case is added to `detllm::selftest::CASES`, or when a module such as
# src/math lands its final implementation. Then run scripts/cross-test.sh to
# confirm every target produces the new values, and commit tests/golden/.
#
# The engine's golden digest (issue #6) is `model.schedules` in
# tests/golden/model.txt: SHA-256 over the logits bits of a fixed synthetic
# llama and qwen2 under a fixed token schedule (src/selftest/model.rs,
# docs/sections/engine.md); this script regenerates it with the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
echo "== writing tests/golden/*.txt from the host run"
DETLLM_REGEN_GOLDENS=1 cargo test --release --test determinism -- --nocapture --test-threads=1 |
    grep -E '^wrote '
echo "== checking the new goldens (and against the oracles where available)"
features=std
if [ "$(uname -m)" = x86_64 ]; then
    ensure_apt cmake
    features=std,oracle
fi
cargo test --release --features "$features" --test determinism
echo "== changes"
git --no-pager diff --stat -- tests/golden
git --no-pager diff --no-color -U0 -- tests/golden | grep -E '^[-+][a-z]' || echo "(no digest changed)"
