#!/usr/bin/env python3
"""Compare src/tokenizer/unicode_table.rs with llama.cpp's codepoint flags.

    python3 scripts/check_unicode_tables.py PATH/TO/llama.cpp/src/unicode-data.cpp

Expands both tables over all 0x110000 codepoints and compares the class
detllm uses (letter, number, punctuation, mark, symbol, other) with the one
llama.cpp's `unicode_ranges_flags` gives (NUMBER 0x02, LETTER 0x04,
ACCENT_MARK 0x10, PUNCTUATION 0x20, SYMBOL 0x40; anything else is other).
Prints the number of differences and the first few; exits 1 if any. The
llama.cpp source tree is in the llama-cpp-python source distribution under
vendor/llama.cpp (see scripts/fetch-llamacpp-vocabs.sh).
"""
import re
import sys
from pathlib import Path

OTHER, LETTER, NUMBER, PUNCT, MARK, SYMBOL = 0, 1, 2, 3, 4, 5
NAMES = ["other", "letter", "number", "punctuation", "mark", "symbol"]


def llama_classes(path):
    text = Path(path).read_text()
    body = text.split("unicode_ranges_flags", 1)[1].split("};", 1)[0]
    ranges = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", body)]
    out = [OTHER] * 0x110000
    for i, (start, flags) in enumerate(ranges):
        end = ranges[i + 1][0] if i + 1 < len(ranges) else 0x110000
        k = (LETTER if flags & 0x04 else NUMBER if flags & 0x02 else PUNCT if flags & 0x20
             else MARK if flags & 0x10 else SYMBOL if flags & 0x40 else OTHER)
        out[start:end] = [k] * (end - start)
    return out


def detllm_classes():
    rs = (Path(__file__).resolve().parent.parent / "src/tokenizer/unicode_table.rs").read_text()
    body = rs.split("= [", 1)[1].split("];", 1)[0]
    runs = [int(x, 16) for x in re.findall(r"0x([0-9A-Fa-f]+)", body)]
    out = [OTHER] * 0x110000
    for i, r in enumerate(runs):
        start, k = r >> 3, r & 7
        end = runs[i + 1] >> 3 if i + 1 < len(runs) else 0x110000
        out[start:end] = [k] * (end - start)
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    a, b = llama_classes(sys.argv[1]), detllm_classes()
    diff = [cp for cp in range(0x110000) if a[cp] != b[cp]]
    print(f"{len(diff)} codepoints differ")
    for cp in diff[:20]:
        print(f"U+{cp:04X}: llama.cpp {NAMES[a[cp]]}, detllm {NAMES[b[cp]]}")
    sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
