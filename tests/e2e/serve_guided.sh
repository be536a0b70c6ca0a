#!/bin/bash
# serve_guided.sh - structured output through the official openai client
# (build/venv) against nimserve on stories260K, a model that knows nothing
# of JSON: every answer sampled at temperature 1 under response_format
# json_schema (nested objects, arrays, enums, bounded integers, optional
# fields, anyOf) validates with jsonschema, json_object answers parse as
# objects, nvext.guided_regex answers match with re.fullmatch and
# guided_choice answers are among the choices, streamed or not, n > 1
# included; a schema that cannot be compiled, a bad pattern, and two
# guides at once get a 400 naming the field.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_py_setup guided openai jsonschema

# fewer samples under the sanitizers (every token is ~10x slower there)
N=12
[ "${NF_SAN:-}" = 1 ] && N=3
"$PY" - "$PORT" "$W/count" "$N" <<'PY'
import json, re, sys, openai, jsonschema
from taplib import t, done, client
N = int(sys.argv[3])
c = client(sys.argv[1])
M = "stories260k"

schemas = {
    "person": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pets": {"type": "array", "items": {"enum": ["cat", "dog", "bird"]}, "maxItems": 3}},
        "required": ["name", "age"], "additionalProperties": False},
    "nested": {"type": "object", "properties": {
        "point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                                    "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                  "required": ["x", "y"], "additionalProperties": False},
        "ok": {"type": "boolean"}}, "required": ["point", "ok"], "additionalProperties": False},
    "anyof": {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5},
                                                              {"type": "string", "enum": ["low", "high"]}]}},
              "required": ["v"], "additionalProperties": False},
}

def rf(name, schema):
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

for name, schema in schemas.items():
    bad = []
    r = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Once upon a time"}],
                                  temperature=1.0, max_tokens=120, n=N, response_format=rf(name, schema), seed=1)
    for ch in r.choices:
        try:
            jsonschema.validate(json.loads(ch.message.content), schema)
        except Exception as e:
            bad.append((ch.message.content, str(e)[:120]))
    t(len(r.choices) == N and not bad, f"chat json_schema {name}: {N} answers at temperature 1 validate", bad[:2])

# streamed: the chunks join into a valid answer
parts = []
for ch in c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Tell me"}], stream=True,
                                    temperature=1.0, max_tokens=120, response_format=rf("person", schemas["person"]), seed=2):
    if ch.choices and ch.choices[0].delta.content:
        parts.append(ch.choices[0].delta.content)
try:
    jsonschema.validate(json.loads("".join(parts)), schemas["person"]); okv = True
except Exception as e:
    okv = False
t(okv, "a streamed json_schema answer validates", "".join(parts))

r = c.chat.completions.create(model=M, messages=[{"role": "user", "content": "Hi"}], temperature=1.0, max_tokens=150,
                              n=N, response_format={"type": "json_object"}, seed=3)
objs = []
for ch in r.choices:
    try:
        objs.append(isinstance(json.loads(ch.message.content), dict))
    except Exception:
        objs.append(False)
t(all(objs), "json_object answers are JSON objects", [ch.message.content for ch in r.choices][:2])

# nvext on the completions endpoint
pat = r"(yes|no), [0-9]{3}-[a-z]{2,4}"
r = c.completions.create(model=M, prompt="The answer is", temperature=1.0, max_tokens=40, n=N,
                         extra_body={"nvext": {"guided_regex": pat}}, seed=4)
t(all(re.fullmatch(pat, ch.text) for ch in r.choices), "guided_regex answers match", [ch.text for ch in r.choices][:3])
choices = ["red", "green", "blue sky"]
r = c.completions.create(model=M, prompt="The color is", temperature=1.0, max_tokens=10, n=N,
                         extra_body={"nvext": {"guided_choice": choices}}, seed=5)
t(all(ch.text in choices for ch in r.choices), "guided_choice answers are choices", [ch.text for ch in r.choices])
r = c.completions.create(model=M, prompt="x", temperature=0.0, max_tokens=200,
                         extra_body={"nvext": {"guided_json": json.dumps(schemas["nested"])}})
try:
    jsonschema.validate(json.loads(r.choices[0].text), schemas["nested"]); okv = True
except Exception:
    okv = False
t(okv and r.choices[0].finish_reason == "stop", "guided_json as a string, greedy, ends with stop", r.choices[0].text)

def refused(kw, field, what):
    try:
        c.chat.completions.create(model=M, messages=[{"role": "user", "content": "x"}], max_tokens=5, **kw)
        t(False, what, "accepted")
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        t(e.status_code == 400 and field in (err.get("message", "") + str(err.get("param", ""))), what, e.body)

refused({"response_format": rf("x", {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a"}}})},
        "/properties/a/pattern", "a schema that cannot compile: 400 naming its part")
refused({"extra_body": {"nvext": {"guided_regex": "a{2,1}"}}}, "regex", "a bad pattern: 400")
refused({"response_format": {"type": "json_object"}, "extra_body": {"nvext": {"guided_choice": ["a"]}}},
        "nvext", "two guides at once: 400")
refused({"extra_body": {"nvext": {"guided_grammar": "root ::= x"}}}, "guided_grammar", "an unknown nvext field: 400")
done(sys.argv[2])
PY
stop_server "$PID"
serve_py_finish
