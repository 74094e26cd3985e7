#!/usr/bin/env python3
"""The f64 reference of the first row of a qwen2/llama GGUF, added to a golden.

Position 0 attends to itself alone (softmax over one key is 1), so its
forward pass needs no RoPE and no Q or K: per layer
    x += W_o · V(rms_norm(x))      (V's heads repeated over the query heads)
    x += W_down · (silu(W_gate · h) * W_up · h),  h = rms_norm(x)
then the output norm and the head. Weights are the exact values the GGUF
blocks encode (gguf-py's dequantize, in f64); activations are not quantized.
Neither detllm's arithmetic nor llama.cpp's is privileged against it.

Why: on Qwen2.5-Coder-1.5B the first row carries a massive activation
(|x| ≈ 3,700 in one channel at layer 25, against ≤ 30 elsewhere). There
llama.cpp's logits (activations quantized per 256 for its K-quant dots)
are 5.6 nats from this reference (KL over llama.cpp's top-24 and the rest),
its top-1 ranked 850th; detllm's (per-32 activation blocks) are 0.28 nats
from it, with the same top-3. tests/llamacpp/arch.rs leaves such a row out
of the comparison with llama.cpp and holds detllm to this reference there.

Usage (gguf-py; scripts/make-fixtures.sh makes the venv in the user cache):
    python3 scripts/f64_first_row.py MODEL.gguf GOLDEN.json
adds "f64_first_row": {"top": [[id, logit], ...24], "lse": ...} to GOLDEN
(the token is the golden's first id; the model's SHA-256 must match it).
"""
import hashlib
import json
import sys

import numpy as np
import gguf
from gguf import quants

TOP_K = 24


def main(model_path, golden_path):
    golden = json.load(open(golden_path))
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != golden["model_sha256"]:
        sys.exit(f"{model_path}: SHA-256 {sha} is not the golden's {golden['model_sha256']}")
    reader = gguf.GGUFReader(model_path)
    tensors = {t.name: t for t in reader.tensors}

    def weight(name):
        t = tensors[name]
        return quants.dequantize(t.data, t.tensor_type).astype(np.float64)

    def meta(key):
        field = reader.fields[key]
        return field.parts[field.data[0]][0]

    arch_field = reader.fields["general.architecture"]
    arch = bytes(arch_field.parts[arch_field.data[0]]).decode()
    n_layers = int(meta(f"{arch}.block_count"))
    eps = float(meta(f"{arch}.attention.layer_norm_rms_epsilon"))
    n_head = int(meta(f"{arch}.attention.head_count"))
    n_kv = int(meta(f"{arch}.attention.head_count_kv"))

    def rms_norm(x, w):
        return x / np.sqrt(np.mean(x * x) + eps) * w

    def linear(prefix, x):
        y = weight(prefix + ".weight") @ x
        return y + weight(prefix + ".bias") if prefix + ".bias" in tensors else y

    embeddings = weight("token_embd.weight")
    x = embeddings[golden["ids"][0]].copy()
    for layer in range(n_layers):
        p = f"blk.{layer}."
        v = linear(p + "attn_v", rms_norm(x, weight(p + "attn_norm.weight")))
        head_dim = v.shape[0] // n_kv
        group = n_head // n_kv
        heads = [v[(h // group) * head_dim:(h // group + 1) * head_dim] for h in range(n_head)]
        x = x + linear(p + "attn_output", np.concatenate(heads))
        h = rms_norm(x, weight(p + "ffn_norm.weight"))
        gate, up = linear(p + "ffn_gate", h), linear(p + "ffn_up", h)
        x = x + linear(p + "ffn_down", gate / (1 + np.exp(-gate)) * up)
    head = weight("output.weight") if "output.weight" in tensors else embeddings
    z = head @ rms_norm(x, weight("output_norm.weight"))
    m = z.max()
    order = np.argsort(-z, kind="stable")[:TOP_K]
    golden["f64_first_row"] = {
        "top": [[int(i), round(float(z[i]), 4)] for i in order],
        "lse": round(float(m + np.log(np.exp(z - m).sum())), 5),
    }
    with open(golden_path, "w") as f:
        json.dump(golden, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
