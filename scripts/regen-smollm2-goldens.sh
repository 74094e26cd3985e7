#!/usr/bin/env bash
# Regenerates tests/golden/smollm2.json (our greedy ids and digests for the
# reference prompts, and agreement with llama.cpp) from a run on this host.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-model.sh >/dev/null
DETLLM_REGEN=1 cargo test --release --features std --test llamacpp -- --nocapture smollm2_greedy::
git --no-pager diff --stat -- tests/golden/smollm2.json
