#!/bin/sh
# reports.sh - the reports of a real build of stories260K (from a cache seeded
# out of ../shared, offline) are valid for the tools that read them:
# gates.json against docs/schemas/gates.schema.json (jsonschema), junit.xml
# against the Jenkins JUnit schema (tests/data/junit/junit.xsd, xmlschema),
# gates.tap read by TAP::Parser (plan, counts, no parse errors), summary.md
# a table with a row per profile, chart.svg self-contained SVG with a point
# per profile; none of them in the image but gates.json (the artifact);
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
	t "$run: summary.md has one table row per profile" "$PY" "$CHECK" md "$R/summary.md" 2
	t "$run: chart.svg is SVG 1.1 with no script, a point per profile" "$PY" "$CHECK" svg "$R/chart.svg" 2
	t "$run: no temporary file left beside the reports" sh -c \
		"ls -A '$R' | grep -vx -e gates.json -e junit.xml -e gates.tap -e summary.md -e chart.svg -e tactics | grep -q . && exit 1 || exit 0"
done
# A headline column is there exactly when gates.json has its metric.
columns() {
	"$PY" -c '
import json, sys
cols = [("engine size (MiB)", ["engine_mib"]), ("decode tok/s", ["decode_tokens_per_s"]),
        ("prefill tok/s", ["prefill_tokens_per_s"]), ("TTFT (ms)", ["ttft_ms"]),
        ("peak memory (MiB)", ["engine_peak_rss_mib"]), ("ppl ratio", ["ppl_ratio"]),
        ("KL (nats)", ["kl_mean"]), ("top-1 agreement", ["top1_agreement"]),
        ("greedy agreement", ["agreement_min", "agreement"])]
j = json.load(open(sys.argv[1]))
have = {m["name"] for p in j["profiles"] for g in p["gates"]
        for ms in [g["metrics"]] + [c["metrics"] for c in g["cases"]] for m in ms}
print("| profile | device | precision | verdict |" + "".join(" %s |" % h for h, ms in cols if have & set(ms)))' "$1"
}
is "pass: summary.md's columns are the metrics this build measured" \
	"$(grep '^| profile' "$W/pass/reports/summary.md")" "$(columns "$W/pass/reports/gates.json")"
is "fail: summary.md lists each failed decode bound with its reason" \
	"$(grep -cF '** performance, decode throughput: failed: decode\_tokens\_per\_s ' "$W/fail/reports/summary.md")" 2
if command -v rsvg-convert >/dev/null 2>&1; then
	t "pass: librsvg renders chart.svg" rsvg-convert -o "$W/chart.png" "$W/pass/reports/chart.svg"
else
	skip "rsvg-convert not installed"
fi
t "fail: chart.svg draws the failed profiles in red" grep -q 'class="point".*fill="#c62828"' "$W/fail/reports/chart.svg"

# The reports describe this run and this host: none of them is in the image.
# gates.json alone travels beside it, as the gate-report artifact.
in_blobs() { test -e "$W/pass/oci/blobs/sha256/$(sha256sum "$1" | cut -d' ' -f1)"; }
not_in_blobs() { ! in_blobs "$1"; }
for f in junit.xml gates.tap summary.md chart.svg; do
	t "$f is not a blob of the image" not_in_blobs "$W/pass/reports/$f"
done
t "gates.json is attached beside the image, byte for byte" in_blobs "$W/pass/reports/gates.json"
# What TAP::Parser must count, from gates.json: a test per case (one for a
# gate without cases), failed cases of gates that ran, every case of a
# skipped gate skipped.
tap_expected() {
	"$PY" -c '
import json, sys
j = json.load(open(sys.argv[1]))
gates = [g for p in j["profiles"] for g in p["gates"]]
vs = [v for g in gates for v in ([g["verdict"]] if not g["cases"] else
      [g["verdict"] if g["verdict"] == "skipped" else c["verdict"] for c in g["cases"]])]
n, f, s = len(vs), vs.count("failed"), vs.count("skipped")
print("version=13 planned=%d run=%d passed=%d failed=%d skipped=%d parse_errors=0" % (n, n, n - f, f, s))' "$1"
}
for run in pass fail; do
	is "$run: TAP::Parser reads gates.tap: plan, counts, no parse errors" \
		"$(perl "$SRC/tests/report_tap.pl" "$W/$run/reports/gates.tap" | head -1)" \
		"$(tap_expected "$W/$run/reports/gates.json")"
done
t "fail: gates.tap has failed tests" grep -q '^not ok ' "$W/fail/reports/gates.tap"
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
