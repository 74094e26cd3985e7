#!/usr/bin/env bash
# Speed of the browser verifier against the native one, on the browser test's
# SmolLM2 transcript (24 sampled tokens): whole verifications (hash, load,
# prefill, decode) of the WebAssembly module under Node (V8, Chromium's
# engine; scripts/bench-web.mjs) and of `detllm verify --threads 1`, run
# alternately pair by pair (the machine's speed drifts), each pair's wall
# times and ratio printed; then the module's decode tokens/s (CPU time) and
# the native single-thread decode speed of `detllm bench`.
#
# Usage: scripts/bench-web.sh [PAIRS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs="${1:-5}"
model="$(bash scripts/fetch-model.sh)"
bash scripts/build-web.sh >/dev/null
cargo build --release -p detllm-cli >/dev/null
bin="${CARGO_TARGET_DIR:-target}/release/detllm"
out="${CARGO_TARGET_DIR:-target}/bench-web"
mkdir -p "$out"
t="$out/smollm2.json"
"$bin" generate --chat --prompt "Name three colours of the rainbow." --seed 12345678901234567 \
    --max-tokens 24 --transcript "$t" >/dev/null 2>&1
now() { date +%s.%N; }
for i in $(seq 1 "$pairs"); do
    a=$(now); node scripts/bench-web.mjs "$model" "$t" >"$out/wasm.txt"; b=$(now)
    "$bin" verify "$t" --model "$model" --threads 1 >/dev/null; c=$(now)
    python3 -c "a,b,c=$a,$b,$c; print(f'pair $i: wasm {b-a:.2f} s, native {c-b:.2f} s, wasm/native {(b-a)/(c-b):.2f}')"
done
echo "wasm: $(tail -1 "$out/wasm.txt")"
"$bin" bench --threads 1 --prompt-tokens 37 --gen-tokens 24 --model "$model" | grep -i decode || true
