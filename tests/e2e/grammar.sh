#!/bin/sh
# grammar.sh - structured output end to end: answers sampled at temperature 1
# under a grammar (tests/tools/nf_grammar_sample) from a stories260K engine,
# a model that knows nothing of JSON, all complete and all valid: 100 per
# JSON Schema (nested objects, arrays, enums and const, bounded integers and
# numbers, required and optional fields, anyOf with $ref, a recursive $ref,
# json_object, string patterns), each validated by Python's jsonschema; 100 per regex,
# checked by re.fullmatch; 100 choices, each one of the list.  A schema or
# regex that cannot compile exits 2 naming the part.  With SmolLM2 present
# (and not under the sanitizers), a few answers of a real instruction model
# to a chat prompt, validated the same way, with the grammar's cost.
#
# Under NF_SAN=1, 20 answers per case: the same paths, a fifth of the time.
set -u
SRC="${NF_SRC:?}"
TOOLS="${NF_BUILD:?}/tools"
MODELS="${NF_SHARED:?}/models"
W=$(mktemp -d /tmp/nf-e2e-grammar-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

PY="$SRC/build/venv/bin/python"
if ! "$PY" -c 'import jsonschema' 2>/dev/null; then
	echo "1..0 # skip build/venv has no jsonschema (ci/install-pydeps.sh)"
	exit 0
fi
N=100
[ "${NF_SAN:-}" = 1 ] && N=20

"$TOOLS/nf_engine_build_tool" "$MODELS/stories260K/stories260K.bin" "$MODELS/stories260K/tok512.bin" \
	fp32 "$W/tiny" --no-autotune --threads 1 >/dev/null 2>"$W/build.err"
is "the stories260K engine builds" "$?" 0

# A chat engine when SmolLM2 is here and the sanitizers are not.
SMOL=
GGUF="$MODELS/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$GGUF" ] && [ "${NF_SAN:-}" != 1 ]; then
	"$TOOLS/nf_engine_build_tool" "$GGUF" - int8-wo "$W/smol" --no-autotune --threads 2 \
		>/dev/null 2>"$W/smol.err" && SMOL="$W/smol"
fi

# The Python driver numbers its TAP lines after ours (it starts at $nf_n).
"$PY" - "$TOOLS/nf_grammar_sample" "$W/tiny" "$N" "$SMOL" "$nf_n" >"$W/py.tap" 2>"$W/py.err" <<'EOF'
import json, re, subprocess, sys
import jsonschema

TOOL, TINY, N, SMOL = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
n = int(sys.argv[5])
def ok(cond, name, extra=""):
    global n
    n += 1
    print(("ok %d - %s" % (n, name)) if cond else
          ("not ok %d - %s%s" % (n, name, "\n#   " + str(extra)[:400].replace("\n", "\n#   ") if extra else "")))
    sys.stdout.flush()

def sample(engine, args, count, prompt="Once upon a time", threads="1"):
    """The tool's answers (dicts) and its timings line, or (None, stderr)."""
    p = subprocess.run([TOOL, engine, *args, "-n", str(count), "--max-tokens", "400",
                        "--prompt", prompt, "--seed", "7", "--threads", threads],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None, p.stderr
    return [json.loads(l) for l in p.stdout.splitlines()], json.loads(p.stderr.splitlines()[-1])

def check(name, engine, args, count, valid, **kw):
    answers, info = sample(engine, args, count, **kw)
    if answers is None:
        ok(False, name + ": the tool runs", info)
        return None
    bad = [a for a in answers if not a["complete"] or "text" not in a or not valid(a["text"])]
    ok(len(answers) == count and not bad,
       "%s: %d answers at temperature 1, all complete and valid" % (name, count),
       bad[0] if bad else "got %d answers" % len(answers))
    distinct = len(set(a.get("text") for a in answers))
    ok(distinct > 1, "%s: the answers vary (%d distinct)" % (name, distinct))
    return info

def schema_valid(schema):
    v = jsonschema.Draft202012Validator(schema)
    def valid(text):
        try:
            return v.is_valid(json.loads(text))
        except ValueError:
            return False
    return valid

SCHEMAS = {
    "nested objects, required and optional": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "address": {"type": "object", "properties": {
                "street": {"type": "string", "maxLength": 16},
                "zip": {"type": "integer", "minimum": 10000, "maximum": 99999}},
                "required": ["zip"], "additionalProperties": False},
            "email": {"type": ["string", "null"], "maxLength": 20}},
        "required": ["name", "address"], "additionalProperties": False},
    "arrays with bounds": {
        "type": "array", "minItems": 2, "maxItems": 5,
        "items": {"type": "array", "items": {"type": "integer", "minimum": -50, "maximum": 50}, "maxItems": 3}},
    "enums and const": {
        "type": "object",
        "properties": {"color": {"enum": ["red", "green", "blue", None, 7]},
                       "kind": {"const": "fruit"}, "ripe": {"type": "boolean"}},
        "required": ["color", "kind", "ripe"], "additionalProperties": False},
    "bounded numbers": {
        "type": "object",
        "properties": {"t": {"type": "number", "minimum": -10, "maximum": 40},
                       "n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000},
                       "big": {"type": "integer", "minimum": -123456, "maximum": 98765432},
                       "any": {"type": "number"}},
        "required": ["t", "n", "big", "any"]},
    "anyOf with $ref": {
        "$defs": {"pt": {"type": "object", "properties": {
            "x": {"type": "integer", "minimum": 0, "maximum": 9},
            "y": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["x", "y"]}},
        "type": "object",
        "properties": {"shape": {"anyOf": [
            {"$ref": "#/$defs/pt"},
            {"type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 3},
            {"type": "null"}, {"type": "string", "maxLength": 8}]}},
        "required": ["shape"]},
    "patterns (anchored, escaped characters, a search)": {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
                       "tag": {"type": "string", "pattern": "^[a-z\"\\\\ ]{1,8}$"},
                       "note": {"type": "string", "pattern": "ok"}},
        "required": ["code", "tag", "note"]},
    "recursive $ref": {
        "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer", "minimum": 0, "maximum": 99},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node"},
}
for name, schema in SCHEMAS.items():
    check(name, TINY, ["--schema", json.dumps(schema), "--max-string", "24"], N, schema_valid(schema))

check("json_object", TINY, ["--json-object", "--max-string", "16", "--max-depth", "3"], N,
      schema_valid({"type": "object"}))
check("json_object, newlines allowed", TINY, ["--json-object", "--max-string", "16", "--ws", "newline"],
      N, schema_valid({"type": "object"}))

REGEXES = [r"\d{3}-\d{4}", r"(cat|dog|bird)s?( and (cat|dog))?", r"[A-Z][a-z]{2,8}@[a-z]{3,6}\.(com|org)",
           r"-?(0|[1-9]\d{0,3})(\.\d{1,2})?", r"[^\n,]{1,10}(,[^\n,]{1,10}){0,2}"]
for rx in REGEXES:
    check("regex " + rx, TINY, ["--regex", rx], N, lambda t, rx=rx: re.fullmatch(rx, t) is not None)

CHOICES = ["yes", "no", "maybe later", "\u00e9t\u00e9"]
args = []
for c in CHOICES:
    args += ["--choice", c]
check("choices", TINY, args, N, lambda t: t in CHOICES)

# what cannot compile says where
p = subprocess.run([TOOL, TINY, "--schema", json.dumps({"type": "object", "properties": {
    "x": {"type": "array", "uniqueItems": True}}})], capture_output=True, text=True)
ok(p.returncode == 2 and "/properties/x/uniqueItems" in p.stderr, "an unsupported schema keyword: exit 2 naming it", p.stderr)
p = subprocess.run([TOOL, TINY, "--regex", "ab(c"], capture_output=True, text=True)
ok(p.returncode == 2 and "regex: at 2" in p.stderr, "a regex that cannot compile: exit 2 with its offset", p.stderr)

if SMOL:
    chat = ("<|im_start|>system\nYou answer in JSON.<|im_end|>\n<|im_start|>user\n"
            "Describe a person: name, age and email.<|im_end|>\n<|im_start|>assistant\n")
    person = SCHEMAS["nested objects, required and optional"]
    info = check("SmolLM2: nested objects", SMOL, ["--schema", json.dumps(person)], 4,
                 schema_valid(person), prompt=chat, threads="2")
    if info:
        print("# SmolLM2 grammar cost: %s" % json.dumps(info))
    check("SmolLM2: json_object", SMOL, ["--json-object", "--max-string", "64"], 2,
          schema_valid({"type": "object"}), prompt=chat, threads="2")
else:
    n += 1
    print("ok %d # skip SmolLM2 not here or under the sanitizers" % n)
EOF
rc=$?
cat "$W/py.tap"
nf_n=$((nf_n + $(grep -c '^\(not \)\{0,1\}ok ' "$W/py.tap")))
nf_fail=$((nf_fail + $(grep -c '^not ok ' "$W/py.tap")))
is "the Python driver ran to its end" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$W/py.err" | tail -8
finish
