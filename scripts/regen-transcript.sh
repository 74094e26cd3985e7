#!/usr/bin/env bash
# Regenerates tests/data/synth-transcript.json, the committed audit transcript
# of the synthetic model (the determinism suite's `model.sampled` generation),
# then checks it: re-execution reproduces every step, and its final digest is
# the `model.sampled` golden that scripts/cross-test.sh recomputes on every
# target. Run scripts/regen-goldens.sh first if the profile changed.
set -euo pipefail
cd "$(dirname "$0")/.."
DETLLM_REGEN_TRANSCRIPT=1 cargo test --release --features std --test llamacpp -- --nocapture transcript_synth::committed_transcript_reexecutes |
    grep -E '^wrote ' || true
cargo test --release --features std --test llamacpp transcript_synth::
git --no-pager diff --stat -- tests/data/synth-transcript.json
