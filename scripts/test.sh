#!/usr/bin/env bash
# The test command: installs what the tests need, fetches the model, runs them.
#   bash scripts/test.sh [cargo test args...]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt cmake
# Real-model tests need SmolLM2-135M-Instruct (skipped with a notice without it).
bash scripts/fetch-model.sh >/dev/null
features="cli"
# The SoftFloat oracle builds on x86_64 hosts only.
if [ "$(uname -m)" = x86_64 ]; then features="$features,oracle"; fi
cargo test --release --features "$features" "$@"
