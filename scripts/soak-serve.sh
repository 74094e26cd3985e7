#!/usr/bin/env bash
# Soak (not in CI): CLIENTS clients against one `detllm serve` with the
# durable audit store and signed receipts for SECONDS (default 16 clients,
# 600 s); prints the server's resident memory every 10 s, the request and
# error counts, and the store's size per stored record.
#
#   bash scripts/soak-serve.sh [SECONDS] [CLIENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
clients="${2:-16}"
model="$(bash scripts/fetch-model.sh)"
cargo build --release -p detllm-cli --features serve >&2
detllm=target/release/detllm
work="$(mktemp -d)"
port=18192
"$detllm" keygen "$work/k.key" >/dev/null 2>&1
"$detllm" serve --model "$model" --port "$port" --threads 2 --max-seqs 8 --ctx 1024 \
    --audit-db "$work/audit.sqlite" --signing-key "$work/k.key" >"$work/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 1 300); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null && break
    sleep 0.2
done
status=0
python3 scripts/soak_serve.py "http://127.0.0.1:$port" "$pid" "$seconds" "$clients" || status=$?
records="$("$detllm" audit --db "$work/audit.sqlite" list | wc -l)"
bytes="$(cat "$work"/audit.sqlite* | wc -c)"
echo "store: $records records, $bytes bytes (with the WAL), $((bytes / (records > 0 ? records : 1))) bytes per record"
exit "$status"
