"""Reference runs of llama.cpp (via llama-cpp-python 0.3.36) on a GGUF model.

Usage: python3 scripts/llamacpp_ref.py MODEL.gguf OUT.json [threads...]
Records: tokenization of probe strings, greedy continuations of prompts,
and decode/prefill speed per thread count (llama.cpp's own timers). With
SPEED_ONLY=1 in the environment only the speed is measured.
tests/data/smollm2-llamacpp.json was written by it (see tests/data/README.md).
"""
import json, os, sys, time
from llama_cpp import Llama

model_path, out_path = sys.argv[1], sys.argv[2]
threads = [int(t) for t in sys.argv[3:]] or [1, 2]

PROBES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing  ",
    "numbers 1234567 and 3.14159, dates 2026-12-02",
    "unicode: café naïve 日本語 emoji 🙂 ümlaut",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x * 2\n\n\nprint(f(21))",
    "It's a can't-won't situation; they'd've said 'no'.",
]
PROMPTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time",
]

out = {"model": model_path.rsplit("/", 1)[-1], "tokenize": [], "greedy": [], "speed": []}
speed_only = os.environ.get("SPEED_ONLY") == "1"
llm = Llama(model_path=model_path, n_ctx=1024, n_threads=1, n_batch=512, logits_all=False, verbose=False, seed=0)
for s in [] if speed_only else PROBES:
    out["tokenize"].append({"text": s, "ids": llm.tokenize(s.encode(), add_bos=False, special=True)})
for p in [] if speed_only else PROMPTS:
    ids = llm.tokenize(p.encode(), add_bos=False, special=True)
    llm.reset()
    gen = []
    for tok in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0):
        if tok == llm.token_eos() or len(gen) >= 64:
            break
        gen.append(tok)
    out["greedy"].append({"prompt": p, "prompt_ids": ids, "ids": gen,
                          "text": llm.detokenize(gen).decode("utf-8", "replace")})
del llm

for nt in threads:
    llm = Llama(model_path=model_path, n_ctx=1024, n_threads=nt, n_threads_batch=nt, n_batch=512, verbose=False)
    ids = llm.tokenize(PROMPTS[0].encode(), add_bos=False, special=True)
    # warm-up
    llm.reset(); llm.eval(ids)
    best_dec, best_pre = 0.0, 0.0
    for _ in range(3):
        llm.reset()
        t0 = time.perf_counter(); llm.eval(ids); t1 = time.perf_counter()
        n = 0
        t2 = time.perf_counter()
        for tok in llm.generate([], top_k=1, temp=0.0, repeat_penalty=1.0, reset=False):
            n += 1
            if n >= 128: break
        t3 = time.perf_counter()
        best_pre = max(best_pre, len(ids) / (t1 - t0))
        best_dec = max(best_dec, n / (t3 - t2))
    out["speed"].append({"threads": nt, "prompt_tokens": len(ids), "prefill_tok_s": round(best_pre, 1), "decode_tok_s": round(best_dec, 1)})
    del llm
json.dump(out, open(out_path, "w"), indent=1, ensure_ascii=False)
print(json.dumps(out["speed"]))
for g in out["greedy"]:
    print(repr(g["text"][:200]))
