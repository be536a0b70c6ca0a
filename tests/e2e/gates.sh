#!/bin/sh
# gates.sh - the quantization gates end to end on the real stories260K model,
# from a cache seeded out of ../shared (offline): a recipe that leaves every
# threshold to the per-precision defaults builds and reports the
# teacher-forced metrics and the performance ratios to fp32; a recipe
# without an fp32 profile still gets its ratios (an fp32 engine is built for
# the measurement) and evaluates on a text it names; an impossible
# threshold exits 3 with no image and the failing gate named in the reports.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-gates-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
t "cache add seeds the model and tokenizer" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin"

# recipe FILE PRECISIONS LINES: recipes/llama.yaml with these precisions,
# without its thresholds (the defaults table decides), serving preferences
# left to the defaults, and LINES added to gates.correctness.  Its sources
# are pinned URLs, which the seeded cache answers.
recipe() {
	sed -e '/^    default:/,/^      fp32:/d' -e "s/precisions: \[fp32, int8-wo\]/precisions: $2/" \
		-e 's/^serving:/serving: {chat_template: plain}\nold_serving:/' "$SRC/recipes/llama.yaml" |
		sed -e '/^old_serving:/,/^image:/{/^image:/!d}' |
		sed -e "s|^    max_tokens: 64|    max_tokens: 64\n$3|" >"$1"
}
recipe "$W/defaults.yaml" "[fp32, int8-wo]" "    eval_tokens: 1024"
t "the recipe without thresholds validates" "$NF" validate "$W/defaults.yaml"
"$NF" build "$W/defaults.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "build with the default thresholds exits 0" "$?" 0
R="$W/out/reports/gates.json"
is "overall verdict passed" "$(json_get "$R" "j['verdict']")" passed
is "the evaluation text's metrics, by name" \
	"$(json_get "$R" "sorted(m['name'] for p in j['profiles'] if p['precision']=='int8-wo' for g in p['gates'] if g['gate']=='correctness' for m in g['metrics'])")" \
	"['agreement_min', 'kl_mean', 'perplexity', 'perplexity_ref', 'ppl_ratio', 'rel_err_max', 'rel_err_mean', 'top1_agreement']"
is "int8-wo's bounds are the defaults table's" \
	"$(json_get "$R" "[(m['name'], m['threshold']) for p in j['profiles'] if p['precision']=='int8-wo' for g in p['gates'] if g['gate']=='correctness' for m in g['metrics'] if m['name'] in ('top1_agreement','kl_mean','ppl_ratio')]")" \
	"[('top1_agreement', 0.8), ('kl_mean', 0.2), ('ppl_ratio', 0.85)]"
is "fp32 scores the reference exactly" \
	"$(json_get "$R" "[(m['name'], m['value']) for p in j['profiles'] if p['precision']=='fp32' for g in p['gates'] if g['gate']=='correctness' for m in g['metrics'] if m['name'] in ('top1_agreement','kl_mean','ppl_ratio')]")" \
	"[('top1_agreement', 1.0), ('kl_mean', 0.0), ('ppl_ratio', 1.0)]"
is "performance metrics and ratios to fp32, by name" \
	"$(json_get "$R" "sorted(m['name'] for p in j['profiles'] if p['precision']=='int8-wo' for g in p['gates'] if g['gate']=='performance' for m in g['metrics'])")" \
	"['decode_speedup', 'decode_tokens_per_s', 'engine_mib', 'engine_peak_rss_mib', 'memory_ratio', 'prefill_speedup', 'prefill_tokens_per_s', 'process_peak_rss_mib', 'size_ratio', 'ttft_ms', 'ttft_ratio']"
t "int8-wo is under half of fp32's size" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
r = [m["value"] for p in j["profiles"] if p["precision"] == "int8-wo" for g in p["gates"] for m in g["metrics"] if m["name"] == "size_ratio"]
assert len(r) == 1 and 0 < r[0] < 0.5, r' "$R"
t "the float32 reference ran once, before the profiles" sh -c "grep -c 'float32 reference:' '$W/build.log' | grep -qx 1"
t "the gates' temporary folder is gone" sh -c "! ls -d '$W'/out.gates-* 2>/dev/null"
t "the image was made" test -d "$W/out/oci"
t "the fp32 profile's own measurement is the ratios' reference: its ratios are 1" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
r = [m["value"] for p in j["profiles"] if p["precision"] == "fp32" for g in p["gates"] for m in g["metrics"] if m["name"].endswith(("_speedup", "_ratio")) and m["name"] != "ppl_ratio"]
assert r == [1.0] * 5, r' "$R"

# int8-wo alone, on a text the recipe names, with ratio bounds: fp32 is built to measure against
printf 'Once upon a time there was a little dog. The dog liked to play with a red ball in the park.\n%.0s' 1 2 3 4 5 6 7 8 >"$W/story.txt"
recipe "$W/int8.yaml" "[int8-wo]" "    eval_text: story.txt"
sed -i -e 's/^    max_peak_memory_mib: 256/    max_peak_memory_mib: 256\n    max_size_ratio: {int8-wo: 0.5}/' "$W/int8.yaml"
"$NF" build "$W/int8.yaml" --out "$W/out8" >"$W/build8.log" 2>&1
is "int8-wo alone builds" "$?" 0
t "an fp32 engine was built for the ratios" grep -q "fp32 engine, built to measure the ratios against" "$W/build8.log"
t "the named evaluation text was used" grep -q "float32 reference on story.txt" "$W/build8.log"
is "size_ratio bounded by the recipe, and met" \
	"$(json_get "$W/out8/reports/gates.json" "[(m['threshold'], m['ok']) for p in j['profiles'] for g in p['gates'] for m in g['metrics'] if m['name']=='size_ratio']")" \
	"[(0.5, True)]"
is "the evaluation positions are the text's tokens" \
	"$(json_get "$W/out8/reports/gates.json" "[c['positions'] > 100 for p in j['profiles'] for g in p['gates'] for c in g['cases'] if c['name']=='evaluation text']")" \
	"[True]"

# an impossible threshold: exit 3, no image, the gate named in every report
recipe "$W/impossible.yaml" "[fp32, int8-wo]" "    precisions: {int8-wo: {min_ppl_ratio: 1.5}}"
"$NF" build "$W/impossible.yaml" --out "$W/outx" >"$W/buildx.log" 2>&1
is "an impossible min_ppl_ratio exits 3" "$?" 3
t "no image was written" sh -c "! test -e '$W/outx/oci'"
is "the failing gate and metric in gates.json" \
	"$(json_get "$W/outx/reports/gates.json" "[(p['name'], g['gate'], m['name']) for p in j['profiles'] for g in p['gates'] for m in g['metrics'] if not m['ok']]")" \
	"[('cpu-int8-wo-tp1', 'correctness', 'ppl_ratio')]"
t "junit.xml names the failing metric" grep -q "ppl_ratio" "$W/outx/reports/junit.xml"
t "the log says which gate failed" grep -q "cpu-int8-wo-tp1 correctness evaluation text.*failed" "$W/buildx.log"
finish
