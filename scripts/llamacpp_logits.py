"""llama.cpp's logits on fixed SmolLM2 prompts, stored compactly for
tests/llamacpp_logits.rs (an independent check of detllm's forward pass).

Usage (once; the output is committed):
    python3 -m pip install llama-cpp-python==0.3.36
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
"""
import hashlib
import json
import sys

import llama_cpp
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
                 "read by tests/llamacpp_logits.rs. Regenerate: python3 scripts/llamacpp_logits.py MODEL OUT "
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
