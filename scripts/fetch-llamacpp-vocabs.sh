#!/usr/bin/env bash
# Make sure llama.cpp's tokenizer test vocabularies and its example GBNF
# grammars are on disk and print their directory.
#
#   scripts/fetch-llamacpp-vocabs.sh
#
# llama.cpp ships, under models/, small vocabulary-only GGUF files
# (ggml-vocab-*.gguf) with the inputs and expected token ids of its
# `test-tokenizer-0` (ggml-vocab-*.gguf.inp / .out). They come from the
# llama-cpp-python 0.3.36 source distribution (vendor/llama.cpp/models/),
# downloaded with pip into a temporary directory; only those files are
# extracted into ${XDG_CACHE_HOME:-$HOME/.cache}/detllm/llamacpp-vocabs/
# (an empty XDG_CACHE_HOME counts as unset), and its grammars/*.gbnf into
# grammars/ there. Nothing is fetched when that directory is already
# complete. The path is printed on stdout; progress goes to stderr.
# tests/tokenizer/llamacpp_suite.rs reads it through DETLLM_LLAMACPP_VOCABS,
# cli/tests/constrain.rs the grammars through DETLLM_GBNF_DIR.
set -euo pipefail

VERSION=0.3.36
cache="${XDG_CACHE_HOME:-}"
[ -n "$cache" ] || cache="$HOME/.cache"
dir="$cache/detllm/llamacpp-vocabs"

if [ -f "$dir/.complete-$VERSION-grammars" ]; then
    echo "$dir"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "downloading the llama-cpp-python $VERSION source distribution..." >&2
python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$tmp" \
    "llama-cpp-python==$VERSION" >&2
sdist="$(ls "$tmp"/llama_cpp_python-"$VERSION".tar.gz)"
mkdir -p "$dir.partial"
python3 - "$sdist" "$dir.partial" <<'PY'
import os, re, sys, tarfile
sdist, out = sys.argv[1], sys.argv[2]
pat = re.compile(r"/vendor/llama\.cpp/(models/ggml-vocab-[A-Za-z0-9._-]+\.gguf(\.inp|\.out)?"
                 r"|grammars/[A-Za-z0-9._-]+\.gbnf)$")
os.makedirs(os.path.join(out, "grammars"), exist_ok=True)
n = 0
with tarfile.open(sdist) as tar:
    for m in tar:
        hit = pat.search(m.name)
        if not hit or not m.isfile():
            continue
        name = hit.group(1).removeprefix("models/")
        with tar.extractfile(m) as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
        n += 1
if not any(f.startswith("ggml-vocab-") for f in os.listdir(out)) or not os.listdir(os.path.join(out, "grammars")):
    sys.exit("no ggml-vocab-* or grammars/*.gbnf files in " + sdist)
print(f"extracted {n} files", file=sys.stderr)
PY
rm -rf "$dir"
mv "$dir.partial" "$dir"
touch "$dir/.complete-$VERSION-grammars"
echo "$dir"
