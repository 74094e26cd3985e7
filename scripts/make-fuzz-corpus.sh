#!/usr/bin/env bash
# Seed corpora for the fuzz targets, written to fuzz/corpus/<target>/ (not
# committed; scripts/fuzz.sh calls this before fuzzing).
#
# gguf_parse: small valid GGUF files that libFuzzer then mutates.
#   all-types.gguf   every value type, typed arrays, alignment 64, five tensor
#                    types (the gguf-py fixture from tests/data)
#   v2-kv.gguf       version 2, a few keys, no tensors
#   tensors.gguf     three tensors (F32, Q8_0, Q4_1) and the default alignment
#   empty.gguf       header only
#   tiny-header.gguf the first 4 KiB of the tiny llama model (truncated: its
#                    metadata section, for mutations of real keys)
set -euo pipefail
cd "$(dirname "$0")/.."
out=fuzz/corpus/gguf_parse
mkdir -p "$out"
cp tests/data/gguf_py_all_types.gguf "$out/all-types.gguf"
python3 - "$out" <<'PY'
import struct, sys
out = sys.argv[1]
def s(b): return struct.pack("<Q", len(b)) + b
def kv(k, t, v): return s(k) + struct.pack("<I", t) + v
def header(v, nt, nkv): return b"GGUF" + struct.pack("<IQQ", v, nt, nkv)
def info(name, ne, ty, off):
    return s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", ty, off)
def pad(b, a=32): return b + b"\0" * (-len(b) % a)
open(f"{out}/v2-kv.gguf", "wb").write(
    header(2, 0, 4) + kv(b"general.architecture", 8, s(b"llama")) + kv(b"llama.block_count", 4, struct.pack("<I", 2))
    + kv(b"tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + s(b"a") + s(b"") + s(b"\xc4\xa0the"))
    + kv(b"tokenizer.ggml.scores", 9, struct.pack("<IQ", 6, 2) + struct.pack("<ff", 0.5, -1.0)))
body = header(3, 3, 1) + kv(b"general.name", 8, s(b"t")) + info(b"n", [8], 0, 0) + info(b"e", [32, 2], 8, 32) + info(b"q", [32], 3, 128)
open(f"{out}/tensors.gguf", "wb").write(pad(body) + bytes(range(32)) + bytes(68) + bytes(28) + bytes(range(20)))
open(f"{out}/empty.gguf", "wb").write(header(3, 0, 0))
PY
tiny="${XDG_CACHE_HOME:-$HOME/.cache}/detllm/tiny-llama.gguf"
if [ -f "$tiny" ]; then head -c 4096 "$tiny" > "$out/tiny-header.gguf"; fi
ls -l "$out"

# math_fns: 8-byte inputs (x, y as little-endian f32 bits): pairs of special
# values (zeros, subnormals, ones, the ranges' edges of exp/ln/sin/pow, inf, NaN).
python3 - fuzz/corpus/math_fns <<'PY'
import itertools, os, struct, sys
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
xs = [0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0xBF800000,
      0x40000000, 0x3F000000, 0x42B17218, 0x42B17217, 0xC2CFF1B5, 0xC2D00000, 0x43000000,
      0x40490FDB, 0x3FC90FDB, 0x4B000000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,
      0x7FC00000, 0x7F800001, 0xC1200000, 0x49742400]
for i, (x, y) in enumerate(itertools.product(xs[::2], xs[1::3])):
    open(f"{out}/pair-{i:03}", "wb").write(struct.pack("<II", x, y))
PY

# float_ops: the same 8-byte special pairs (x, y as f32 bits).
mkdir -p fuzz/corpus/float_ops
cp fuzz/corpus/math_fns/pair-* fuzz/corpus/float_ops/

# tokenizer: texts for each vocabulary mode (scripts/tokenizer_fuzz_seeds.py).
python3 scripts/tokenizer_fuzz_seeds.py

# kv_ops: 300 operation schedules in the target's byte format, written by the
# reference-model test that also checks them.
mkdir -p fuzz/corpus/kv_ops
KV_FUZZ_CORPUS_DIR="$PWD/fuzz/corpus/kv_ops" cargo test -q --release --features std --test kv_model schedules_cover >/dev/null

# engine_schedule: <n_seqs byte><page byte><tokens and schedule bytes>:
# one to four sequences, page sizes 1..8, short and long prompts.
python3 - fuzz/corpus/engine_schedule <<'PY'
import os, random, sys
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
rng = random.Random(20261203)
for i in range(40):
    n = 4 + rng.randrange(60)
    open(f"{out}/sched-{i:02}", "wb").write(bytes([i % 4, rng.randrange(256)] + [rng.randrange(256) for _ in range(n)]))
PY
ls fuzz/corpus | while read -r t; do echo "$t: $(ls "fuzz/corpus/$t" | wc -l) seeds"; done
