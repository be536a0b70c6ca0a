#!/bin/sh
# kv_cache.sh - a recipe's kv_cache list end to end on stories260K (offline,
# from the shared folder): `kv_cache: [f16, int8]` on an int8-wo target plans
# and builds two profiles, the default one under its old name and id and
# cpu-int8-wo-tp1-kv8, whose engine records "kv_cache": "int8"; both pass
# their gates, the image holds both, and the int8-cache engine runs.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
SHARED="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-kv-cache-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

# recipe FILE KV_LINE: an int8-wo stories260K recipe, with KV_LINE in its target
recipe() {
	cat >"$1" <<R
apiVersion: nimfactory/v1
kind: Recipe
model:
  name: stories260k-kv
  family: llama
  source: {path: $SHARED/stories260K.bin, format: llama2c}
  tokenizer: {path: $SHARED/tok512.bin}
build:
  targets:
    - device: cpu
      precisions: [int8-wo]
$2
  autotune: false
gates:
  correctness:
    prompts: ["Once upon a time"]
    max_tokens: 32
serving:
  chat_template: plain
image:
  repository: nimfactory/kv
  tag: "1"
  layout: single
  base: none
R
}
recipe "$W/plain.yaml" ""
recipe "$W/kv.yaml" "      kv_cache: [f16, int8]"
export NIMFACTORY_CACHE="$W/cache"

"$NF" build "$W/kv.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "kv_cache [f16, int8]: the build exits 0" "$?" 0
is "two profiles, both passed" \
	"$(json_get "$W/out/reports/gates.json" "' '.join(p['name'] + ':' + p['verdict'] for p in j['profiles'])")" \
	"cpu-int8-wo-tp1:passed cpu-int8-wo-tp1-kv8:passed"
KV8=$(json_get "$W/out/plan.json" "[p['id'] for p in j['profiles'] if p['kv_cache'] == 'int8'][0]")
is "the kv8 engine's config.json records kv_cache int8" \
	"$(json_get "$W/out/engines/$KV8/config.json" "j['kv_cache']")" int8
"$NF" plan "$W/plain.yaml" >"$W/plain.plan" 2>&1
PLAIN=$(awk '$1 == "cpu-int8-wo-tp1" {print $2}' "$W/plain.plan")
is "the default profile keeps the id it has without the key" \
	"$(json_get "$W/out/plan.json" "[p['id'] for p in j['profiles'] if p['name'] == 'cpu-int8-wo-tp1'][0]")" \
	"$PLAIN"
is "the image holds both profiles" "$("$NF" inspect "$W/out" | grep -c '^  cpu-int8-wo-tp1.* passed ')" 2
"$NF" run "$W/out" --profile cpu-int8-wo-tp1-kv8 --prompt "Once upon a time" --max-tokens 12 \
	--quiet >"$W/run.txt" 2>"$W/run.err"
t "the int8-cache engine of the image tells a story" grep -q '[a-z]' "$W/run.txt"
finish
