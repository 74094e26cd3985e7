"""Tool calls through the official `openai` client (cli/tests/serve.rs runs it).

Usage: python serve_openai_tools.py BASE_URL [short]
For `tool_choice` "required" and a named function, greedy and sampled, the
calls the client parsed from the whole answer and assembled from the stream
(`delta.tool_calls` by `index`), seeded so that the call ids agree too; then a
round trip (the calls, a `tool` result per call, the answer), whole and
streamed; and `chat.completions.parse` with a pydantic model as
`response_format`. Prints JSON for the Rust test to check.
"""
import json
import sys

from openai import OpenAI
from pydantic import BaseModel, Field

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


def streamed(**req):
    """The message the client assembles from a stream: content, calls, finish."""
    calls, content, finish = {}, None, None
    for chunk in client.chat.completions.create(model=MODEL, stream=True, **req):
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            if ch.delta.content:
                content = (content or "") + ch.delta.content
            for d in ch.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"id": None, "type": None,
                                               "function": {"name": None, "arguments": ""}})
                c["id"] = d.id or c["id"]
                c["type"] = d.type or c["type"]
                if d.function:
                    c["function"]["name"] = d.function.name or c["function"]["name"]
                    c["function"]["arguments"] += d.function.arguments or ""
    return content, [calls[i] for i in sorted(calls)], finish


out = []
for extra in REQUESTS:
    req = dict(messages=ASK, tools=[WEATHER, TIME], max_tokens=60, **extra)
    whole = client.chat.completions.create(model=MODEL, **req)
    content, calls, finish = streamed(**req)
    m = whole.choices[0].message
    out.append({"request": extra, "whole": {"content": m.content, "calls": calls_of(m),
                                            "finish": whole.choices[0].finish_reason},
                "stream": {"content": content, "finish": finish, "calls": [
                    {"id": c["id"], "type": c["type"], **c["function"]} for c in calls]}})


# A round trip, whole and streamed: the calls, a result per call, the answer.
def round_trip(stream):
    ask = dict(tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=False,
               max_tokens=60, temperature=0, seed=4)
    if stream:
        _, calls, _ = streamed(messages=ASK, **ask)
        said = {"role": "assistant", "content": None, "tool_calls": calls}
    else:
        msg = client.chat.completions.create(model=MODEL, messages=ASK, **ask).choices[0].message
        said = msg.model_dump(exclude_none=True)
        calls = [{"id": c.id, "type": c.type, "function": {
            "name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls or []]
    history = ASK + [said]
    for c in calls:
        history.append({"role": "tool", "tool_call_id": c["id"], "content": "18 degrees, sunny"})
    answer = dict(messages=history, tools=[WEATHER, TIME], max_tokens=30, temperature=0,
                  seed=4)
    if stream:
        content, answer_calls, finish = streamed(**answer)
    else:
        m = client.chat.completions.create(model=MODEL, **answer).choices[0]
        content, answer_calls, finish = m.message.content, m.message.tool_calls or [], \
            m.finish_reason
    return {"calls": [{"id": c["id"], "name": c["function"]["name"],
                       "arguments": c["function"]["arguments"]} for c in calls],
            "answer": content, "answer_calls": len(answer_calls), "finish": finish}


class Weather(BaseModel):
    """The structured answer `parse` asks for (a pydantic model as response_format)."""
    city: str = Field(max_length=24)
    celsius: int
    sunny: bool


parsed = client.chat.completions.parse(
    model=MODEL, response_format=Weather, max_tokens=60, temperature=0,
    messages=[{"role": "user", "content": "The weather in Paris as JSON."}])
p = parsed.choices[0]
print(json.dumps({"cases": out, "round_trip": round_trip(False),
                  "round_trip_stream": round_trip(True),
                  "parse": {"finish": p.finish_reason, "content": p.message.content,
                            "parsed": p.message.parsed.model_dump()
                            if p.message.parsed is not None else None}}))
