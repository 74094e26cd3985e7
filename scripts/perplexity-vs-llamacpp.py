#!/usr/bin/env python3
"""Perplexity of detllm and of llama.cpp on the same tokens, and how far
detllm's next-token distributions are from llama.cpp's.

    python3 scripts/perplexity-vs-llamacpp.py [--model M] [--file TEXT]
        [--ctx 512] [--chunks N] [--threads N] [--detllm BIN]

llama.cpp runs through llama-cpp-python 0.3.36 (installed with pip if it is
missing). Both sides follow llama-perplexity's recipe (see the header of
src/bin/detllm/cmd/perplexity.rs): the text is tokenized once with BOS if
the model adds one, cut into chunks of --ctx tokens whose first token is
replaced by BOS, and the second half of each chunk is scored. llama.cpp's
logits of every position come from `logits_all=True`; its perplexity is
computed here in numpy f64 over the same positions. detllm's figures come
from `detllm perplexity --json`, its logits from the hidden
`--dump-logits FILE` (raw little-endian f32 rows of the scored positions).

Printed: both perplexities and their ratio, the mean KL divergence
KL(llama.cpp || detllm) over the scored positions (llama.cpp is the base
distribution, as in llama-perplexity's --kl-divergence), and how often the
two agree on the most likely next token (top-1).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_model():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "detllm", "SmolLM2-135M-Instruct.Q4_1.gguf")


def ensure_llama_cpp():
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print("installing llama-cpp-python==0.3.36 ...", file=sys.stderr)
        # Without its AMX kernels (see LLAMACPP_CFLAGS in scripts/lib.sh).
        flags = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        env = dict(os.environ, CMAKE_ARGS=f'-DCMAKE_C_FLAGS="{flags}" -DCMAKE_CXX_FLAGS="{flags}"')
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir", "llama-cpp-python==0.3.36"],
            stdout=sys.stderr,
            env=env,
        )


def log_softmax(rows):
    """Row-wise log-softmax in f64."""
    import numpy as np

    rows = rows.astype(np.float64)
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


def ppl_stats(nll):
    """llama-perplexity's estimate: exp(mean) and its ± ."""
    import numpy as np

    n = len(nll)
    mean = float(np.mean(nll))
    var = float(np.mean(nll * nll)) - mean * mean
    ppl = float(np.exp(mean))
    err = float(np.sqrt(var / (n - 1))) * ppl if var > 0 and n > 1 else float("nan")
    return ppl, err, mean


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--file", default=os.path.join(ROOT, "tests", "data", "ppl-text.txt"))
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--detllm", default=os.path.join(ROOT, "target", "release", "detllm"))
    args = ap.parse_args()

    ensure_llama_cpp()
    import numpy as np
    from llama_cpp import Llama

    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    ctx = args.ctx
    llm = Llama(
        model_path=args.model,
        n_ctx=ctx,
        n_batch=ctx,
        n_ubatch=ctx,
        logits_all=True,
        n_threads=args.threads,
        verbose=False,
    )
    n_vocab = llm.n_vocab()
    bos = llm.token_bos()
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
    add_bos = len(tokens) > 0 and tokens[0] == bos

    # The same tokens on detllm's side?
    out = subprocess.run(
        [args.detllm, "tokenize", "--model", args.model, "--json", "--no-special", text],
        check=True, capture_output=True, text=True,
    ).stdout
    detllm_tokens = json.loads(out)
    if isinstance(detllm_tokens, dict):
        detllm_tokens = detllm_tokens.get("ids", detllm_tokens)
    same_tokens = list(detllm_tokens) == list(tokens)

    n_chunks = len(tokens) // ctx
    if args.chunks:
        n_chunks = min(n_chunks, args.chunks)
    if n_chunks < 2:
        sys.exit(f"{args.file}: {len(tokens)} tokens, need at least {2 * ctx} for --ctx {ctx}")
    first = ctx // 2
    per_chunk = ctx - 1 - first

    # llama.cpp: every position's logits, then the scored rows.
    ref_rows, targets = [], []
    for c in range(n_chunks):
        chunk = list(tokens[c * ctx:(c + 1) * ctx])
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        scores = np.array(llm.scores[:ctx], dtype=np.float32)
        ref_rows.append(scores[first:ctx - 1])
        targets.extend(tokens[c * ctx + first + 1:(c + 1) * ctx])
        print(f"\rllama.cpp: chunk {c + 1}/{n_chunks}", end="", file=sys.stderr)
    print(file=sys.stderr)
    ref = np.concatenate(ref_rows)
    targets = np.array(targets)
    ref_lp = log_softmax(ref)
    ref_nll = -ref_lp[np.arange(len(targets)), targets]
    ref_ppl, ref_err, _ = ppl_stats(ref_nll)

    # detllm: its own figures and its logits of the same positions.
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "logits.f32")
        cmd = [
            args.detllm, "perplexity", "--model", args.model, "--file", args.file,
            "--ctx", str(ctx), "--chunks", str(n_chunks), "--threads", str(args.threads),
            "--json", "--dump-logits", dump,
        ]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        got = np.fromfile(dump, dtype="<f4")
    if got.size != ref.size:
        sys.exit(f"detllm dumped {got.size} logits, expected {ref.size} ({ref.shape})")
    got = got.reshape(ref.shape)
    got_lp = log_softmax(got)
    got_nll = -got_lp[np.arange(len(targets)), targets]
    own_ppl, _, _ = ppl_stats(got_nll)

    ref_p = np.exp(ref_lp)
    kl = (ref_p * (ref_lp - got_lp)).sum(axis=1)
    top1 = float(np.mean(ref.argmax(axis=1) == got.argmax(axis=1)))

    print(f"model:           {os.path.basename(args.model)}")
    print(f"text:            {os.path.relpath(args.file)}: {len(tokens)} tokens "
          f"({'same' if same_tokens else 'DIFFERENT'} ids in detllm and llama.cpp)")
    print(f"chunks:          {n_chunks} of {ctx}, {n_chunks * per_chunk} tokens scored")
    print(f"llama.cpp ppl:   {ref_ppl:.4f} ± {ref_err:.5f}")
    print(f"detllm ppl:      {res['ppl']:.4f} ± {res['ppl_err']:.5f} "
          f"(f64 from its logits: {own_ppl:.4f}; {res['tokens']} tokens)")
    print(f"ratio:           {res['ppl'] / ref_ppl:.4f}")
    print(f"mean KL:         {kl.mean():.5f} (max {kl.max():.4f})")
    print(f"top-1 agreement: {100 * top1:.1f} %")
    return 0 if same_tokens else 1


if __name__ == "__main__":
    sys.exit(main())
