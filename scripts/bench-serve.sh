#!/usr/bin/env bash
# detllm serve against llama.cpp's llama-server under the same load, in one run,
# alternating: 16 concurrent streaming clients, a fixed prompt set, 128 output
# tokens each (sampled, a seed per request, end-of-generation ignored), then each
# request again alone. Prints, per server and round, aggregate output tokens/s,
# p50/p99 time to first token, p50 inter-token latency, and how many responses
# (text; logprobs) differ from their own solo run.
#
#   bash scripts/bench-serve.sh [ROUNDS] [THREADS]      (default 2 rounds, 2 threads)
#
# CLIENTS and TOKENS override 16 and 128. SCHEMA=FILE (a JSON schema, e.g.
# scripts/long-answer.schema.json: no answer can end within 128 tokens) runs each
# server twice per round, plain and with every request constrained by FILE
# (`response_format` json_schema), and prints each server's constrained / plain
# throughput per round: structured output's cost under load, and whether its
# constrained answers under load equal their solo runs.
#
# llama-server is built from the llama.cpp sources inside the llama-cpp-python
# 0.3.36 source distribution, into the user cache (scripts/lib.sh
# `llamacpp_tool`; ~10 minutes the first time). Model:
# SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model.sh); both servers run 8
# sequences in parallel (detllm --max-seqs 8, llama-server -np 8) with 2048
# positions each.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-2}"
threads="${2:-2}"
clients="${CLIENTS:-16}"
tokens="${TOKENS:-128}"
schema="${SCHEMA:-}"
model="$(bash scripts/fetch-model.sh)"
source scripts/lib.sh
llama_server="$(llamacpp_tool llama-server)"

cargo build --release -p detllm-cli --features serve >&2
detllm="${CARGO_TARGET_DIR:-target}/release/detllm"

wait_ready() { # PORT
    for _ in $(seq 1 600); do
        if curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    echo "server on port $1 did not become ready" >&2
    return 1
}

run_one() { # NAME PORT LOAD_FLAGS CMD...
    local name="$1" port="$2" load_flags="$3"
    shift 3
    "$@" >/tmp/bench-serve-"$name".log 2>&1 &
    local pid=$!
    wait_ready "$port"
    local served
    served="$(curl -s "http://127.0.0.1:$port/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"
    python3 scripts/serve_load.py "http://127.0.0.1:$port/v1" --clients "$clients" --tokens "$tokens" --model "$served" $load_flags |
        python3 -c "import json,sys; d=json.load(sys.stdin); d['server']='$name'; print(json.dumps(d))"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

results="$(mktemp)"
modes=("")
[ -n "$schema" ] && modes+=("--schema $schema")
for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds" >&2
    for flags in "${modes[@]}"; do
        tag=${flags:++schema}
        run_one "detllm$tag" 18181 "$flags" "$detllm" serve --model "$model" --port 18181 \
            --threads "$threads" --max-seqs 8 --ctx 2048 >>"$results"
        run_one "llama-server$tag" 18182 "$flags" "$llama_server" -m "$model" --port 18182 \
            -t "$threads" -np 8 -c $((8 * 2048)) >>"$results"
    done
done

python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'server':<20} {'tok/s':>7} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'text≠solo':>10} {'logprobs≠solo':>14}")
for r in rows:
    print(f"{r['server']:<20} {r['tok_s']:>7.1f} {r['ttft_p50_s']:>9.3f} {r['ttft_p99_s']:>9.3f} "
          f"{r['itl_p50_s']:>8.4f} {r['text_differs_from_solo']:>6}/{r['clients']:<3} "
          f"{r['logprobs_differ_from_solo']:>10}/{r['clients']}")
best = {}
for r in rows:
    b = best.setdefault(r["server"], r)
    if r["tok_s"] > b["tok_s"]:
        best[r["server"]] = r
if {"detllm", "llama-server"} <= best.keys():
    d, l = best["detllm"], best["llama-server"]
    print(f"best rounds: throughput detllm/llama-server = {d['tok_s'] / l['tok_s']:.2f}x, "
          f"p50 TTFT detllm/llama-server = {d['ttft_p50_s'] / l['ttft_p50_s']:.2f}x")
# With SCHEMA: each round's constrained / plain throughput, per server.
for name in ("detllm", "llama-server"):
    plain = [r for r in rows if r["server"] == name]
    cons = [r for r in rows if r["server"] == name + "+schema"]
    if cons:
        ratios = ", ".join(f"{c['tok_s'] / p['tok_s']:.2f}" for p, c in zip(plain, cons))
        print(f"{name}: constrained / plain throughput per round: {ratios}")
PY
rm -f "$results"
