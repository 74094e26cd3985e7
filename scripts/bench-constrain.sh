#!/usr/bin/env bash
# Structured output's cost (issue #43): the mask time per token (p50/p99, as
# `generate` reports it on stderr) and the decode rate of a JSON-schema
# constrained `generate` against the same prompt unconstrained, pairs run
# alternately (the machine's absolute speed drifts; the ratio is the figure).
#
#   scripts/bench-constrain.sh [PAIRS]          (default 3 pairs per model)
#
# Models: SmolLM2-135M (49k vocabulary) and, if cached, Qwen2.5-Coder-0.5B
# (152k) from ~/.cache/detllm.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS="${1:-3}"
cargo build --release -q -p detllm-cli --features constrain
BIN=target/release/detllm
CACHE="${DETLLM_CACHE:-$HOME/.cache/detllm}"
SCHEMA=$(mktemp --suffix=.json)
trap 'rm -f "$SCHEMA"' EXIT
cat >"$SCHEMA" <<'JSON'
{"type":"object","properties":{"name":{"type":"string","maxLength":40},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"},"maxItems":4}},"required":["name","age","tags"],"additionalProperties":false}
JSON
PROMPT="Describe a fictional person as JSON with name, age and tags."
rate() { sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' <<<"$1"; }
for m in SmolLM2-135M-Instruct.Q4_1.gguf qwen2.5-coder-0.5b-instruct-q4_k_m.gguf; do
    [ -f "$CACHE/$m" ] || { echo "$m: not cached, skipped"; continue; }
    echo "== $m"
    for i in $(seq "$PAIRS"); do
        plain=$("$BIN" generate --model "$CACHE/$m" --chat --seed "$i" --max-tokens 64 \
            --prompt "$PROMPT" 2>&1 >/dev/null)
        cons=$("$BIN" generate --model "$CACHE/$m" --chat --seed "$i" --max-tokens 64 \
            --prompt "$PROMPT" --json-schema "$SCHEMA" 2>&1 >/dev/null)
        p=$(rate "$plain"); c=$(rate "$cons")
        masks=$(grep '^masks:' <<<"$cons")
        echo "pair $i: decode plain $p tok/s, constrained $c tok/s, ratio $(python3 -c "print(f'{$c/$p:.3f}')"); $masks"
    done
done
