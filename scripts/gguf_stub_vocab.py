"""A copy of a GGUF file with a stand-in vocabulary, for llama.cpp, which
refuses a file without one: detllm's synthetic models
(`detllm::model::synth`, `examples/write_synth.rs`) carry no tokenizer.

    python3 scripts/gguf_stub_vocab.py IN.gguf OUT.gguf

Used by scripts/llamacpp_logits.py (arch mode) and scripts/bench-formats.sh.
Standard library only.
"""
import struct
import sys


def _gguf_str(b):
    return struct.pack("<Q", len(b)) + b


def _skip_value(buf, at, ty):
    """Offset after a GGUF value of type ty at buf[at:]."""
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    if ty in fixed:
        return at + fixed[ty]
    if ty == 8:
        (n,) = struct.unpack_from("<Q", buf, at)
        return at + 8 + n
    if ty == 9:
        et, n = struct.unpack_from("<IQ", buf, at)
        at += 12
        for _ in range(n):
            at = _skip_value(buf, at, et)
        return at
    raise ValueError(f"GGUF value type {ty}")


def with_stub_vocab(path, out_path):
    """A copy of the GGUF at path with a stand-in SentencePiece vocabulary
    (llama.cpp refuses a file without one): <unk>, <s>, </s>, <0x0A>, then
    t4, t5, ... up to the embedding's row count, scores 0. The tensor data
    and its offsets are unchanged; the ids the test feeds never go through
    this vocabulary."""
    buf = open(path, "rb").read()
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    at = 24
    for _ in range(n_kv):
        (kl,) = struct.unpack_from("<Q", buf, at)
        at += 8 + kl
        (ty,) = struct.unpack_from("<I", buf, at)
        at = _skip_value(buf, at + 4, ty)
    kv_end = at
    vocab = None
    for _ in range(n_tensors):
        (nl,) = struct.unpack_from("<Q", buf, at)
        name = buf[at + 8: at + 8 + nl]
        at += 8 + nl
        (nd,) = struct.unpack_from("<I", buf, at)
        dims = struct.unpack_from(f"<{nd}Q", buf, at + 4)
        at += 4 + 8 * nd + 4 + 8
        if name == b"token_embd.weight":
            vocab = dims[1]
    infos_end = at
    align = 32
    data_start = (infos_end + align - 1) // align * align
    toks = [b"<unk>", b"<s>", b"</s>", b"<0x0A>"] + [f"t{i}".encode() for i in range(4, vocab)]
    kinds = [2, 3, 3, 6] + [1] * (vocab - 4)
    new = _gguf_str(b"tokenizer.ggml.model") + struct.pack("<I", 8) + _gguf_str(b"llama")
    new += _gguf_str(b"tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, vocab)
    new += b"".join(_gguf_str(t) for t in toks)
    new += _gguf_str(b"tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, vocab) + b"\0" * 4 * vocab
    new += _gguf_str(b"tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, vocab)
    new += struct.pack(f"<{vocab}i", *kinds)
    head = struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 4)
    meta = head + buf[24:kv_end] + new + buf[kv_end:infos_end]
    meta += b"\0" * ((-len(meta)) % align)
    with open(out_path, "wb") as f:
        f.write(meta + buf[data_start:])


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with_stub_vocab(sys.argv[1], sys.argv[2])
