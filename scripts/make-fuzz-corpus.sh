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
bash scripts/make-fixtures.sh cache
head -c 4096 "${XDG_CACHE_HOME:-$HOME/.cache}/detllm/tiny-llama.gguf" > "$out/tiny-header.gguf"
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

# float_ops: the same 8-byte special pairs (x, y as f32 bits), plus pairs of
# the soft float's own boundaries: signed zeros, subnormal/normal edges,
# ties at 0.5/1.5/2.5, 2^23/2^24 (integral from here), the i32 saturation
# edges 2^31, 2^124 and up (issue #2's round_ties_away bug), MAX, inf, NaNs
# (quiet, signalling, negative), the f16 edges (65504, the overflow tie
# 65520, 2^-14, 2^-24 and its half), bf16 ties and the bf16 overflow tie.
# Single pairs, and every pair of the list in files of eight pairs (the
# target reads consecutive 8-byte pairs; scripts/fuzz.sh's default max_len
# is the longest seed, so 64 bytes keeps runs short and executions fast).
mkdir -p fuzz/corpus/float_ops
cp fuzz/corpus/math_fns/pair-* fuzz/corpus/float_ops/
python3 - fuzz/corpus/float_ops <<'PY'
import struct, sys
out = sys.argv[1]
pos = [0x00000000, 0x00000001, 0x00000002, 0x00400000, 0x007FFFFF, 0x00800000, 0x00800001,
       0x01000000, 0x0C800000, 0x33000000, 0x33000001, 0x33800000, 0x387FC000, 0x38800000,
       0x3EFFFFFF, 0x3F000000, 0x3F000001, 0x3F7FFFFF, 0x3F800000, 0x3F800001, 0x3F808000,
       0x3F818000, 0x3FC00000, 0x40200000, 0x40400000, 0x4B000000, 0x4AFFFFFF, 0x4B000001,
       0x4B7FFFFF, 0x4B800000, 0x4EFFFFFF, 0x4F000000, 0x4F000001, 0x4F800000, 0x5F000000,
       0x477FE000, 0x477FEFFF, 0x477FF000, 0x47800000, 0x7D7FFFFF, 0x7D800000, 0x7D800001,
       0x7E000000, 0x7F000000, 0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0x7F800001,
       0x7FBFFFFF, 0x7FC00000, 0x7FC00001, 0x7FFFFFFF]
vals = pos + [v | 0x80000000 for v in pos]
n = 0
for i, x in enumerate(vals):
    for j, y in enumerate(vals):
        if (i * 7 + j * 3) % 11 == 0 or i == j or j == 0:
            open(f"{out}/edge-{n:04}", "wb").write(struct.pack("<II", x, y))
            n += 1
pairs = [struct.pack("<II", x, y) for x in vals for y in vals]
for k in range(0, len(pairs), 8):
    open(f"{out}/pairs-{k // 8:04}", "wb").write(b"".join(pairs[k:k + 8]))
PY

# tokenizer: texts for each vocabulary mode (scripts/tokenizer_fuzz_seeds.py).
python3 scripts/tokenizer_fuzz_seeds.py

# kv_ops: 300 operation schedules in the target's byte format, written by the
# reference-model test that also checks them.
mkdir -p fuzz/corpus/kv_ops
KV_FUZZ_CORPUS_DIR="$PWD/fuzz/corpus/kv_ops" cargo test -q --release --features std --test engine kv_model::schedules_cover >/dev/null

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
