#!/usr/bin/env bash
# Seed corpus for the gguf_parse fuzz target: small valid GGUF files that
# libFuzzer then mutates. Written to fuzz/corpus/gguf_parse/ (not committed).
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
