#!/bin/sh
# precisions.sh - every precision end to end, from a cache seeded out of
# ../shared (offline):
#   - recipes/stories260k-precisions.yaml builds fp32, fp16, bf16, int8-wo,
#     int4-wo, int4-awq and fp8-e4m3 engines, every one gated (the default
#     thresholds, int4's loosened by the recipe for a 64-channel model), the
#     image holds all seven, each runs, and its reports name them all;
#   - SmolLM2-135M-Instruct (not in the sanitizer build: its seven engines
#     take minutes there) in every precision with the default thresholds:
#     every gate passes, and the float32 and the int4-wo engine (the GGUF's
#     own Q4_1 blocks taken over) answer the chat question with Paris.
#
# The two builds are independent: SmolLM2's runs in the background, in a
# cache of its own, while stories260K's is built and checked.  SmolLM2's
# copy of the recipe neither autotunes nor compresses: the stories260K
# build autotunes every precision and gzips the image, and what is checked
# of SmolLM2 (its gates, its answers) does not depend on either.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
SHARED="${NF_SHARED:?}/models"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-precisions-XXXXXX)
SMOL_PID=
trap '[ -n "$SMOL_PID" ] && kill "$SMOL_PID" 2>/dev/null; rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

ALL="fp32 fp16 bf16 int8-wo int4-wo int4-awq fp8-e4m3"
export NIMFACTORY_OFFLINE=1
SMOL_PID=
if [ "${NF_SAN:-}" != 1 ]; then
	sed -e "s/precisions: \[fp32, int8-wo\]/precisions: [$(echo "$ALL" | sed 's/ /, /g')]/" \
		-e '/^    default: {min_token_agreement/,/^      fp32: {min_token/d' \
		-e 's/^  precision_preference: .*/  precision_preference: [int4-wo, int8-wo, fp32]/' \
		-e 's/^  autotune: true$/  autotune: false/' -e 's/^  compression: gzip$/  compression: none/' \
		"$SRC/recipes/smollm2-135m-instruct.yaml" >"$W/smollm2.yaml"
	(
		export NIMFACTORY_CACHE="$W/cache-smollm2"
		"$NF" cache add "$SHARED/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf" &&
			"$NF" build "$W/smollm2.yaml" --out "$W/smollm2"
	) >"$W/smollm2.log" 2>&1 &
	SMOL_PID=$!
fi
export NIMFACTORY_CACHE="$W/cache"
t "cache add seeds stories260K" "$NF" cache add "$SHARED/stories260K/stories260K.bin" \
	"$SHARED/stories260K/tok512.bin"

# profiles_passed OUT: the precisions of OUT's gates.json whose profile
# passed, in recipe order.
profiles_passed() {
	json_get "$1/reports/gates.json" \
		"' '.join(p['precision'] for p in j['profiles'] if p['verdict'] == 'passed')"
}

"$NF" build "$SRC/recipes/stories260k-precisions.yaml" --out "$W/stories" >"$W/stories.log" 2>&1
is "stories260K in every precision: the build exits 0" "$?" 0
is "every precision's profile passed its gates" "$(profiles_passed "$W/stories")" "$ALL"
is "the image holds the seven profiles" \
	"$("$NF" inspect "$W/stories" | grep -c '^  cpu-.* passed ')" 7
for p in int4-awq fp8-e4m3 bf16; do
	"$NF" run "$W/stories" --profile "cpu-$p-tp1" --prompt "Once upon a time" --max-tokens 12 \
		--quiet >"$W/run-$p.txt" 2>"$W/run-$p.err"
	t "the $p engine of the image tells a story" grep -q '[a-z]' "$W/run-$p.txt"
done
t "the Markdown summary has a row per profile" sh -c \
	"[ \$(grep -c '^| cpu-' '$W/stories/reports/summary.md') -eq 7 ]"
t "AWQ lowers int4's perplexity on the evaluation text" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
ppl = {p["precision"]: m["value"] for p in j["profiles"] for g in p["gates"]
       for m in g["metrics"] if m["name"] == "perplexity"}
assert ppl["int4-awq"] < ppl["int4-wo"], ppl' "$W/stories/reports/gates.json"

if [ "${NF_SAN:-}" = 1 ]; then
	skip "SmolLM2 in every precision: not in the sanitizer build (minutes there)"
	skip "SmolLM2: every gate passes"
	skip "SmolLM2 fp32 answers Paris"
	skip "SmolLM2 int4-wo answers Paris"
	finish
	exit $?
fi

wait "$SMOL_PID"
is "SmolLM2 in every precision: the build exits 0" "$?" 0
SMOL_PID=
t "its recipe copy neither autotunes nor compresses" sh -c \
	"grep -qx '  autotune: false' '$W/smollm2.yaml' && grep -qx '  compression: none' '$W/smollm2.yaml'"
is "SmolLM2: every precision's profile passed with the default thresholds" \
	"$(profiles_passed "$W/smollm2")" "$ALL"
for p in fp32 int4-wo; do
	"$NF" run "$W/smollm2" --profile "cpu-$p-tp1" --chat "What is the capital of France?" \
		--max-tokens 16 --quiet >"$W/chat-$p.txt" 2>&1
	t "SmolLM2 $p answers Paris" grep -q 'The capital of France is Paris' "$W/chat-$p.txt"
done
finish
