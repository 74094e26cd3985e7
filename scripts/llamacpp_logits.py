"""llama.cpp's logits on fixed SmolLM2 prompts, stored compactly for
tests/llamacpp/logits.rs (an independent check of detllm's forward pass).

Usage (once; the output is committed):
    python3 -m pip install llama-cpp-python==0.3.36
    (on a CPU with AMX, with CMAKE_ARGS set as LLAMACPP_CMAKE_ARGS in
    scripts/lib.sh: llama.cpp's AMX kernels crash on such machines)
    python3 scripts/llamacpp_logits.py MODEL.gguf tests/data/smollm2-llamacpp-logits.json

MODEL.gguf is SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh prints
its path); the script refuses another file (SHA-256 check).

For every prompt (tokenized by llama.cpp, special tokens parsed, no BOS) one
prefill with all logits, then for a few positions of it:
  top:     llama.cpp's TOP_K largest logits (id, value), best first;
  sample:  the logits of the fixed ids SAMPLE_IDS (every 1024th id: the
           body and the tail of the distribution, not only the head);
  mean, std: of the whole row (49152 logits);
  margin:  top-1 minus top-2.
Values are rounded to 1e-4 (far below the band the test allows).

Second mode, for tests/llamacpp/arch.rs (other architectures):
    python3 scripts/llamacpp_logits.py arch NAME MODEL.gguf OUT.json [N_TOKENS]
NAME is a label (gemma3-270m, qwen2.5-coder-0.5b, or a synthetic file's name).
The text tests/data/ppl-text.txt is tokenized by llama.cpp (BOS as the
vocabulary says), cut to N_TOKENS (default 256) and prefilled once with all
logits; for every row the golden keeps the TOP_K_ARCH largest logits (id,
value), the row's log-sum-exp (f64 over the whole row) and the logit of the
next token, so the test can compute llama.cpp's perplexity, an approximate
KL over the top-k plus the rest, and top-1 agreement without the tokenizer.
A file without a vocabulary (synthetic) is given fixed ids instead: SYNTH_IDS.
"""
import hashlib
import json
import os
import sys

import llama_cpp
from gguf_stub_vocab import with_stub_vocab
import numpy as np
from llama_cpp import Llama

MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
TOP_K = 16
SAMPLE_IDS = list(range(0, 49152, 1024))
PROMPTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n    return",
    "The three primary colors are red, yellow and",
]


def positions(n):
    """The positions whose rows are stored: a few spread over the prompt, and the last."""
    return sorted({max(0, n // 4 - 1), max(0, n // 2 - 1), max(0, 3 * n // 4 - 1), n - 1})


def r4(x):
    return round(float(x), 4)


def main(model_path, out_path):
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if sha != MODEL_SHA256:
        sys.exit(f"{model_path}: SHA-256 {sha}, expected {MODEL_SHA256}")
    llm = Llama(model_path=model_path, n_ctx=512, n_threads=1, n_batch=512,
                logits_all=True, verbose=False, seed=0)
    prompts = []
    for text in PROMPTS:
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        scores = np.array(llm.scores[: len(ids)], dtype=np.float64)
        rows = []
        for p in positions(len(ids)):
            row = scores[p]
            order = np.argsort(-row, kind="stable")
            rows.append({
                "pos": p,
                "top": [[int(i), r4(row[i])] for i in order[:TOP_K]],
                "sample": [r4(row[i]) for i in SAMPLE_IDS],
                "mean": r4(row.mean()),
                "std": r4(row.std()),
                "margin": r4(row[order[0]] - row[order[1]]),
            })
        prompts.append({"text": text, "ids": ids, "rows": rows})
    out = {
        "about": "llama.cpp's logits (top-k, a fixed sample of ids, row mean/std) on fixed prompts; "
                 "read by tests/llamacpp/logits.rs. Regenerate: python3 scripts/llamacpp_logits.py MODEL OUT "
                 "with llama-cpp-python==0.3.36.",
        "model_file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "model_sha256": sha,
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "settings": "n_ctx 512, n_batch 512, 1 thread, logits_all, F16 KV cache, no flash attention, "
                    "tokenize(add_bos=False, special=True), one prefill per prompt",
        "sample_ids": SAMPLE_IDS,
        "prompts": prompts,
    }
    with open(out_path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


TOP_K_ARCH = 24
TEXT = "tests/data/ppl-text.txt"


def synth_ids(vocab, n):
    """Fixed pseudo-random ids for a model without a tokenizer (an LCG)."""
    x, out = 12345, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % (1 << 31)
        out.append(x % vocab)
    return out


def main_arch(name, model_path, out_path, n_tokens=256):
    with open(model_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    if b"tokenizer.ggml.model" not in open(model_path, "rb").read(1 << 16):
        stub = out_path + ".vocab.gguf"
        with_stub_vocab(model_path, stub)
        model_path = stub
    llm = Llama(model_path=model_path, n_ctx=max(512, n_tokens), n_threads=2,
                n_batch=max(512, n_tokens), logits_all=True, verbose=False, seed=0)
    if llm.n_vocab() > 1000:
        with open(TEXT, "rb") as f:
            ids = llm.tokenize(f.read(), add_bos=True, special=False)[:n_tokens]
    else:
        ids = synth_ids(llm.n_vocab(), n_tokens)
    llm.reset()
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)], dtype=np.float64)
    rows = []
    for p, row in enumerate(scores):
        m = row.max()
        lse = m + np.log(np.exp(row - m).sum())
        order = np.argsort(-row, kind="stable")[:TOP_K_ARCH]
        rows.append({
            "top": [[int(i), r4(row[i])] for i in order],
            "lse": round(float(lse), 5),
            "next": r4(row[ids[p + 1]]) if p + 1 < len(ids) else None,
        })
    out = {
        "about": "llama.cpp's logits on a fixed text: per row the top-k (id, value), log-sum-exp and the "
                 "next token's logit; read by tests/llamacpp/arch.rs. Regenerate: python3 "
                 "scripts/llamacpp_logits.py arch NAME MODEL OUT [N] with llama-cpp-python==0.3.36.",
        "name": name,
        "model_sha256": sha,
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode().strip(),
        "settings": f"n_ctx {max(512, n_tokens)}, 2 threads, logits_all, F16 KV cache, one prefill",
        "ids": ids,
        "rows": rows,
    }
    with open(out_path, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")
    if model_path.endswith(".vocab.gguf"):
        os.remove(model_path)


if __name__ == "__main__":
    if sys.argv[1] == "arch":
        main_arch(sys.argv[2], sys.argv[3], sys.argv[4], *(int(a) for a in sys.argv[5:6]))
    else:
        main(sys.argv[1], sys.argv[2])
