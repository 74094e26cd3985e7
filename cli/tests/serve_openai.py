"""The official `openai` client against `detllm serve` (cli/tests/serve.rs runs it).

Usage: python serve_openai.py BASE_URL   (e.g. http://127.0.0.1:8080/v1)
Prints a JSON list: for each request, the text the client got whole and
streamed, and the `detllm` provenance of the whole response, so the Rust
test can compare them with the server's raw JSON answer.
"""
import json
import sys

from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key="unused")
MODEL = client.models.list().data[0].id
REQUESTS = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}],
     "max_tokens": 16, "temperature": 0},
    {"messages": [{"role": "system", "content": "You answer briefly."},
                  {"role": "user", "content": "Name a colour."}],
     "max_tokens": 12, "temperature": 0.8, "seed": 42, "top_p": 0.9},
]
out = []
for req in REQUESTS:
    whole = client.chat.completions.create(model=MODEL, **req)
    stream = client.chat.completions.create(model=MODEL, stream=True, **req)
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    extra = whole.choices[0].model_extra or {}
    out.append({"request": req, "text": whole.choices[0].message.content,
                "stream_text": streamed, "detllm": extra.get("detllm")})
print(json.dumps(out))
