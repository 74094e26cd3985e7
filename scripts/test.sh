#!/usr/bin/env bash
# The test command: installs what the tests need, then runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt cmake
features="std"
if [ "$(uname -m)" = x86_64 ]; then features="$features,oracle"; fi
cargo test --release --features "$features" "$@"
