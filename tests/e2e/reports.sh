#!/bin/sh
# reports.sh - the reports of a real build of stories260K (from a cache seeded
# out of ../shared, offline) are valid for the tools that read them:
# gates.json against docs/schemas/gates.schema.json (jsonschema), junit.xml
# against the Jenkins JUnit schema (tests/data/junit/junit.xsd, xmlschema),
# gates.tap read by TAP::Parser (plan, counts, no parse errors),
# and the same for a build whose gate fails (exit 3, no image, reports still
# written).
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-reports-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
. "$SRC/tests/pyref.sh"
pyref_python
if ! "$PY" -c 'import jsonschema, xmlschema' 2>/dev/null; then
	echo "1..0 # skip jsonschema and xmlschema are not in build/venv"
	exit 0
fi
CHECK="$SRC/tests/report_check.py"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
t "cache add seeds the model and tokenizer" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin"
# Autotuning adds nothing the reports read; without it the build takes a second.
sed 's/^  autotune: true$/  autotune: false/' "$SRC/recipes/llama.yaml" >"$W/pass.yaml"
# A decode floor no CPU reaches: the performance gates fail.
sed 's/^    min_decode_tokens_per_s: .*/    min_decode_tokens_per_s: 1e12/' "$W/pass.yaml" >"$W/fail.yaml"

"$NF" build "$W/pass.yaml" --out "$W/pass" >"$W/pass.log" 2>&1
is "build exits 0" "$?" 0
"$NF" build "$W/fail.yaml" --out "$W/fail" >"$W/fail.log" 2>&1
is "build with an impossible decode floor exits 3" "$?" 3
t "the failed build made no image" test ! -e "$W/fail/oci"

for run in pass fail; do
	R="$W/$run/reports"
	t "$run: gates.json validates against docs/schemas/gates.schema.json" "$PY" "$CHECK" json "$R/gates.json"
	is "$run: schema_version" "$(json_get "$R/gates.json" "j['schema_version']")" 1
	t "$run: junit.xml validates against the Jenkins JUnit schema (xmlschema)" "$PY" "$CHECK" junit "$R/junit.xml"
done
# 2 profiles x (3 prompts + decode throughput + peak memory)
is "pass: TAP::Parser reads gates.tap: plan, counts, no parse errors" \
	"$(perl "$SRC/tests/report_tap.pl" "$W/pass/reports/gates.tap" | head -1)" \
	"version=13 planned=10 run=10 passed=10 failed=0 skipped=0 parse_errors=0"
is "fail: TAP::Parser reads gates.tap with the two failed decode bounds" \
	"$(perl "$SRC/tests/report_tap.pl" "$W/fail/reports/gates.tap" | head -1)" \
	"version=13 planned=10 run=10 passed=8 failed=2 skipped=0 parse_errors=0"
is "fail: junit.xml has one failure per performance gate, its value and bound in the message" \
	"$("$PY" -c '
import sys, xml.etree.ElementTree as E
fs = [c.find("failure") for c in E.parse(sys.argv[1]).getroot().iter("testcase") if c.find("failure") is not None]
print(len(fs), all("decode_tokens_per_s = " in f.get("message") and "(bound >= 1e+12 tokens/s)" in f.get("message") for f in fs))' \
		"$W/fail/reports/junit.xml")" "2 True"
is "fail: the performance gates failed, the correctness gates passed" \
	"$(json_get "$W/fail/reports/gates.json" "sorted(set((g['gate'], g['verdict']) for p in j['profiles'] for g in p['gates']))")" \
	"[('correctness', 'passed'), ('performance', 'failed')]"

finish
