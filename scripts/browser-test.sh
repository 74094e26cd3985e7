#!/usr/bin/env bash
# The browser verifier (web/, docs/BROWSER.md) in a real headless browser:
# Debian's chromium and chromedriver (installed here; no browser download),
# driven by selenium (a venv in the user cache). Builds the wasm module and
# the server, writes a real SmolLM2 transcript with `detllm generate
# --transcript`, starts `detllm serve`, and runs scripts/browser_test.py:
# verified / one token edited / another model / fetched from the server /
# a file:// copy, a screenshot of each verdict in target/browser-test/.
# First the module's SIMD128 kernel against the reference under Node's WASI.
#
# Usage: scripts/browser-test.sh   (honours CARGO_TARGET_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt chromium chromium-driver
model="$(bash scripts/fetch-model.sh)"
bash scripts/build-web.sh
cargo build --release -p detllm-cli --features serve
bin="${CARGO_TARGET_DIR:-target}/release/detllm"
venv="${XDG_CACHE_HOME:-$HOME/.cache}/detllm/venv-selenium"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "selenium==4.50.0" >&2
fi
out="${CARGO_TARGET_DIR:-target}/browser-test"
rm -rf "$out" && mkdir -p "$out"
out="$(cd "$out" && pwd)"

# A real transcript (24 sampled tokens; a seed above 2^53, which JSON.parse
# cannot hold, so the page must read it from the text) and its native verdict.
"$bin" generate --chat --prompt "Name three colours of the rainbow." --seed 12345678901234567 \
    --max-tokens 24 --transcript "$out/smollm2.json" >/dev/null 2>&1
native="$("$bin" verify "$out/smollm2.json" --model "$model")"
echo "native: $native"
native_digest="${native##* }"
# Native single-thread decode speed of the same run, for comparison.
"$bin" generate --chat --prompt "Name three colours of the rainbow." --seed 12345678901234567 \
    --max-tokens 24 --threads 1 2>&1 >/dev/null | grep -o 'decode [0-9.]* tok/s' | sed 's/^/native single-thread: /' || true

# The wasm32 SIMD128 Q4_1 kernel the module runs, equal to the reference
# (tests/kernels/simd128.rs) for wasm32-wasip1 with +simd128 under Node.
rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1
RUSTFLAGS="-C target-feature=+simd128" CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/wasm-simd128" \
    cargo test --release --features std --target wasm32-wasip1 --test kernels simd128::

# The server signs its receipts (docs/AUDIT.md); the page checks them with the public key.
rm -f "$out/server.key" "$out/server.key.pub"
"$bin" keygen "$out/server.key" >/dev/null
"$bin" serve --model "$model" --port 0 --max-seqs 1 --ctx 256 --verify-wasm web/wasm.js \
    --signing-key "$out/server.key" --audit-db none 2>"$out/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    url="$(grep -o 'http://[0-9.:]*' "$out/serve.log" | head -1 || true)"
    [ -n "$url" ] && break
    sleep 0.2
done
[ -n "$url" ] || { cat "$out/serve.log"; echo "detllm serve did not start" >&2; exit 1; }
"$venv/bin/python" scripts/browser_test.py "$url" "$model" "$out/smollm2.json" \
    tests/data/synth-transcript.json "$native_digest" "$out" "$(tr -d '[:space:]' <"$out/server.key.pub")"
