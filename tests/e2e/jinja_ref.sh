#!/bin/sh
# jinja_ref.sh - engine/jinja against jinja2 configured as transformers
# configures it, on real chat templates: every template in
# tests/data/chat_templates/ (and SmolLM2's, read out of its GGUF, when the
# shared models are here) times a set of conversations (one user message,
# system + user, multi-turn, tool calls, hostile content, conversations a
# template must refuse), with and without add_generation_prompt.  Each pair
# must render to the same bytes, or both must fail; when jinja2 fails through
# raise_exception, nf_jinja_tool's message must carry the same text.
# (Mistral Small 3.1 prints strftime_now's date, so a run that spans
# midnight UTC could see two dates; the whole run takes seconds.)
set -u
NF_SRC=${NF_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
NF_BUILD=${NF_BUILD:-$NF_SRC/build}
NF_SHARED=${NF_SHARED:-$NF_SRC/../shared}
TOOL=$NF_BUILD/tools/nf_jinja_tool
if [ ! -x "$TOOL" ]; then
	echo "1..0 # skip $TOOL not built"
	exit 0
fi
. "$NF_SRC/tests/pyref.sh"
pyref_python
export TZ=UTC
W=$(mktemp -d "${TMPDIR:-/tmp}/nf-jinja-ref.XXXXXX")
[ -n "${NF_KEEP:-}" ] || trap 'rm -rf "$W"' EXIT INT TERM
. "$NF_SRC/tests/tap.sh"

mkdir -p "$W/templates" "$W/cases"
cp "$NF_SRC"/tests/data/chat_templates/*.jinja "$W/templates/"
GGUF=$NF_SHARED/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf
have_smol=0
if [ -f "$GGUF" ]; then
	"$PY" - "$GGUF" "$W/templates/smollm2.jinja" <<'EOF' && have_smol=1
import sys, gguf
f = gguf.GGUFReader(sys.argv[1]).fields["tokenizer.chat_template"]
open(sys.argv[2], "wb").write(bytes(f.parts[f.data[0]]))
EOF
fi

# The reference: for each template and conversation, CASE.json (the context),
# CASE.want (jinja2's rendering) or CASE.raise (its error message).
"$PY" - "$W" <<'EOF'
import glob, json, os, sys
from datetime import datetime
import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[jinja2.ext.loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)

def m(role, content, **kw):
    return dict(role=role, content=content, **kw)

tool = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. Zürich"},
        "days": {"type": "integer"}}, "required": ["city"]}}}
call = {"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
convs = {
    "one_user": ([m("user", "Hello")], None),
    "system_user": ([m("system", "You are terse."), m("user", "Hi there")], None),
    "multi_turn": ([m("user", "Hello"), m("assistant", "Hi! How can I help?"),
                    m("user", "Who are you"), m("assistant", "   I am an assistant   "),
                    m("user", "Another question")], None),
    "system_multi": ([m("system", "Be kind."), m("user", "a"), m("assistant", "b"), m("user", "c")], None),
    "hostile_content": ([m("user", "quotes ' \" and \\ backslash\nnew line\ttab\r\n{{ x }} {% if %} {# c #}"),
                         m("assistant", "  unicode: é 日本語 🦙 \u00a0nbsp\u2028sep  "),
                         m("user", "  padded \n\n ")], None),
    "reasoning": ([m("user", "2+2?"), m("assistant", "<think>\nadd them\n</think>\n\n4"), m("user", "and 3+3?")], None),
    "content_parts": ([m("user", [{"type": "text", "text": "Describe "}, {"type": "image_url", "image_url": {"url": "x"}},
                                  {"type": "text", "text": " please"}])], None),
    "broken_alternation": ([m("user", "one"), m("user", "two")], None),
    "assistant_first": ([m("assistant", "I start"), m("user", "ok")], None),
    "tools": ([m("system", "Use tools."), m("user", "Weather in Paris?"),
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"},
               m("user", "Thanks")], [tool]),
    "tools_answered": ([m("user", "Weather in Paris?"),
                        {"role": "assistant", "content": None, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21}"},
                        m("assistant", "It is 21 degrees."), m("user", "Thanks")], [tool]),
}
out = sys.argv[1]
for path in sorted(glob.glob(os.path.join(out, "templates", "*.jinja"))):
    name = os.path.basename(path)[:-6]
    try:
        tmpl = env.from_string(open(path, encoding="utf-8").read())
    except Exception as e:
        sys.exit("jinja2 cannot compile %s: %s" % (path, e))
    for conv, (messages, tools) in convs.items():
        for agp in (True, False):
            ctx = {"messages": messages, "bos_token": "<s>", "eos_token": "</s>",
                   "add_generation_prompt": agp}
            if tools:
                ctx["tools"] = tools
            case = os.path.join(out, "cases", "%s__%s__%s" % (name, conv, "gen" if agp else "nogen"))
            json.dump(ctx, open(case + ".json", "w", encoding="utf-8"), ensure_ascii=False)
            try:
                text = tmpl.render(**ctx)
                open(case + ".want", "wb").write(text.encode("utf-8"))
            except jinja2.exceptions.TemplateError as e:
                if type(e) is jinja2.exceptions.TemplateError:
                    open(case + ".raise", "w", encoding="utf-8").write(str(e))
                else:
                    open(case + ".fail", "w").write(str(e))
            except Exception as e:
                open(case + ".fail", "w").write("%s: %s" % (type(e).__name__, e))
EOF
[ $? -eq 0 ] || { echo "not ok 1 - the jinja2 reference ran"; echo "1..1"; exit 1; }

check_case() {
	case=$1
	"$TOOL" render "$W/templates/${2}.jinja" "$case.json" >"$case.got" 2>"$case.err"
	rc=$?
	if [ -f "$case.want" ]; then
		[ $rc -eq 0 ] && cmp -s "$case.want" "$case.got" && return 0
		echo "exit $rc; stderr: $(cat "$case.err")" >&2
		"$PY" -c 'import sys; a=open(sys.argv[1],"rb").read(); b=open(sys.argv[2],"rb").read(); print("want", repr(a)[:400]); print(" got", repr(b)[:400])' "$case.want" "$case.got" >&2
		return 1
	fi
	# jinja2 refused it: so must we, with exit 2 and one line naming the template's position
	[ $rc -eq 2 ] && [ ! -s "$case.got" ] && [ "$(wc -l <"$case.err")" -eq 1 ] || {
		echo "exit $rc (want 2); stderr: $(cat "$case.err")" >&2
		return 1
	}
	if [ -f "$case.raise" ]; then
		grep -qF -- "$(cat "$case.raise")" "$case.err" || {
			echo "stderr '$(cat "$case.err")' lacks '$(cat "$case.raise")'" >&2
			return 1
		}
	fi
	return 0
}

for f in "$W"/cases/*.json; do
	case=${f%.json}
	base=$(basename "$case")
	tmpl=${base%%__*}
	what=renders
	[ -f "$case.want" ] || what=fails
	t "$base $what as jinja2 does" check_case "$case" "$tmpl"
done
[ "$have_smol" -eq 1 ] || skip "SmolLM2's GGUF template: $GGUF absent"
finish
