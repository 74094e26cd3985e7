#!/usr/bin/env python3
"""Speculative vs plain decoding, alternating pair by pair, on a prompt set.

For every prompt of scripts/spec-prompts/ (or --prompts DIR) it runs
`detllm generate --chat --temperature 0` once plainly and once with the
speculation flags, in alternating order (plain first on even pairs, speculative
first on odd ones), checks that both printed the same digest (speculation
changes no bit), and reports each pair's decode-speed ratio (speculative /
plain, the in-process decode tok/s both runs print), the geometric mean of
the ratios, and the acceptance rate (accepted / drafted tokens).

With --llama-server PATH (llama.cpp's server; `source scripts/lib.sh;
llamacpp_tool llama-server` builds it) the same prompts also go to two
llama-server processes on the same model, one plain and one started with
--llama-spec's flags (default an n-gram lookup, `--spec-type ngram-simple`;
a draft model: `--llama-spec '-md DRAFT.gguf'`), temperature 0, in the same
alternating pairs: their generation tok/s side by side, and how many of
llama.cpp's answers changed when it speculated.

Example (the figures in docs/SPECULATIVE.md):
  python3 scripts/spec-bench.py --model ~/.cache/detllm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --spec '--speculate ngram'
  python3 scripts/spec-bench.py --model ~/.cache/detllm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
      --spec '--speculate draft --draft-model ~/.cache/detllm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf'
"""
import argparse
import atexit
import http.client
import json
import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(binary, model, prompt, max_tokens, threads, extra):
    cmd = [binary, "generate", "--model", model, "--chat", "--temperature", "0",
           "--max-tokens", str(max_tokens), "--threads", str(threads),
           "--prompt-file", prompt] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    err = p.stderr
    tok_s = float(re.search(r"decode ([0-9.]+) tok/s", err).group(1))
    digest = re.search(r"digest ([0-9a-f]{64})", err).group(1)
    gen = int(re.search(r"(\d+) generated\]", err).group(1))
    spec = re.search(r"(\d+) decode steps, (\d+) drafted, (\d+) accepted", err)
    drafted, accepted = (int(spec.group(2)), int(spec.group(3))) if spec else (0, 0)
    return {"tok_s": tok_s, "digest": digest, "out": p.stdout, "gen": gen,
            "drafted": drafted, "accepted": accepted}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A llama-server process on `model` with `extra` flags, on a free port."""

    def __init__(self, binary, model, threads, extra):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "-m", model, "--port", str(self.port), "-t", str(threads), "-c", "4096",
             "-np", "1", "--no-webui"] + extra,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        for _ in range(600):
            if self.proc.poll() is not None:
                sys.exit(f"llama-server {' '.join(extra)} exited with {self.proc.returncode}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        sys.exit("llama-server did not become healthy")

    def chat(self, prompt, max_tokens):
        with open(prompt) as f:
            text = f.read()
        body = {"messages": [{"role": "user", "content": text}], "temperature": 0,
                "max_tokens": max_tokens, "seed": 0}
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        v = json.loads(r.read())
        if r.status != 200:
            sys.exit(f"llama-server: {r.status} {v}")
        t = v.get("timings", {})
        return {"tok_s": t.get("predicted_per_second", 0.0), "out": v["choices"][0]["message"]["content"],
                "drafted": t.get("draft_n", 0), "accepted": t.get("draft_n_accepted", 0)}

    def close(self):
        self.proc.kill()
        self.proc.wait()


def llama_pair(servers, prompt, max_tokens, pair):
    """Both llama-servers on `prompt`, in alternating order: (plain, spec)."""
    order = ["plain", "spec"] if pair % 2 == 0 else ["spec", "plain"]
    res = {name: servers[name].chat(prompt, max_tokens) for name in order}
    return res["plain"], res["spec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--spec", default="--speculate ngram", help="speculation flags")
    ap.add_argument("--prompts", default=os.path.join(HERE, "spec-prompts"))
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "target", "release", "detllm"))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--llama-server", help="llama.cpp's llama-server, to run beside detllm")
    ap.add_argument("--llama-spec", default="--spec-type ngram-simple",
                    help="llama-server's speculation flags")
    a = ap.parse_args()
    model = os.path.expanduser(a.model)
    extra = [os.path.expanduser(w) for w in shlex.split(a.spec)]
    prompts = sorted(os.path.join(a.prompts, f) for f in os.listdir(a.prompts) if f.endswith(".txt"))
    ratios, drafted, accepted, pair = [], 0, 0, 0
    servers, llama_ratios, llama_changed, llama_drafted, llama_accepted = None, [], 0, 0, 0
    if a.llama_server:
        llama_extra = [os.path.expanduser(w) for w in shlex.split(a.llama_spec)]
        servers = {"plain": LlamaServer(a.llama_server, model, a.threads, []),
                   "spec": LlamaServer(a.llama_server, model, a.threads, llama_extra)}
        atexit.register(lambda: [srv.close() for srv in servers.values()])
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so atexit stops the servers
    for _ in range(a.rounds):
        for prompt in prompts:
            order = [("plain", []), ("spec", extra)]
            if pair % 2:
                order.reverse()
            res = {name: run(a.binary, model, prompt, a.max_tokens, a.threads, flags)
                   for name, flags in order}
            plain, spec = res["plain"], res["spec"]
            same = plain["digest"] == spec["digest"] and plain["out"] == spec["out"]
            if not same:
                sys.exit(f"{prompt}: speculation changed the output")
            ratio = spec["tok_s"] / plain["tok_s"]
            ratios.append(ratio)
            drafted += spec["drafted"]
            accepted += spec["accepted"]
            rate = spec["accepted"] / max(spec["drafted"], 1)
            print(f"{os.path.basename(prompt)}: {plain['gen']} tokens, plain {plain['tok_s']:.1f} tok/s, "
                  f"speculative {spec['tok_s']:.1f} tok/s, ratio {ratio:.2f}, accepted {100 * rate:.0f} %, "
                  f"same digest {plain['digest'][:12]}", flush=True)
            if servers:
                lp, ls = llama_pair(servers, prompt, a.max_tokens, pair)
                llama_ratios.append(ls["tok_s"] / lp["tok_s"])
                llama_changed += lp["out"] != ls["out"]
                llama_drafted += ls["drafted"]
                llama_accepted += ls["accepted"]
                print(f"  llama.cpp: plain {lp['tok_s']:.1f} tok/s, speculative {ls['tok_s']:.1f} tok/s, "
                      f"ratio {llama_ratios[-1]:.2f}, answer {'CHANGED' if lp['out'] != ls['out'] else 'same'}",
                      flush=True)
            pair += 1
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric mean ratio {gmean:.2f} over {len(ratios)} pairs; "
          f"acceptance {100 * accepted / max(drafted, 1):.1f} % ({accepted}/{drafted}); "
          f"every output identical")
    if servers:
        lg = math.exp(sum(math.log(r) for r in llama_ratios) / len(llama_ratios))
        print(f"llama.cpp ({a.llama_spec}): geometric mean ratio {lg:.2f}; "
              f"acceptance {100 * llama_accepted / max(llama_drafted, 1):.1f} % "
              f"({llama_accepted}/{llama_drafted}); {llama_changed} of {len(llama_ratios)} answers "
              f"changed when it speculated")


if __name__ == "__main__":
    main()
