#!/usr/bin/env bash
# The portable K-quant row kernels (KernelPath::Portable, one input row,
# weights streamed from memory: the `kquant_m1/portable` criterion group)
# of two builds, alternated round by round so the shared machine's drift
# hits both: prints each round's GiB/s and the per-round ratio new/old, then
# the median ratio per benchmark.
#
#   scripts/bench-kquant-portable.sh BASE_REV [ROUNDS]   # build BASE_REV and the work tree
#   scripts/bench-kquant-portable.sh --bins OLD NEW [ROUNDS]   # two built bench binaries
#
# (BASE_REV is checked out in a temporary git worktree and built in
# target/bench-base/: the same target directory would give both builds one
# binary path.)
set -euo pipefail
cd "$(dirname "$0")/.."
filter=kquant_m1/portable
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

bench_bin() { # DIR TARGET_DIR -> path of the kernels bench binary built there
    cargo bench --manifest-path "$1/Cargo.toml" --target-dir "$2" --features std \
        --bench kernels --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "kernels" and m.get("executable"):
        print(m["executable"])'
}

if [ "${1:-}" = --bins ]; then
    old=$2 new=$3 rounds=${4:-3}
else
    base=${1:?usage: $0 BASE_REV [ROUNDS] | --bins OLD NEW [ROUNDS]} rounds=${2:-3}
    git worktree add --detach "$tmp/base" "$base" >/dev/null
    trap 'git worktree remove --force "$tmp/base"; rm -rf "$tmp"' EXIT
    cp "$(bench_bin "$tmp/base" "$PWD/target/bench-base")" "$tmp/old"
    cp "$(bench_bin "$PWD" "$PWD/target")" "$tmp/new"
    old=$tmp/old new=$tmp/new
fi

run() { # BIN OUT: "name GiB/s" lines
    "$1" --bench "$filter" 2>/dev/null | python3 -c 'import re,sys
name = None
for l in sys.stdin:
    m = re.match(r"^(kquant_m1/\S+)", l)
    if m: name = m.group(1)
    t = re.search(r"thrpt:\s+\[\S+ \S+ (\S+) (\S+)", l)
    if t and name:
        v = float(t.group(1)) / (1024 if t.group(2) == "MiB/s" else 1)
        print(name, v); name = None' >"$2"
}

for r in $(seq "$rounds"); do
    run "$old" "$tmp/old.$r"
    run "$new" "$tmp/new.$r"
done
python3 - "$tmp" "$rounds" <<'PY'
import sys, statistics
tmp, rounds = sys.argv[1], int(sys.argv[2])
def load(p):
    return dict((l.split()[0], float(l.split()[1])) for l in open(p))
olds = [load(f"{tmp}/old.{r}") for r in range(1, rounds + 1)]
news = [load(f"{tmp}/new.{r}") for r in range(1, rounds + 1)]
for name in olds[0]:
    o = [d[name] for d in olds]; n = [d[name] for d in news]
    ratios = [b / a for a, b in zip(o, n)]
    print(f"{name:40s} old {' '.join(f'{x:.2f}' for x in o)}  new {' '.join(f'{x:.2f}' for x in n)} GiB/s"
          f"  new/old median {statistics.median(ratios):.2f}x")
PY
