#!/usr/bin/env python3
"""Golden token ids for random texts, from llama.cpp, for tests/tokenizer_golden.rs.

    python3 scripts/tokenizer_golden.py gen > /tmp/texts.tsv
    python3 scripts/tokenizer_golden.py tokenize MODEL.gguf < /tmp/texts.tsv \
        > tests/data/tokenizer_llamacpp.tsv

`gen` writes deterministic pseudo-random texts (seeded), one per line as
`<hex of UTF-8 bytes>\t<parse_special 0|1>`; they mix ASCII words, digit runs,
punctuation, every whitespace kind, contractions (upper and lower case),
letters and numbers of many scripts (incl. Unicode 15.x additions),
combining marks, emoji, unassigned and private-use codepoints, and the
model's special-token texts. `tokenize` appends `\t<ids separated by spaces>`
using llama.cpp through llama-cpp-python (`Llama(vocab_only=True).tokenize(
text, add_bos=False, special=parse_special)`, i.e. `llama_tokenize(...,
add_special=false, parse_special)`).

The committed file was produced by the same `llama_tokenize` call on
llama.cpp commit c392e50 (2025-02-21, the snapshot LLAMACPP-FACTS.md
describes) through its C API.
"""
import random
import sys

SEED = 20261202
N = 1500

ATOMS = [
    # ASCII
    lambda r: r.choice(["the", "The", "HELLO", "a", "I", "x", "code", "fn", "def", "return"]),
    lambda r: "".join(r.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(r.randint(1, 12))),
    lambda r: "".join(r.choice("0123456789") for _ in range(r.randint(1, 9))),
    lambda r: "".join(r.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") for _ in range(r.randint(1, 4))),
    lambda r: r.choice(["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ll", "'x", "'"]),
    # whitespace of every kind, single and in runs
    lambda r: "".join(r.choice([" ", " ", " ", "\n", "\t", "\r", "\u000b", "\u000c", "\u0085", "\u00a0",
                                "\u1680", "\u2000", "\u2007", "\u200a", "\u2028", "\u2029", "\u202f",
                                "\u205f", "\u3000", "\u200b", "\u001c", "\u180e"]) for _ in range(r.randint(1, 4))),
    # letters of other scripts
    lambda r: r.choice(["café", "naïve", "Ünïcödé", "日本語", "中文字符", "한국어", "русский", "ελληνικά",
                        "עברית", "العربية", "हिन्दी", "ไทย", "ǅ", "ß", "ﬁ", "Ⓐ", "𝒜𝓑", "𐐀𐐨",
                        "\U0002ebf0\U0002ebf1", "\U00011f04", "\U0001e4d0", "ꟊ"]),
    # numbers beyond ASCII digits
    lambda r: r.choice(["٣٤٥", "१२३", "½", "Ⅻ", "①②", "²³", "𝟘𝟙", "\U00011f50\U00011f51", "〇", "፲"]),
    # marks, symbols, emoji, private use, unassigned, odd controls
    lambda r: r.choice(["e\u0301", "\u0301", "\u20dd", "€", "©", "∑", "→", "🙂", "👍🏽", "🇫🇷",
                        "\ue000", "\U000f0000", "\u0378", "\U0003ffff", "\ufffd", "\u00ad", "\u200d", "\u007f"]),
    # special-token texts (parsed or not, depending on the flag)
    lambda r: r.choice(["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>",
                        "<|im_start", "im_end|>", "<|im_start|><|im_end|>"]),
]


def gen():
    r = random.Random(SEED)
    for _ in range(N):
        n = r.randint(1, 14)
        text = "".join(r.choice(ATOMS)(r) for _ in range(n))
        flag = r.randint(0, 1)
        print(f"{text.encode().hex()}\t{flag}")


def tokenize(model):
    from llama_cpp import Llama
    llm = Llama(model_path=model, vocab_only=True, verbose=False)
    for line in sys.stdin:
        hx, flag = line.rstrip("\n").split("\t")[:2]
        ids = llm.tokenize(bytes.fromhex(hx), add_bos=False, special=flag == "1")
        print(f"{hx}\t{flag}\t{' '.join(map(str, ids))}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["gen"]:
        gen()
    elif sys.argv[1:2] == ["tokenize"] and len(sys.argv) == 3:
        tokenize(sys.argv[2])
    else:
        sys.exit(__doc__)
