#!/bin/sh
# build_llama.sh - `nimfactory build recipes/llama.yaml` end to end on the
# real stories260K model, from a cache seeded out of ../shared (offline):
# the fp32 engine reproduces the reference sentence, the int8 engine passes
# its gate, the image unpacks with umoci and reads with skopeo, a second
# build reuses the cache and gives the same image digest, the Hugging Face
# copy builds to the same outputs, and failures give their exit codes.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-build-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
SENTENCE="Once upon a time, there was a little girl named Lily. She loved to play outside in the park."

t "cache add seeds the model and tokenizer" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin"
t "recipes/llama.yaml validates" "$NF" validate "$SRC/recipes/llama.yaml"

"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "build exits 0" "$?" 0
t "the log names every stage" grep -q "package: done" "$W/build.log"

"$NF" run "$W/out" --profile cpu-fp32-tp1 --prompt "" --max-tokens 40 --quiet >"$W/fp32.txt" 2>"$W/run.err"
is "run exits 0" "$?" 0
case "$(cat "$W/fp32.txt")" in
"$SENTENCE"*) is "fp32 greedy text begins with the reference sentence" ok ok ;;
*) is "fp32 greedy text begins with the reference sentence" "$(cat "$W/fp32.txt")" "$SENTENCE..." ;;
esac

R="$W/out/reports/gates.json"
is "overall gate verdict" "$(json_get "$R" "j['verdict']")" passed
is "int8-wo profile passed both its gates" \
	"$(json_get "$R" "[(g['gate'], g['verdict']) for p in j['profiles'] if p['name']=='cpu-int8-wo-tp1' for g in p['gates']]")" \
	"[('correctness', 'passed'), ('performance', 'passed')]"
t "junit.xml is well-formed XML with test suites" python3 -c '
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
assert r.tag == "testsuites" and len(r.findall("testsuite")) >= 2' "$W/out/reports/junit.xml"
t "gates.tap is TAP" grep -q '^1\.\.' "$W/out/reports/gates.tap"

t "model_manifest.yaml lists both profiles" sh -c "grep -c 'precision:' '$W/out/model_manifest.yaml' | grep -qx 2"
t "skopeo reads the layout" skopeo inspect "oci:$W/out/oci:1.0.0"
skopeo inspect --raw "oci:$W/out/oci:1.0.0" >"$W/manifest.json" 2>/dev/null
is "manifest carries the recipe digest" \
	"$(json_get "$W/manifest.json" "j['annotations']['io.nimfactory.recipe.digest']")" \
	"$(json_get "$W/out/plan.json" "j['recipe_digest']")"
t "umoci unpacks the image" umoci unpack --rootless --image "$W/out/oci:1.0.0" "$W/bundle"
t "the image holds the model manifest" test -f "$W/bundle/rootfs/opt/nim/model_manifest.yaml"
t "the image holds both engines" sh -c "ls '$W/bundle/rootfs/opt/nim/engines' | wc -l | grep -qx 2"
t "the engine in the image is the engine that was gated" cmp \
	"$W/bundle/rootfs/opt/nim/engines/$(json_get "$W/out/plan.json" "[p['id'] for p in j['profiles'] if p['precision']=='int8-wo'][0]")/weights.safetensors" \
	"$W/out/engines/$(json_get "$W/out/plan.json" "[p['id'] for p in j['profiles'] if p['precision']=='int8-wo'][0]")/weights.safetensors"

# A second build reuses every compiled engine and gives the same image.
"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out2" >"$W/build2.log" 2>&1
is "second build exits 0" "$?" 0
is "second build compiles nothing" "$(json_get "$W/out2/plan.json" "all(s['cached'] for s in j['stages'] if s['kind']=='compile')")" True
is "same manifest digest from a second build" \
	"$(json_get "$W/out2/oci/index.json" "j['manifests'][0]['digest']")" \
	"$(json_get "$W/out/oci/index.json" "j['manifests'][0]['digest']")"

# The Hugging Face copy of the model builds to the same outputs.
t "convert writes the Hugging Face layout" "$NF" convert "$MODELS/stories260K.bin" "$W/hf"
t "config.json and model.safetensors written" test -f "$W/hf/config.json" -a -f "$W/hf/model.safetensors"
cp "$MODELS/tok512.bin" "$W/tok512.bin"
sed -e '/^  source:/,/^  tokenizer:/c\  source:\n    path: hf\n    format: hf\n  tokenizer:' \
	-e 's|^    url: .*tok512.bin$|    path: tok512.bin|' \
	-e '/^    sha256: 037c/d' "$SRC/recipes/llama.yaml" >"$W/hf.yaml"
"$NF" build "$W/hf.yaml" --out "$W/out-hf" >"$W/build-hf.log" 2>&1
is "build from the Hugging Face copy exits 0" "$?" 0
for prec in fp32 int8-wo; do
	"$NF" run "$W/out" --profile "cpu-$prec-tp1" --prompt "Lily" --max-tokens 64 --quiet >"$W/a.txt" 2>/dev/null
	"$NF" run "$W/out-hf" --profile "cpu-$prec-tp1" --prompt "Lily" --max-tokens 64 --quiet >"$W/b.txt" 2>/dev/null
	t "$prec engine from the HF copy generates the same text" cmp "$W/a.txt" "$W/b.txt"
done

# JSON logs for log collectors.
"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out-json" --log-format json >/dev/null 2>"$W/json.log"
is "json-log build exits 0" "$?" 0
t "every log line is a JSON object with a stage" python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert lines and all("stage" in l and "ts" in l for l in lines)' "$W/json.log"

# A failed gate stops before packaging, with its own exit code.
sed 's/min_decode_tokens_per_s: .*/min_decode_tokens_per_s: 1000000000/' "$SRC/recipes/llama.yaml" >"$W/slow.yaml"
"$NF" build "$W/slow.yaml" --out "$W/out-gate" >"$W/gate.log" 2>&1
is "a failed gate exits 3" "$?" 3
t "its reports are written" test -f "$W/out-gate/reports/gates.json"
t "no image is made" test ! -e "$W/out-gate/oci"
is "the report says failed" "$(json_get "$W/out-gate/reports/gates.json" "j['verdict']")" failed

# Offline with nothing seeded: an environment error that says how to seed, and
# the previous output is left whole.
NIMFACTORY_CACHE="$W/empty-cache" "$NF" build "$SRC/recipes/llama.yaml" --out "$W/out" >"$W/offline.log" 2>&1
is "offline and unseeded exits 4" "$?" 4
t "the message says how to seed the cache" grep -q "nimfactory cache add" "$W/offline.log"
t "the previous output is untouched" test -f "$W/out/oci/index.json"
t "no partial output is left behind" sh -c "! ls -d '$W'/out.partial-* 2>/dev/null"

# One image per device under an image index.
sed 's/layout: single/layout: per-device/' "$SRC/recipes/llama.yaml" >"$W/per-device.yaml"
"$NF" build "$W/per-device.yaml" --out "$W/out-pd" >/dev/null 2>&1
is "per-device build exits 0" "$?" 0
skopeo inspect --raw "oci:$W/out-pd/oci:1.0.0" >"$W/index.json" 2>/dev/null
is "the tag names an image index" "$(json_get "$W/index.json" "j['mediaType']")" "application/vnd.oci.image.index.v1+json"
is "with one linux/amd64 image per device" \
	"$(json_get "$W/index.json" "[(m['annotations']['io.nimfactory.device'], m['platform']['os'], m['platform']['architecture']) for m in j['manifests']]")" \
	"[('cpu', 'linux', 'amd64')]"
t "the device image unpacks" umoci unpack --rootless --image "$W/out-pd/oci:1.0.0-cpu" "$W/bundle-pd"

"$NF" build "$W/missing.yaml" >/dev/null 2>&1
is "a missing recipe exits 2" "$?" 2
"$NF" run "$W/out" --profile no-such --quiet >/dev/null 2>"$W/noprof.err"
is "an unknown profile exits 2" "$?" 2
t "and lists the profiles" grep -q "cpu-fp32-tp1" "$W/noprof.err"
finish
