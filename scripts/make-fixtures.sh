#!/usr/bin/env bash
# Regenerate the GGUF test fixtures with the reference writer/reader (gguf-py).
#
#   tests/data/gguf_py_all_types.gguf   every value type, typed arrays, alignment 64,
#                                       five tensor types (1.3 KB, committed)
#   tests/data/gguf_py_all_types.manifest what gguf-py reads in it
#   tests/data/tiny-llama.manifest      what gguf-py reads in the tiny llama model
#   tests/data/smollm2-q4_1.manifest    what gguf-py reads in the real SmolLM2 model
#   $CACHE/tiny-llama.gguf              the tiny llama model written by
#                                       /work/shared/tools/make_tiny_gguf.py (330 KB:
#                                       too big to commit, so it lives in the cache;
#                                       tests skip it with a notice when absent)
#
# CACHE is ${XDG_CACHE_HOME:-$HOME/.cache}/detllm. The venv is $GGUF_VENV
# (default /work/.venv-gguf); it is created with `pip install gguf numpy` if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${GGUF_VENV:-/work/.venv-gguf}"
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q gguf numpy
fi
py="$venv/bin/python"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/detllm"
mkdir -p "$cache" tests/data

"$py" scripts/gguf_fixtures.py all-types tests/data/gguf_py_all_types.gguf
"$py" scripts/gguf_fixtures.py manifest tests/data/gguf_py_all_types.gguf > tests/data/gguf_py_all_types.manifest

tiny_tool="${TINY_GGUF_TOOL:-/work/shared/tools/make_tiny_gguf.py}"
if [ -f "$tiny_tool" ]; then
    "$py" "$tiny_tool" "$cache/tiny-llama.gguf" >/dev/null
    "$py" scripts/gguf_fixtures.py manifest "$cache/tiny-llama.gguf" > tests/data/tiny-llama.manifest
else
    echo "skipping the tiny llama model: $tiny_tool not found" >&2
fi

model="$(bash scripts/fetch-model.sh)"
"$py" scripts/gguf_fixtures.py manifest "$model" > tests/data/smollm2-q4_1.manifest
ls -l tests/data
