#!/bin/bash
# serve_openai.sh - the official `openai` Python client (build/venv, as the
# other serve tests use it) works against nimserve unchanged: models,
# completions and chat completions, plain and streamed, greedy text equal to
# nf_generate, errors raised as the client's typed exceptions, and a clean
# exit on SIGTERM.  Skips when build/venv has no openai module.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_py_setup openai openai
ENGINE=$(ls -d "$W"/fx/engines/*)
"$FIX" generate "$ENGINE" 40 "Once upon" >"$W/want1"
"$FIX" generate "$ENGINE" 40 "Lily went" >"$W/want2"

"$PY" - "$PORT" "$W/want1" "$W/want2" "$W/count" <<'PY'
import sys, openai
from taplib import t, done, client
want1, want2 = open(sys.argv[2]).read(), open(sys.argv[3]).read()
c = client(sys.argv[1], timeout=30)
models = c.models.list()
t([m.id for m in models.data] == ["stories260k"], "models.list", models)
r = c.completions.create(model="stories260k", prompt="Once upon", max_tokens=40, temperature=0)
t(r.choices[0].text == want1, "completions.create greedy equals nf_generate", r.choices[0].text)
t(r.usage.completion_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage", r.usage)
s = c.completions.create(model="stories260k", prompt="Once upon", max_tokens=40, temperature=0, stream=True)
t("".join(ch.choices[0].text for ch in s if ch.choices) == want1, "completions stream equals nf_generate")
r = c.chat.completions.create(model="stories260k", messages=[{"role": "user", "content": "Lily went"}], max_tokens=40, temperature=0)
t(r.choices[0].message.content == want2 and r.choices[0].message.role == "assistant", "chat.completions.create", r)
s = c.chat.completions.create(model="stories260k", messages=[{"role": "user", "content": "Lily went"}], max_tokens=40,
                              temperature=0, stream=True, stream_options={"include_usage": True})
parts, usage = [], None
for ch in s:
    if ch.choices and ch.choices[0].delta.content:
        parts.append(ch.choices[0].delta.content)
    if ch.usage:
        usage = ch.usage
t("".join(parts) == want2, "chat stream equals nf_generate", "".join(parts))
t(usage is not None and usage.completion_tokens > 0, "chat stream usage", usage)
try:
    c.completions.create(model="gpt-4", prompt="x", max_tokens=2)
    t(False, "unknown model raises NotFoundError")
except openai.NotFoundError as e:
    t(e.status_code == 404 and e.code == "model_not_found", "unknown model raises NotFoundError", e)
try:
    c.completions.create(model="stories260k", prompt="word " * 2000, max_tokens=2)
    t(False, "too long prompt raises BadRequestError")
except openai.BadRequestError as e:
    t(e.code == "context_length_exceeded", "too long prompt raises BadRequestError", e)
try:
    c.completions.create(model="stories260k", prompt="x", n=1, best_of=2)
    t(False, "best_of other than n raises UnprocessableEntityError")
except openai.UnprocessableEntityError as e:
    t(e.status_code == 422, "best_of other than n raises UnprocessableEntityError", e)
done(sys.argv[4])
PY
read -r n fail <"$W/count" 2>/dev/null || { n=0; fail=1; echo "# the Python part ended early"; }
stop_server "$PID"
okt $? "nimserve exits 0 on SIGTERM"
sanitizer_clean
serve_done
