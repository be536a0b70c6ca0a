#!/bin/bash
# serve_tools.sh - tool calls through the official openai client (build/venv)
# against nimserve.  On stories260K (a model that knows nothing of tools):
# tool_choice required and a named function give calls whose arguments
# validate against the function's parameters (jsonschema), finish_reason
# tool_calls and content null, streamed as tool_calls deltas; a
# conversation carrying the assistant's calls and the tool's results is
# accepted; malformed tools are refused naming the field.  Then the
# client's tool-calling loop on SmolLM2-135M-Instruct (int8-wo, its own
# ChatML template): a required call, the tool's result sent back, an
# answer in text (skipped in the sanitizer pass).
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_py_setup tools openai jsonschema

cat >"$W/common.py" <<'PY'
import json, sys, openai, jsonschema
from taplib import t, done, client
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {
               "city": {"type": "string", "maxLength": 20},
               "unit": {"enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
            "zone": {"type": "string", "maxLength": 10}}, "required": ["zone"], "additionalProperties": False}}}
# compact twins for stories260K, whose 512-token context a long tools prompt would fill
W = {"type": "function", "function": {"name": "w", "parameters": {"type": "object", "properties": {
     "c": {"type": "string", "maxLength": 8}, "u": {"enum": ["C", "F"]}}, "required": ["c", "u"],
     "additionalProperties": False}}}
T = {"type": "function", "function": {"name": "t", "parameters": {"type": "object", "properties": {
     "z": {"type": "integer", "minimum": -12, "maximum": 12}}, "required": ["z"], "additionalProperties": False}}}
def valid_call(tc):
    fn = {"get_weather": WEATHER, "get_time": TIME, "w": W, "t": T}.get(tc.function.name)
    try:
        jsonschema.validate(json.loads(tc.function.arguments), fn["function"]["parameters"])
        return tc.id.startswith("call_") and tc.type == "function"
    except Exception:
        return False
PY

"$PY" - "$PORT" "$W/count" "$W" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from common import *
c = client(sys.argv[1])
M = "stories260k"
msgs = [{"role": "user", "content": "Weather?"}]

r = c.chat.completions.create(model=M, messages=msgs, tools=[W, T], tool_choice="required",
                              temperature=1.0, max_tokens=80, n=4, seed=1)
ok = all(ch.finish_reason == "tool_calls" and ch.message.content is None and len(ch.message.tool_calls) == 1
         and valid_call(ch.message.tool_calls[0]) for ch in r.choices)
t(ok, "required: each of 4 sampled answers is one valid call", r.choices[:2])
r = c.chat.completions.create(model=M, messages=msgs, tools=[W, T], temperature=1.0, max_tokens=80,
                              tool_choice={"type": "function", "function": {"name": "t"}}, seed=2)
tc = r.choices[0].message.tool_calls
t(tc and tc[0].function.name == "t" and valid_call(tc[0]), "a named function is the one called", r.choices[0])

deltas, finish = [], None
for ch in c.chat.completions.create(model=M, messages=msgs, tools=[W], tool_choice="required", stream=True,
                                    temperature=1.0, max_tokens=80, seed=3):
    if ch.choices:
        d = ch.choices[0].delta
        deltas += d.tool_calls or []
        finish = ch.choices[0].finish_reason or finish
t(len(deltas) == 1 and deltas[0].index == 0 and valid_call(deltas[0]) and finish == "tool_calls",
  "streamed: one tool_calls delta with the whole call, finish tool_calls", deltas)

conv = msgs + [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                 "function": {"name": "w", "arguments": "{\"c\": \"Paris\", \"u\": \"C\"}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}]
r = c.chat.completions.create(model=M, messages=conv, tools=[W], max_tokens=8, temperature=0)
t(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), "a conversation with a call and its result is answered", r)
r = c.chat.completions.create(model=M, messages=msgs, tools=[W], tool_choice="none", max_tokens=8, temperature=0)
t(r.choices[0].message.tool_calls is None and r.choices[0].message.content is not None, "tool_choice none: text", r)

def refused(kw, param, what):
    try:
        c.chat.completions.create(model=M, messages=msgs, max_tokens=4, **kw)
        t(False, what, "accepted")
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        t(e.status_code == 400 and param in str(err.get("param", "")), what, e.body)
refused({"tools": [{"type": "function", "function": {}}]}, "tools", "a tool without a name: 400")
refused({"tools": [W, W]}, "tools", "two tools of one name: 400")
refused({"tool_choice": "required"}, "tool_choice", "tool_choice without tools: 400")
refused({"tools": [W], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
        "a named function not among the tools: 400")
refused({"tools": [W], "tool_choice": "required", "response_format": {"type": "json_object"}}, "tool_choice",
        "required with response_format: 400")
try:
    c.chat.completions.create(model=M, max_tokens=4, messages=[{"role": "tool", "content": "x"}])
    t(False, "a tool message without tool_call_id: 400", "accepted")
except openai.BadRequestError as e:
    t(e.status_code == 400, "a tool message without tool_call_id: 400", e.body)
done(sys.argv[2])
PY
read -r n fail <"$W/count" 2>/dev/null || { n=0; fail=1; }
stop_server "$PID"

GGUF="$NF_SHARED/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ "${NF_SAN:-}" = 1 ] || [ ! -f "$GGUF" ]; then
	n=$((n + 1))
	echo "ok $n - SmolLM2 tool-calling loop # skip sanitizer pass or no $GGUF"
else
	"$FIX" build "$W/smol" int8-wo model "$GGUF" smollm2 >/dev/null 2>"$W/smol.err" &&
		rm -rf "$W/fx" && mv "$W/smol" "$W/fx" && start_server smol ||
		{ echo "not ok $((n + 1)) - SmolLM2 server: $(tail -2 "$W/smol.err")"; echo "1..$((n + 1))"; exit 1; }
	NF_TAP_FROM=$n "$PY" - "$PORT" "$W/count" "$W" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from common import *
c = client(sys.argv[1])
messages = [{"role": "user", "content": "What is the weather like in Paris today?"}]
r = c.chat.completions.create(model="smollm2", messages=messages, tools=[WEATHER], tool_choice="required",
                              temperature=0, max_tokens=60)
msg = r.choices[0].message
t(msg.tool_calls and valid_call(msg.tool_calls[0]), "SmolLM2: the client's first turn is a valid call", msg)
if msg.tool_calls:
    call = msg.tool_calls[0]
    messages.append(msg.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 degrees Celsius and sunny"})
    r = c.chat.completions.create(model="smollm2", messages=messages, tools=[WEATHER], temperature=0, max_tokens=60)
    m2 = r.choices[0].message
    t(r.choices[0].finish_reason in ("stop", "tool_calls") and (m2.content or m2.tool_calls),
      "SmolLM2: with the tool's result it answers", m2)
done(sys.argv[2])
PY
	fail0=$fail
	read -r n fail <"$W/count" 2>/dev/null || { n=$((n + 1)); fail=1; }
	fail=$((fail + fail0))
	stop_server "$PID"
fi
sanitizer_clean
serve_done
