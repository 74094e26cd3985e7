#!/usr/bin/env bash
# Batched decode end to end: two detllm binaries (OLD, NEW: e.g. a build of
# main and one of a branch) alternating pair by pair on one model.
#
#   bash scripts/bench-batch.sh OLD NEW MODEL [PAIRS] [BATCH]   (default 3 pairs, batch 8)
#
# Per pair, in alternating order (old first on even pairs): `detllm bench
# --batch BATCH` of each binary, then NEW's `--batch 1`. Prints each run's
# aggregate decode tok/s, the pair's NEW / OLD ratio at BATCH and NEW's
# aggregate at BATCH over its batch-1 rate, and the medians of both ratios.
# GEN (tokens per sequence, default 32), THREADS (default 1).
set -euo pipefail
old="$1"
new="$2"
model="$3"
pairs="${4:-3}"
batch="${5:-8}"
gen="${GEN:-32}"
threads="${THREADS:-1}"

# Aggregate decode tok/s of one `detllm bench` run.
agg() {
    "$1" bench --model "$model" --batch "$2" --gen-tokens "$gen" --reps 1 \
        --threads "$threads" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["aggregate_tok_s"])'
}

ratios=()
scaling=()
for p in $(seq 1 "$pairs"); do
    if ((p % 2 == 0)); then
        o=$(agg "$old" "$batch")
        n=$(agg "$new" "$batch")
    else
        n=$(agg "$new" "$batch")
        o=$(agg "$old" "$batch")
    fi
    one=$(agg "$new" 1)
    r=$(python3 -c "print(f'{$n / $o:.2f}')")
    s=$(python3 -c "print(f'{$n / $one:.2f}')")
    ratios+=("$r")
    scaling+=("$s")
    echo "pair $p: batch $batch old $o new $n tok/s (new/old $r); new batch 1 $one tok/s (batch $batch / batch 1 $s)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
echo "median new/old at batch $batch: $(median "${ratios[@]}"); median new batch $batch / batch 1: $(median "${scaling[@]}")"
