"""Tool calls through the official `openai` client (cli/tests/serve.rs runs it).

Usage: python serve_openai_tools.py BASE_URL [short]
For `tool_choice` "required" and a named function, greedy and sampled, the
calls the client parsed from the whole answer and assembled from the stream
(`delta.tool_calls` by `index`), seeded so that the call ids agree too; then a round trip (the calls, a `tool`
result per call, the answer). Prints JSON for the Rust test to check.
"""
import json
import sys

from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key="unused")
MODEL = client.models.list().data[0].id
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 24},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string", "maxLength": 24}},
    "required": ["zone"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
REQUESTS = [
    {"tool_choice": "required", "temperature": 0, "seed": 1},
    {"tool_choice": "required", "temperature": 0.8, "seed": 5},
    {"tool_choice": {"type": "function", "function": {"name": "get_time"}}, "temperature": 0,
     "seed": 2},
    {"tool_choice": "required", "parallel_tool_calls": False, "temperature": 0.8, "seed": 9},
]


def calls_of(message):
    return [{"id": c.id, "type": c.type, "name": c.function.name,
             "arguments": c.function.arguments} for c in (message.tool_calls or [])]


if sys.argv[2:] == ["short"]:  # the greedy required and named cases only
    REQUESTS = [REQUESTS[0], REQUESTS[2]]
out = []
for extra in REQUESTS:
    req = dict(messages=ASK, tools=[WEATHER, TIME], max_tokens=60, **extra)
    whole = client.chat.completions.create(model=MODEL, **req)
    calls = {}
    finish = None
    content = None
    for chunk in client.chat.completions.create(model=MODEL, stream=True, **req):
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            if ch.delta.content:
                content = (content or "") + ch.delta.content
            for d in ch.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"id": None, "type": None, "name": None,
                                               "arguments": ""})
                c["id"] = d.id or c["id"]
                c["type"] = d.type or c["type"]
                if d.function:
                    c["name"] = d.function.name or c["name"]
                    c["arguments"] += d.function.arguments or ""
    m = whole.choices[0].message
    out.append({"request": extra, "whole": {"content": m.content, "calls": calls_of(m),
                                            "finish": whole.choices[0].finish_reason},
                "stream": {"content": content, "calls": [calls[i] for i in sorted(calls)],
                           "finish": finish}})

# A round trip: the calls, their results, the answer.
first = client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER, TIME],
                                       tool_choice="required", parallel_tool_calls=False,
                                       max_tokens=60, temperature=0)
msg = first.choices[0].message
history = ASK + [msg.model_dump(exclude_none=True)]
for c in msg.tool_calls or []:
    history.append({"role": "tool", "tool_call_id": c.id, "content": "18 degrees, sunny"})
final = client.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER, TIME],
                                       max_tokens=30, temperature=0)
print(json.dumps({"cases": out, "round_trip": {
    "calls": calls_of(msg), "answer": final.choices[0].message.content,
    "answer_calls": calls_of(final.choices[0].message),
    "finish": final.choices[0].finish_reason}}))
