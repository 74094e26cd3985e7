#!/usr/bin/env bash
# What the durable audit store costs: aggregate output tokens/s of
# `detllm serve` with the store (`--audit-db FILE`, and `--signing-key`)
# against `--audit-db none`, under the load of scripts/bench-serve.sh
# (scripts/serve_load.py: CLIENTS concurrent streaming chat requests, TOKENS
# each). The two run alternately, pair by pair (the machine's speed drifts);
# prints each pair's tok/s and ratio, and the median ratio.
#
#   bash scripts/bench-audit.sh [PAIRS] [CLIENTS] [TOKENS]   (default 3 16 64)
set -euo pipefail
cd "$(dirname "$0")/.."
pairs="${1:-3}"
clients="${2:-16}"
tokens="${3:-64}"
model="$(bash scripts/fetch-model.sh)"
cargo build --release -p detllm-cli --features serve >&2
detllm=target/release/detllm
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$detllm" keygen "$work/k.key" >/dev/null 2>&1
port=18191

wait_ready() {
    for _ in $(seq 1 300); do
        if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    return 1
}

one() { # ARGS... ; prints tok/s
    "$detllm" serve --model "$model" --port "$port" --threads 2 --max-seqs 8 --ctx 1024 "$@" \
        >"$work/server.log" 2>&1 &
    local pid=$!
    wait_ready
    python3 scripts/serve_load.py "http://127.0.0.1:$port/v1" --clients "$clients" --tokens "$tokens" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tok_s"])'
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

ratios=()
for p in $(seq 1 "$pairs"); do
    on="$(one --audit-db "$work/audit.sqlite" --signing-key "$work/k.key")"
    off="$(one --audit-db none)"
    r="$(python3 -c "print(f'{$on / $off:.3f}')")"
    ratios+=("$r")
    echo "pair $p: store on $on tok/s, --audit-db none $off tok/s, on/off $r"
done
python3 -c "import statistics,sys; print(f'median on/off {statistics.median(map(float, sys.argv[1:])):.3f} over {len(sys.argv)-1} pairs')" "${ratios[@]}"
# Identical requests (the solo re-runs) have the same transcript id: one record each.
echo "store: $(cat "$work"/audit.sqlite* | wc -c) bytes with the WAL, $("$detllm" audit --db "$work/audit.sqlite" list | wc -l) distinct records"
