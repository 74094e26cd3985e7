#!/usr/bin/env bash
# Every block format, detllm against llama.cpp on the same file, in the same
# run: a model of Llama-3.2-1B's widths (dim 2048, FFN 8192, 32 / 8 heads,
# 8 layers, 32,000 tokens; `examples/write_synth.rs llama1b`) with random
# weights, every matrix (embedding and tied head too) in one format — a
# shape and formats no test model has.
#
#   bash scripts/bench-formats.sh [ROUNDS] [THREADS]   (default 3 rounds, threads "1 2")
#
# FORMATS (default "Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K"; F16 and BF16 also
# work), PROMPT (prompt tokens, default 64), GEN (generated tokens, default 32).
# The files (0.3–1.2 GB each) are written once into
# ${XDG_CACHE_HOME:-$HOME/.cache}/detllm/bench-formats/ with a stand-in
# vocabulary (scripts/gguf_stub_vocab.py), which llama.cpp needs and detllm
# ignores (its bench feeds the ids 4, 5, 6, …; llama-bench its own).
# llama.cpp's llama-bench is built once from the llama-cpp-python 0.3.36
# source tree (scripts/lib.sh `llamacpp_tool`; LLAMA_BENCH overrides it).
#
# Per round, per format, per thread count: llama-bench (-r 1), then
# `detllm bench`, alternating. Prints per format the best decode and prefill
# tok/s of each over the rounds, their ratio, and the weight bytes detllm
# streams per second at decode (the file's size × tokens/s: every weight is
# read once per token).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
rounds="${1:-3}"
threads="${2:-1 2}"
formats="${FORMATS:-Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K}"
prompt="${PROMPT:-64}"
gen="${GEN:-32}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/detllm/bench-formats"
mkdir -p "$dir"

llama_bench="${LLAMA_BENCH:-$(llamacpp_tool llama-bench)}"
cargo build --quiet --release -p detllm-cli
cargo build --quiet --release --features std --example write_synth
detllm="${CARGO_TARGET_DIR:-target}/release/detllm"
write_synth="${CARGO_TARGET_DIR:-target}/release/examples/write_synth"

for f in $formats; do
    file="$dir/llama1b-$f.gguf"
    if [ ! -f "$file" ]; then
        echo "writing $file" >&2
        "$write_synth" llama1b "$f" "$file.bare"
        python3 scripts/gguf_stub_vocab.py "$file.bare" "$file.partial"
        rm "$file.bare"
        mv "$file.partial" "$file"
    fi
done

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
    for f in $formats; do
        file="$dir/llama1b-$f.gguf"
        for t in $threads; do
            echo "round $r/$rounds: $f, $t thread(s)" >&2
            "$llama_bench" -m "$file" -p "$prompt" -n "$gen" -t "$t" -r 1 -o json 2>/dev/null |
                python3 -c 'import json,sys
for row in json.load(sys.stdin):
    key = "prefill" if int(row["n_gen"]) == 0 else "decode"
    print(json.dumps({"engine": "llama.cpp", "format": sys.argv[1], "threads": int(sys.argv[2]),
                      key: float(row["avg_ts"]), "bytes": int(sys.argv[3])}))' "$f" "$t" "$(stat -c %s "$file")" >>"$out"
            "$detllm" bench --model "$file" --threads "$t" --prompt-tokens "$prompt" --gen-tokens "$gen" --json |
                python3 -c 'import json,sys
row = json.load(sys.stdin)
print(json.dumps({"engine": "detllm", "format": sys.argv[1], "threads": int(sys.argv[2]),
                  "prefill": row["prefill_tok_s"], "decode": row["decode_tok_s"], "bytes": int(sys.argv[3])}))' "$f" "$t" "$(stat -c %s "$file")" >>"$out"
        done
    done
done

python3 - "$out" "$rounds" "$prompt" "$gen" <<'PY'
import datetime, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(engine, fmt, t, key):
    v = [r[key] for r in rows if r["engine"] == engine and r["format"] == fmt and r["threads"] == t and key in r]
    return max(v) if v else float("nan")
print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; best of {sys.argv[2]} alternating rounds;"
      f" prefill {sys.argv[3]} tokens, decode {sys.argv[4]} tokens")
print("| format | threads | decode llama.cpp | decode detllm | ratio | detllm weight GB/s | prefill llama.cpp | prefill detllm | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for fmt in dict.fromkeys(r["format"] for r in rows):
    size = next(r["bytes"] for r in rows if r["format"] == fmt)
    for t in sorted({r["threads"] for r in rows}):
        ld, dd = best("llama.cpp", fmt, t, "decode"), best("detllm", fmt, t, "decode")
        lp, dp = best("llama.cpp", fmt, t, "prefill"), best("detllm", fmt, t, "prefill")
        print(f"| {fmt} | {t} | {ld:.1f} | {dd:.1f} | {dd/ld:.2f} | {dd*size/1e9:.1f} | {lp:.1f} | {dp:.1f} | {dp/lp:.2f} |")
PY
