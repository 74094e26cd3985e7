#!/usr/bin/env bash
# The README's first command: fetch SmolLM2-135M-Instruct if missing, then run
# a chat-formatted greedy generation that streams text and prints tokens/s
# and the digest of all logits.
#   bash scripts/demo.sh ["your question"]
set -euo pipefail
cd "$(dirname "$0")/.."
model="$(bash scripts/fetch-model.sh)"
prompt="${1:-What is the boiling point of water?}"
cargo run --quiet --release -p detllm-cli -- generate --model "$model" --chat \
    --prompt "$prompt" --max-tokens 64 --temperature 0
