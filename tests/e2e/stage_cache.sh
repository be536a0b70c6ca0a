#!/bin/sh
# stage_cache.sh - every stage of a build is keyed by its inputs and its
# result cached: a rebuild with nothing changed runs no stage (the log says
# so per stage), keeps OUT/oci byte for byte and takes well under a second;
# changing one profile's gate threshold re-runs that gate and the package,
# nothing else; `plan` says so before any work; two recipes pinning one
# checkpoint in one build fetch and convert it once; --rebuild runs
# everything again.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-stages-XXXXXX)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
export NIMFACTORY_OFFLINE=1 NIMFACTORY_CACHE="$W/cache"
unset SOURCE_DATE_EPOCH

"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null
# Two profiles (fp32, int8-wo); autotune off keeps the first build short.
sed 's/autotune: true/autotune: false/' "$SRC/recipes/llama.yaml" >"$W/r.yaml"
build() { # build RECIPE LOG [ARGS...]
	r=$1 log=$2
	shift 2
	"$NF" build "$r" --out "$W/out" --log-format text "$@" >"$W/$log" 2>&1
}
count() { grep -c -- "$2" "$W/$1"; }

build "$W/r.yaml" first.log
is "first build" "$?" 0
is "first build: every stage ran (the sources were put in the cache first)" \
	"$(grep ': cached:' "$W/first.log" | grep -vc 'fetch: cached: fetch')" 0
t "first build: packaged" grep -q 'package: OCI image' "$W/first.log"
cp -R "$W/out/oci" "$W/oci-first"

build "$W/r.yaml" again.log
is "rebuild" "$?" 0
is "rebuild: both fetches cached" "$(count again.log 'fetch: cached: fetch ')" 2
is "rebuild: convert cached" "$(count again.log 'convert: cached: key ')" 1
is "rebuild: both compiles cached" "$(count again.log 'compile: cached: cpu-')" 2
is "rebuild: both profiles' gates cached" "$(count again.log 'gate: cached: cpu-.*: passed')" 2
is "rebuild: package cached" "$(count again.log 'package: cached: key ')" 1
is "rebuild: no checkpoint loaded, no reference, no engine, no image made" \
	"$(grep -c -e 'loading the checkpoint' -e 'float32 reference' -e 'quantize' -e 'OCI image' "$W/again.log")" 0
t "rebuild: OUT/oci kept byte for byte" diff -r "$W/oci-first" "$W/out/oci"
secs=$(sed -n 's/.*built stories260k in \([0-9.]*\) s.*/\1/p' "$W/again.log")
if [ -n "${NF_SAN:-}" ]; then
	skip "rebuild time: the sanitizer build is slower than the bound"
else
	is "rebuild in well under a second ($secs s)" "$(awk -v s="$secs" 'BEGIN{print (s != "" && s < 0.5) ? "yes" : "no"}')" yes
fi

# plan, before any work, agrees with what the rebuild found.
"$NF" plan "$W/r.yaml" >"$W/plan.txt" 2>&1
is "plan: every stage cached, the gates' float32 reference too" "$(grep -c '^ *[0-9]* .* cached' "$W/plan.txt")" 9
is "plan: each profile's memory from the checkpoint's header, against the host's" \
	"$(grep -c 'memory: needs [0-9.]* MiB (weights [0-9.]*, KV [0-9.]*, workspace [0-9.]*) of [0-9.]* GiB on cpu' "$W/plan.txt")" 2
t "plan: nothing to run, no runner time" grep -q '^  total  *0.00 s$' "$W/plan.txt"
"$NF" plan "$W/r.yaml" --json >"$W/plan.json"
is "plan --json: the keys a build uses, every stage cached, the gates' times recorded" \
	"$(json_get "$W/plan.json" "[s['key'] for s in j['stages'] if s['kind'] == 'gate'] == [s['key'] for s in json.load(open('$W/out/plan.json'))['stages'] if s['kind'] == 'gate'] and all(s['cached'] for s in j['stages']) and all(s['seconds'] > 0 for s in j['stages'] if s['kind'] == 'gate')")" True
PY="$SRC/build/venv/bin/python"
if "$PY" -c 'import jsonschema' 2>/dev/null; then
	t "plan --json validates against docs/schemas/plan.schema.json" "$PY" -c '
import json, sys, jsonschema
s = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(s)
jsonschema.validate(json.load(open(sys.argv[2])), s, cls=jsonschema.Draft202012Validator)
' "$SRC/docs/schemas/plan.schema.json" "$W/plan.json"
else
	skip "jsonschema is not in build/venv"
fi
"$NF" plan "$W/r.yaml" --cache "$W/empty-cache" >"$W/plan-empty.txt" 2>&1
is "plan against an empty cache: every stage runs, without an estimate" "$(grep -c '^ *[0-9]* .* runs (time unknown)$' "$W/plan-empty.txt")" 9
is "plan against an empty cache: the checkpoint is not at hand, so no fit" \
	"$(grep -c 'fit unknown until fetched' "$W/plan-empty.txt")" 2

# One gate threshold of one precision: that gate and the package run again.
sed 's/fp32: {min_token_agreement: 1.0, max_logit_rel_error: 0.0001}/fp32: {min_token_agreement: 1.0, max_logit_rel_error: 0.0002}/' \
	"$W/r.yaml" >"$W/gate.yaml"
t "the recipe changed" sh -c "! cmp -s '$W/r.yaml' '$W/gate.yaml'"
"$NF" plan "$W/gate.yaml" >"$W/plan-gate.txt" 2>&1
is "plan: the fp32 gate and the package would run, nothing else" \
	"$(sed -n 's/^ *[0-9]* \([a-z]*\) \([^ ]*\).* runs (.*)$/\1 \2/p' "$W/plan-gate.txt" | tr '\n' ' ')" "gate cpu-fp32-tp1 package image "
t "plan: the fp32 gate's estimate is the first build's time (its threshold is not in the scale key)" \
	grep -q 'gate cpu-fp32-tp1 .* runs (about [0-9.]* s, recorded)$' "$W/plan-gate.txt"
t "plan: the reference stays cached (a threshold is not one of its inputs)" \
	grep -q 'float32 reference .* cached (key' "$W/plan-gate.txt"
"$NF" plan "$W/gate.yaml" --emit gitlab >"$W/child.yml" 2>&1
is "plan --emit gitlab: each job carries its estimated runner time" \
	"$(grep -c '^    NIMFACTORY_ESTIMATED_SECONDS: "[0-9.]*"$' "$W/child.yml")" 3
if "$PY" -c 'import check_jsonschema' 2>/dev/null; then
	t "and stays valid against GitLab's CI schema" \
		"$SRC/build/venv/bin/check-jsonschema" --builtin-schema vendor.gitlab-ci "$W/child.yml"
else
	skip "check-jsonschema is not in build/venv"
fi
"$NF" plan "$W/gate.yaml" --emit jenkins >"$W/Jenkinsfile" 2>&1
is "plan --emit jenkins: the estimate as a comment in each stage" \
	"$(grep -c '// nimfactory plan estimates [0-9.]* s of runner time' "$W/Jenkinsfile")" 3
build "$W/gate.yaml" gate.log
is "build with another fp32 threshold" "$?" 0
is "threshold: convert cached" "$(count gate.log 'convert: cached: key ')" 1
is "threshold: both compiles cached" "$(count gate.log 'compile: cached: cpu-')" 2
is "threshold: the int8-wo gate cached" "$(count gate.log 'gate: cached: cpu-int8-wo-tp1')" 1
is "threshold: the fp32 gate ran" "$(count gate.log 'gate: cpu-fp32-tp1\.\.\.')" 1
is "threshold: no engine built" "$(count gate.log 'quantize')" 0
is "threshold: the float32 reference from the cache, the checkpoint not loaded" \
	"$(count gate.log 'gate: cached: float32 reference (key ') $(count gate.log 'loading the checkpoint')" "1 0"
t "threshold: packaged again" grep -q 'package: OCI image' "$W/gate.log"
t "the new threshold is in the report" \
	sh -c "grep -q '\"threshold\": 0.0002' '$W/out/reports/gates.json'"

build "$W/gate.yaml" gate-again.log
is "the changed recipe, rebuilt: nothing runs" "$(count gate-again.log ': cached:')" 8

# Two recipes pinning one checkpoint, in one build on an empty cache: it is
# fetched and converted once, and each recipe gets OUT/<model name>.
sed 's/precisions: \[fp32, int8-wo\]/precisions: [fp32]/; s/precision_preference: .*/precision_preference: [fp32]/' \
	"$W/r.yaml" >"$W/a.yaml"
sed 's/name: stories260k$/name: stories260k-half/; s/precisions: \[fp32\]/precisions: [fp16]/; s/precision_preference: .*/precision_preference: [fp16]/; s|repository: nimfactory/stories260k|repository: nimfactory/stories260k-half|' \
	"$W/a.yaml" >"$W/b.yaml"
NIMFACTORY_CACHE="$W/cache-two" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null
NIMFACTORY_CACHE="$W/cache-two" "$NF" build "$W/a.yaml" "$W/b.yaml" --out "$W/two" --log-format text >"$W/two.log" 2>&1
is "two recipes in one build" "$?" 0
is "the checkpoint loaded once" "$(count two.log 'convert: loading the checkpoint')" 1
is "the second recipe's sources came from the first's fetch" "$(count two.log 'fetched for an earlier recipe')" 2
t "the second recipe's engine from the loaded checkpoint" grep -q 'convert: cached: the checkpoint loaded for an earlier recipe' "$W/two.log"
t "each recipe has its own OUT/<model name>" test -f "$W/two/stories260k/oci/index.json" -a -f "$W/two/stories260k-half/oci/index.json"
is "each with its own profile" \
	"$(json_get "$W/two/stories260k/plan.json" "j['profiles'][0]['name']") $(json_get "$W/two/stories260k-half/plan.json" "j['profiles'][0]['name']")" \
	"cpu-fp32-tp1 cpu-fp16-tp1"
NIMFACTORY_CACHE="$W/cache-two" "$NF" build "$W/a.yaml" "$W/a.yaml" --out "$W/same" >"$W/same.log" 2>&1
is "two recipes writing one OUT: refused" "$?" 2
t "the refusal says why" grep -q 'an earlier recipe of this build wrote it' "$W/same.log"

build "$W/r.yaml" rebuild.log --rebuild
is "--rebuild" "$?" 0
is "--rebuild: nothing from the cache but the sources" "$(grep ': cached:' "$W/rebuild.log" | grep -vc 'fetch: cached: fetch')" 0
# (its gate report, measured anew, is another artifact beside it)
is "--rebuild: the same image" "$(json_get "$W/out/oci/index.json" "j['manifests'][0]['digest']")" \
	"$(json_get "$W/oci-first/index.json" "j['manifests'][0]['digest']")"
finish
