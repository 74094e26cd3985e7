#!/usr/bin/env python3
"""Golden token ids for random texts, from llama.cpp, for tests/tokenizer/golden.rs.

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

    python3 scripts/tokenizer_golden.py real qwen2.5-coder MODEL.gguf \
        tests/data/tokenizer_qwen2.5-coder.json
    python3 scripts/tokenizer_golden.py real gemma3 MODEL.gguf \
        tests/data/tokenizer_gemma3.json

`real` (for tests/tokenizer/real_models.rs) records, for a fixed probe set
(English, code, whitespace runs, digits, CJK, emoji, accented letters, the
model's special-token texts; each with parse_special off and on) and
REAL_N seeded random texts (the atoms above, the model's own special-token
texts), llama.cpp's ids with `add_special=true` (BOS as the model's
vocabulary says) and `llama_detokenize(ids, remove_special=true,
unparse_special=parse_special)` of them (hex), with `roundtrip` telling
whether that gives the text back.
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


REAL_SEED = 20261205
REAL_N = 300

SPECIALS = {
    "qwen2.5-coder": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>",
                      "<|fim_suffix|>", "<|repo_name|>", "<|file_sep|>", "<|im_start", "im_end|>",
                      "<|im_start|>user\nhi<|im_end|>\n"],
    "gemma3": ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<start_of_image>",
               "<start_of_turn", "end_of_turn>", "<start_of_turn>user\nhi<end_of_turn>\n"],
}

PROBES = [
    "Hello, world!", "The quick brown fox jumps over the lazy dog.", "I'm sure they'll say it's fine, isn't it?",
    "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n", "def f(x):\n\treturn x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { a[i] += b[i]; }", "<div class=\"x\">&amp;</div>",
    " ", "  ", "   leading", "trailing   ", "a\n\nb", "\n\n\n", "\t\t x", " \n \n ", "\r\n", "x    y",
    "0", "42", "1234567", "3.14159", "1,000,000", "2026-12-05", "0x1F",
    "日本語のテキスト", "中文字符测试", "한국어 텍스트", "混合 mixed テキスト",
    "🙂", "👍🏽 ok", "🇫🇷🇩🇪", "👨‍👩‍👧",
    "café naïve résumé", "Ünïcödé", "ß ǅ ﬁ", "e\u0301", "русский текст", "ελληνικά", "العربية", "हिन्दी",
    "", "\u00a0\u3000\u2028", "\ue000\U000f0000",
]


def real_atoms(model):
    specials = SPECIALS[model]
    return ATOMS[:-1] + [lambda r: r.choice(specials)]


def real(model, path, out):
    import ctypes
    import hashlib
    import json
    import llama_cpp
    from llama_cpp import Llama
    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)

    def detok(ids, special):
        arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
        cap = 64 + 32 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, cap, True, special)
        assert 0 <= n <= cap, n
        return buf.raw[:n]

    r = random.Random(REAL_SEED)
    atoms = real_atoms(model)
    texts = [(t, f) for t in PROBES + SPECIALS[model] for f in (False, True)]
    for _ in range(REAL_N):
        n = r.randint(1, 12)
        texts.append(("".join(r.choice(atoms)(r) for _ in range(n)), r.randint(0, 1) == 1))
    cases = []
    for text, special in texts:
        ids = llm.tokenize(text.encode(), add_bos=True, special=special)
        back = detok(ids, special)
        cases.append({"text": text, "parse_special": special, "ids": ids, "detok": back.hex(),
                      "roundtrip": back == text.encode()})
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha.update(chunk)
    doc = {
        "about": "llama.cpp's token ids (add_special=true) and llama_detokenize(remove_special=true, "
                 "unparse_special=parse_special) as hex, by scripts/tokenizer_golden.py real",
        "model": model,
        "model_file": path.rsplit("/", 1)[-1],
        "model_sha256": sha.hexdigest(),
        "llama_cpp_python": llama_cpp.__version__,
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "cases": cases,
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["gen"]:
        gen()
    elif sys.argv[1:2] == ["tokenize"] and len(sys.argv) == 3:
        tokenize(sys.argv[2])
    elif sys.argv[1:2] == ["real"] and len(sys.argv) == 5 and sys.argv[2] in SPECIALS:
        real(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
