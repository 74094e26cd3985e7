#!/usr/bin/env python3
"""Golden chat-template renderings for tests/tokenizer/chat_templates.rs.

    python3 scripts/chat_template_golden.py SMOLLM2.gguf QWEN.gguf > tests/data/chat_templates.json

(the model paths: `bash scripts/fetch-model.sh`,
`bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b`). Needs `jinja2`.

Each message list of MESSAGES is rendered, with and without the generation
prompt, by Jinja (jinja2, as the models' Hugging Face tokenizers do) with:

* `smollm2`, `qwen25`: the template string read from the model's GGUF
  (`tokenizer.chat_template`, read by the small GGUF reader below);
* `chatml`: the plain ChatML template CHATML below (llama.cpp's `chatml`
  format);
* `gemma`: Gemma 3's published Jinja template GEMMA3 below (the Gemma 3 270M
  GGUF carries no template; reproduced here without its image-content
  branches), rendered with `bos_token=''` since detllm's
  tokenizer adds BOS itself. Message lists for Gemma alternate user/model
  after an optional leading system message, as its template requires.

The output is JSON: `{"<template>": [{"messages": [[role, content], ...],
"add_generation_prompt": bool, "text": str}, ...]}`.
"""
import json
import struct
import sys

import jinja2

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

GEMMA3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

# Message lists for every template.
COMMON = [
    [("user", "What is 2+2?")],
    [("system", "Be brief."), ("user", "Hi")],
    [("user", "Hi"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke.")],
    [("system", "You are a pirate."), ("user", "Where is the treasure?"),
     ("assistant", "Arr, buried on the island."), ("user", "Which one?")],
    [("user", "unicode: café 日本語 🙂\nsecond line")],
    [("user", "code:\n```rust\nfn main() {}\n```")],
    [("user", ""), ("assistant", "")],
    [("system", "Answer in French."), ("user", "Good morning")],
    [("user", "<|im_start|> is just text here")],
    [("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d")],
]
# ChatML-only cases (roles Gemma's template rejects).
CHATML_EXTRA = [
    [("user", "first"), ("system", "a later system message"), ("user", "second")],
    [("user", "call the tool"), ("assistant", "calling"), ("tool", "42"), ("tool", "43"),
     ("user", "thanks")],
    [("assistant", "I start.")],
]
# Gemma-only cases (turn content trimmed by the template; the system
# prompt is not, where llama.cpp's format trims it too, so it is not padded).
GEMMA_EXTRA = [
    [("system", "System."), ("user", "\n  padded user  \t"), ("assistant", " padded model\n")],
]


def read_template(path):
    """tokenizer.chat_template of a GGUF file (GGUF v2/v3 metadata)."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        f.read(4)  # version
        _, n_kv = struct.unpack("<QQ", f.read(16))

        def rstr():
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n)

        for _ in range(n_kv):
            key = rstr().decode()
            (t,) = struct.unpack("<I", f.read(4))
            if t == 8:
                v = rstr()
                if key == "tokenizer.chat_template":
                    return v.decode()
            elif t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                if et == 8:
                    for _ in range(n):
                        rstr()
                else:
                    f.seek(n * sizes[et], 1)
            else:
                f.seek(sizes[t], 1)
    sys.exit(f"{path}: no tokenizer.chat_template")


def render(template, cases):
    env = jinja2.Environment()

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(template)
    out = []
    for msgs in cases:
        for gen in (True, False):
            text = tmpl.render(
                messages=[{"role": r, "content": c} for r, c in msgs],
                add_generation_prompt=gen,
                bos_token="",
                tools=None,
            )
            out.append({"messages": [list(m) for m in msgs], "add_generation_prompt": gen,
                        "text": text})
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    smol, qwen = sys.argv[1], sys.argv[2]
    chatml_cases = COMMON + CHATML_EXTRA
    result = {
        "about": "chat-template renderings by Jinja; scripts/chat_template_golden.py",
        "jinja2": jinja2.__version__,
        "smollm2": render(read_template(smol), chatml_cases),
        "qwen25": render(read_template(qwen), chatml_cases),
        "chatml": render(CHATML, chatml_cases),
        "gemma": render(GEMMA3, COMMON + GEMMA_EXTRA),
    }
    json.dump(result, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
