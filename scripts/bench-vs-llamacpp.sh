#!/usr/bin/env bash
# detllm vs llama.cpp on the same machine, in the same run.
#
#   bash scripts/bench-vs-llamacpp.sh [MODEL] [ROUNDS]   (default smollm2, 3 rounds)
#
# MODEL is `smollm2` (SmolLM2-135M-Instruct Q4_1, scripts/fetch-model.sh),
# `qwen2.5-coder-0.5b`, `gemma3-270m` or `qwen2.5-coder-1.5b` (the Q4_K_M files
# of scripts/fetch-real-model.sh), or the path of a GGUF file.
#
# Sets up .venv-llamacpp/ (gitignored) with llama-cpp-python 0.3.36 and numpy
# if missing, or rebuilds it if it holds llama.cpp's AMX kernels (see
# scripts/lib.sh; compiling llama.cpp takes ~10+ minutes), builds
# `detllm` (release, package detllm-cli), then ALTERNATES, ROUNDS times:
#   llama.cpp via scripts/llamacpp_ref.py (threads 1 and 2; its own best
#   of 3 on a 37-token chat prompt and 128 generated tokens), and
#   `detllm bench --json` at threads 1 and 2 (batch 1) and batch 8.
# Each figure is the best over the rounds. Prints the table and the ratios
# detllm / llama.cpp (decode batch 1, each at its best thread count; prefill),
# detllm's aggregate decode at batch 8 vs its batch-1 rate, and peak RSS vs
# model file + KV cache. Both engines prefill the same number of tokens
# (detllm's --prompt-tokens is set to llama.cpp's prompt length).
# Environment: DETLLM_MODEL (the default model's path), LLAMACPP_REF (path of llamacpp_ref.py), GEN (tokens per bench, default 64),
# IK_LLAMA_BENCH: the llama-bench binary of an ik_llama.cpp build (llama.cpp's CPU-speed fork;
# `cmake -B build -DGGML_NATIVE=ON && cmake --build build --target llama-bench` in its source tree),
# which adds its columns to the table, run in the same rounds with run-time repacking (-rtr 1).
# LLAMA_BATCHED_BENCH: llama.cpp's llama-batched-bench (`source scripts/lib.sh; llamacpp_tool
# llama-batched-bench` builds it), which adds llama.cpp's 8-sequence aggregate decode (its S_TG
# at -npl 8, same prompt and generation lengths) beside detllm's batch 8, in the same rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
source scripts/lib.sh
case "${1:-}" in
"" | [0-9]*) which=smollm2 ;;
*) which="$1"; shift ;;
esac
rounds="${1:-3}"
gen="${GEN:-64}"
case "$which" in
smollm2) model="$(bash scripts/fetch-model.sh)" ;;
qwen2.5-coder-0.5b | gemma3-270m | qwen2.5-coder-1.5b) model="$(bash scripts/fetch-real-model.sh "$which")" ;;
*) model="$which"; [ -f "$model" ] || { echo "no such model file: $model" >&2; exit 2; } ;;
esac
echo "model: $model" >&2

# llamacpp_ref.py: $LLAMACPP_REF, else the repository's copy.
ref="${LLAMACPP_REF:-$repo/scripts/llamacpp_ref.py}"
[ -f "$ref" ] || { echo "$ref not found; set LLAMACPP_REF" >&2; exit 1; }

# The Python environment.
venv="$repo/.venv-llamacpp"
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || ensure_apt python3-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# llama-cpp-python's own dependencies, by name (it is installed --no-deps below,
# so that a rebuild never upgrades them); quick when present.
"$venv/bin/pip" install --quiet numpy typing_extensions diskcache jinja2 >&2
# An install built with llama.cpp's AMX kernels (before LLAMACPP_CFLAGS) is rebuilt.
if ! "$venv/bin/python" -c 'import llama_cpp' >/dev/null 2>&1 || llamacpp_has_amx "$venv"; then
    command -v cc >/dev/null 2>&1 && command -v cmake >/dev/null 2>&1 || ensure_apt build-essential cmake
    echo "installing llama-cpp-python 0.3.36 into $venv (compiles llama.cpp, ~10+ min)..." >&2
    CMAKE_ARGS="$LLAMACPP_CMAKE_ARGS" "$venv/bin/pip" install --quiet --no-cache-dir \
        --force-reinstall --no-deps llama-cpp-python==0.3.36 >&2
fi

cargo build --quiet --release -p detllm-cli
bin="${CARGO_TARGET_DIR:-$repo/target}/release/detllm"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds: llama.cpp" >&2
    SPEED_ONLY=1 "$venv/bin/python" "$ref" "$model" "$tmp/ref.json" 1 2 >/dev/null
    "$venv/bin/python" -c 'import json,sys; [print(json.dumps(s)) for s in json.load(open(sys.argv[1]))["speed"]]' \
        "$tmp/ref.json" >>"$tmp/llama.jsonl"
    n_prompt="$("$venv/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["speed"][0]["prompt_tokens"])' "$tmp/ref.json")"
    if [ -n "${IK_LLAMA_BENCH:-}" ]; then
        echo "round $r/$rounds: ik_llama.cpp" >&2
        "$IK_LLAMA_BENCH" -m "$model" -p "$n_prompt" -n "$gen" -t 1,2 -r 1 -rtr 1 -o json 2>/dev/null >"$tmp/ik-$r.json"
    fi
    if [ -n "${LLAMA_BATCHED_BENCH:-}" ]; then
        echo "round $r/$rounds: llama.cpp batched" >&2
        for t in 1 2; do
            "$LLAMA_BATCHED_BENCH" -m "$model" -c $((8 * (n_prompt + gen) + 64)) -npp "$n_prompt" -ntg "$gen" \
                -npl 8 -t "$t" --output-format jsonl 2>/dev/null | grep '^{' >>"$tmp/batched.jsonl"
        done
    fi
    echo "round $r/$rounds: detllm" >&2
    for t in 1 2; do
        "$bin" bench --model "$model" --threads "$t" --prompt-tokens "$n_prompt" --gen-tokens "$gen" --json >>"$tmp/detllm.jsonl"
    done
    for t in 2 1; do
        "$bin" bench --model "$model" --threads "$t" --batch 8 --prompt-tokens "$n_prompt" --gen-tokens "$gen" --json >>"$tmp/detllm.jsonl"
    done
done

"$venv/bin/python" - "$tmp/llama.jsonl" "$tmp/detllm.jsonl" "$(nproc)" "$(uname -m)" "$tmp" <<'PY'
import glob, json, os, sys, datetime
llama = [json.loads(l) for l in open(sys.argv[1])]
det = [json.loads(l) for l in open(sys.argv[2])]
# ik_llama.cpp's llama-bench rows: a prompt test (n_gen 0) or a generation test.
ik = []
for path in glob.glob(os.path.join(sys.argv[5], "ik-*.json")):
    for row in json.load(open(path)):
        key = "prefill_tok_s" if int(row["n_gen"]) == 0 else "decode_tok_s"
        ik.append({"threads": int(row["n_threads"]), key: float(row["avg_ts"])})
def best(rows, key, **where):
    v = [r[key] for r in rows if key in r and all(r.get(k) == x for k, x in where.items())]
    return max(v) if v else float("nan")
print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {sys.argv[4]}, {sys.argv[3]} cores; best of {len(llama)//2} rounds")
print(f"{'':24}{'llama.cpp t1':>14}{'llama.cpp t2':>14}{'detllm t1':>12}{'detllm t2':>12}"
      + (f"{'ik_llama t1':>14}{'ik_llama t2':>14}" if ik else ""))
for key, name in (("prefill_tok_s", "prefill tok/s"), ("decode_tok_s", "decode b1 tok/s")):
    l1, l2 = best(llama, key, threads=1), best(llama, key, threads=2)
    d1, d2 = best(det, key, threads=1, batch=1), best(det, key, threads=2, batch=1)
    ik_cols = f"{best(ik, key, threads=1):>14.1f}{best(ik, key, threads=2):>14.1f}" if ik else ""
    print(f"{name:24}{l1:>14.1f}{l2:>14.1f}{d1:>12.1f}{d2:>12.1f}{ik_cols}")
a1, a2 = best(det, "aggregate_tok_s", threads=1, batch=8), best(det, "aggregate_tok_s", threads=2, batch=8)
batched_path = os.path.join(sys.argv[5], "batched.jsonl")
batched = ([{"threads": int(r["n_threads"]), "aggregate_tok_s": float(r["speed_tg"])}
            for r in map(json.loads, open(batched_path)) if int(r["pl"]) == 8]
           if os.path.exists(batched_path) else [])
b1, b2 = (best(batched, "aggregate_tok_s", threads=t) for t in (1, 2)) if batched else ("", "")
fmt = lambda v: f"{v:>14.1f}" if v != "" else f"{'':>14}"
print(f"{'aggregate b8 tok/s':24}{fmt(b1)}{fmt(b2)}{a1:>12.1f}{a2:>12.1f}")
ratio = lambda k, src, b=None: max(best(src, k, threads=t, **({} if b is None else {"batch": b})) for t in (1, 2))
dec = ratio("decode_tok_s", det, 1) / ratio("decode_tok_s", llama)
pre = ratio("prefill_tok_s", det, 1) / ratio("prefill_tok_s", llama)
agg = max(a1, a2) / ratio("decode_tok_s", det, 1)
print(f"decode batch 1, best threads: detllm/llama.cpp = {dec:.2f}x   (target >= 1.0)")
for t in (1, 2):
    print(f"  at threads {t}: {best(det, 'decode_tok_s', threads=t, batch=1) / best(llama, 'decode_tok_s', threads=t):.2f}x")
print(f"prefill ({llama[0]['prompt_tokens']} tokens), best threads: detllm/llama.cpp = {pre:.2f}x   (target >= 1.0)")
for t in (1, 2):
    print(f"  at threads {t}: {best(det, 'prefill_tok_s', threads=t, batch=1) / best(llama, 'prefill_tok_s', threads=t):.2f}x")
if ik:
    for k, what in (("decode_tok_s", "decode batch 1"), ("prefill_tok_s", "prefill")):
        print(f"{what}, best threads: detllm/ik_llama.cpp = {ratio(k, det, 1) / ratio(k, ik):.2f}x")
print(f"aggregate decode batch 8 / detllm batch 1 = {agg:.2f}x   (target >= 3.0)")
if batched:
    print(f"aggregate decode batch 8, best threads: detllm/llama.cpp batched = {max(a1, a2) / max(b1, b2):.2f}x"
          f"   (target >= 1.5)")
for b in (1, 8):
    r = [x for x in det if x["batch"] == b][0]
    rss = max(x["peak_rss_bytes"] for x in det if x["batch"] == b)
    base = r["model_bytes"] + r.get("kv_bytes", 0)
    print(f"peak RSS batch {b}: {rss/2**20:.1f} MiB = {rss/base:.3f} x (model file {r['model_bytes']/2**20:.1f} MiB"
          f" + KV {r.get('kv_bytes', 0)/2**20:.1f} MiB)   (target <= 1.10)")
PY
