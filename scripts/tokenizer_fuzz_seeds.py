#!/usr/bin/env python3
"""Write the seed corpus of the `tokenizer` fuzz target to fuzz/corpus/tokenizer/.

Each seed is <mode byte><input>, as `check()` in tests/tokenizer/fuzz_check.rs
reads it: mode % 4 = 0/1 byte-level BPE (gpt-2 / smollm), 2 SentencePiece,
3 hostile vocabulary (tokens split by 0x01, then 0x00, then text);
mode & 0x10 = parse special tokens.
"""
import hashlib
import pathlib

TEXTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing  ",
    "numbers 1234567 and 3.14159, dates 2026-12-02",
    "unicode: café naïve 日本語 emoji 🙂 ümlaut",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x * 2\n\n\nprint(f(21))",
    "It's a can't-won't situation; they'd've said 'no'.",
    "\u3000\u00a0\u0085\u2028 \t\r\n",
    "<tool>ab<|endoftext|>",
]
HOSTILE = [
    b"a\x01b\x01ab\x00ab ab",
    "▁\x01a\x01▁a\x00 a a".encode(),
    b"<s>\x01</s>\x01x\x00<s>x</s>",
]

out = pathlib.Path(__file__).resolve().parent.parent / "fuzz" / "corpus" / "tokenizer"
out.mkdir(parents=True, exist_ok=True)
seeds = []
for t in TEXTS:
    for mode in (0x00, 0x01, 0x02, 0x10, 0x11):
        seeds.append(bytes([mode]) + t.encode())
seeds.append(b"\x00\xff\xfe\xc0\xaf invalid utf-8 \xed\xa0\x80")
for h in HOSTILE:
    for mode in (0x03, 0x23, 0x43, 0x97):
        seeds.append(bytes([mode]) + h)
for s in seeds:
    (out / hashlib.sha1(s).hexdigest()).write_bytes(s)
print(f"{len(seeds)} seeds in {out}")
