#!/usr/bin/env bash
# Make the GGUF test fixtures with the reference writer/reader (gguf-py).
#
#   bash scripts/make-fixtures.sh          everything below
#   bash scripts/make-fixtures.sh cache    only the cache fixture (what
#                                          scripts/test.sh needs; fast once
#                                          the venv exists)
#
#   tests/data/gguf_py_all_types.gguf   every value type, typed arrays, alignment 64,
#                                       five tensor types (1.3 KB, committed)
#   tests/data/gguf_py_all_types.manifest what gguf-py reads in it
#   tests/data/tiny-llama.manifest      what gguf-py reads in the tiny llama model
#   tests/data/smollm2-q4_1.manifest    what gguf-py reads in the real SmolLM2 model
#   $CACHE/tiny-llama.gguf              the tiny llama model (`scripts/gguf_fixtures.py
#                                       tiny-llama`, 330 KB: made here rather than
#                                       committed; its manifest is committed, so a
#                                       generator that writes other bytes fails the test)
#
# CACHE is ${XDG_CACHE_HOME:-$HOME/.cache}/detllm. The Python environment is
# $GGUF_VENV (default $CACHE/venv-gguf), created with the pinned gguf-py and
# numpy below if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
GGUF_PY=gguf==0.19.0
NUMPY=numpy==2.4.6
mode="${1:-all}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/detllm"
venv="${GGUF_VENV:-$cache/venv-gguf}"
py="$venv/bin/python"
if ! "$py" -c 'import gguf, numpy' >/dev/null 2>&1; then
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || ensure_apt python3-venv
    [ -x "$py" ] || python3 -m venv "$venv"
    echo "installing $GGUF_PY $NUMPY into $venv..." >&2
    "$venv/bin/pip" install --quiet "$GGUF_PY" "$NUMPY" >&2
fi
mkdir -p "$cache" tests/data

# The tiny llama: written next to its final name, then moved (atomic).
"$py" scripts/gguf_fixtures.py tiny-llama "$cache/tiny-llama.gguf.partial"
mv "$cache/tiny-llama.gguf.partial" "$cache/tiny-llama.gguf"
[ "$mode" = cache ] && exit 0

"$py" scripts/gguf_fixtures.py all-types tests/data/gguf_py_all_types.gguf
"$py" scripts/gguf_fixtures.py manifest tests/data/gguf_py_all_types.gguf > tests/data/gguf_py_all_types.manifest
"$py" scripts/gguf_fixtures.py manifest "$cache/tiny-llama.gguf" > tests/data/tiny-llama.manifest
model="$(bash scripts/fetch-model.sh)"
"$py" scripts/gguf_fixtures.py manifest "$model" > tests/data/smollm2-q4_1.manifest
ls -l tests/data
