#!/bin/bash
# serve_openai.sh - the official `openai` Python client (from PyPI, in a venv
# under $NF_BUILD) works against nimserve unchanged: models, completions and
# chat completions, plain and streamed, greedy text equal to nf_generate, and
# errors raised as the client's typed exceptions.  Skips when PyPI is unreachable.
set -u
. "${NF_SRC:?}/tests/serve_lib.sh"
serve_setup openai
VENV="$B/venv-openai"
if ! "$VENV/bin/python" -c 'import openai' 2>/dev/null; then
	rm -rf "$VENV"
	if ! timeout 120 python3 -m venv "$VENV" >/dev/null 2>&1 ||
		! timeout 180 "$VENV/bin/pip" install -q openai >/dev/null 2>&1; then
		echo "1..0 # skip the openai package cannot be installed from PyPI here"
		exit 0
	fi
fi

"$FIX" build "$W/fx" fp32 plain >/dev/null 2>"$W/fx.err" || { echo "Bail out! fixture: $(cat "$W/fx.err")"; exit 1; }
ENGINE=$(ls -d "$W"/fx/engines/*)
start_server main || { echo "Bail out! server did not start"; exit 1; }
"$FIX" generate "$ENGINE" 40 "Once upon" >"$W/want1"
"$FIX" generate "$ENGINE" 40 "Lily went" >"$W/want2"

"$VENV/bin/python" - "$PORT" "$W/want1" "$W/want2" <<'PY'
import sys, openai
port, want1, want2 = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read()
c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=30, max_retries=0)
n = 0
fails = 0
def t(cond, name, extra=""):
    global n, fails
    n += 1
    print(("ok" if cond else "not ok") + f" {n} - {name}")
    if not cond:
        fails += 1
        print("# " + str(extra).replace("\n", "\n# "))
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
print(f"1..{n}")
sys.exit(1 if fails else 0)
PY
st=$?
stop_server "$PID"
rc=$?
if [ "$rc" != 0 ]; then echo "# nimserve exited $rc"; exit 1; fi
exit $st
