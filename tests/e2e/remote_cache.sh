#!/bin/sh
# remote_cache.sh - `nimfactory build --cache-to/--cache-from` through Debian's
# docker-registry on 127.0.0.1: build A pushes its compiled engines as stage
# artifacts; build B, with an empty cache of its own, pulls them, compiles
# nothing and makes the same image; `--profile` builds and gates one profile
# and makes no image; a corrupted layer and an artifact under another stage's
# tag are refused with a warning and rebuilt; `plan --cache-from` says which
# stages the registry holds without pulling them.  stories260K with the autotuner
# off, so that every build takes about a second (four builds in all).
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-remote-cache-XXXXXX)
. "$SRC/tests/tap.sh"
. "$SRC/tests/e2e/registry_lib.sh.inc"
trap 'reg_stop_all; rm -rf "$W"' EXIT INT TERM

if ! command -v docker-registry >/dev/null 2>&1; then
	echo "1..0 # skip docker-registry missing"
	exit 0
fi
export NIMFACTORY_OFFLINE=1 DOCKER_CONFIG="$W/no-docker"
unset NIMFACTORY_REGISTRY_USER NIMFACTORY_REGISTRY_PASSWORD
sed 's/autotune: true/autotune: false/' "$SRC/recipes/llama.yaml" >"$W/recipe.yaml"
reg_start R || { echo "Bail out! docker-registry did not start"; exit 1; }
REPO=cache/stories
REF="127.0.0.1:$R_PORT/$REPO"
API="http://127.0.0.1:$R_PORT/v2/$REPO"
MT='application/vnd.oci.image.manifest.v1+json'

# build NAME ARGS...: a build with a cache of its own (seeded with the sources only)
build() {
	_n=$1
	shift
	NIMFACTORY_CACHE="$W/cache-$_n" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null 2>&1
	NIMFACTORY_CACHE="$W/cache-$_n" "$NF" build "$W/recipe.yaml" --out "$W/out-$_n" --insecure "$@" >"$W/$_n.log" 2>&1
}
image_digest() {
	json_get "$W/out-$1/oci/index.json" "[m['digest'] for m in j['manifests'] if m['annotations']['org.opencontainers.image.ref.name']=='1.0.0'][0]"
}
compiled() { grep -c 'compile: .*quantize' "$W/$1.log"; }
pulled() { grep -c 'compile: cached: .*(pulled from' "$W/$1.log"; }
stage_tags() {
	curl -s "$API/tags/list" | python3 -c 'import json,sys; print(" ".join(sorted(t for t in json.load(sys.stdin)["tags"] if t.startswith("compile-"))))'
}

# --- A builds and pushes
build A --cache-to "$REF" --cache-from "$REF"
is "build A with --cache-to exits 0" "$?" 0
is "build A compiled both profiles" "$(compiled A)" 2
t "build A found nothing in the empty registry, without a warning" \
	sh -c "grep -q 'from $REF: 0 pulled, 5 missing, 0 refused' '$W/A.log' && ! grep -q warning '$W/A.log'"
# convert, two compiles and two profiles' gates (the image is pushed by `push`, not cached)
t "build A says it pushed 5 stages" grep -q "to $REF: 5 pushed, 0 already there" "$W/A.log"
KEYS=$(json_get "$W/out-A/plan.json" "' '.join(sorted(s['key'] for s in j['stages'] if s['kind'] == 'compile'))")
is "the registry holds one tag per compile stage, named by its key" "$(stage_tags)" \
	"$(for k in $KEYS; do printf 'compile-%s ' "$k"; done | sed 's/ $//')"
K1=${KEYS%% *}
K2=${KEYS##* }
curl -s -H "Accept: $MT" "$API/manifests/compile-$K1" >"$W/m1.json"
is "a stage artifact: its type, kind and key, one tar+zstd layer" \
	"$(json_get "$W/m1.json" "(j['artifactType'], j['annotations']['io.nimfactory.stage.kind'], j['annotations']['io.nimfactory.stage.key'], [l['mediaType'] for l in j['layers']])" | sed "s/$K1/KEY/")" \
	"('application/vnd.nimfactory.stage.v1', 'compile', 'KEY', ['application/vnd.oci.image.layer.v1.tar+zstd'])"

# --- plan on another machine: what the registry holds, asked by tag, nothing pulled
NIMFACTORY_CACHE="$W/cache-P" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null 2>&1
NIMFACTORY_CACHE="$W/cache-P" "$NF" plan "$W/recipe.yaml" --cache-from "$REF" --insecure >"$W/plan-P.txt" 2>&1
is "plan --cache-from exits 0" "$?" 0
is "plan --cache-from: convert, both compiles and both gates remote" \
	"$(sed -n 's/^ *[0-9]* \([a-z]*\) .* remote (key [0-9a-f]*)$/\1/p' "$W/plan-P.txt" | tr '\n' ' ')" \
	"convert compile gate compile gate "
t "plan --cache-from: the reference skipped (no gate runs), the package runs" \
	sh -c "grep -q 'float32 reference .* skipped (no gate runs)' '$W/plan-P.txt' && grep -q 'package image .* runs (about' '$W/plan-P.txt'"
is "plan --cache-from pulled nothing" "$(ls "$W/cache-P/stages" 2>/dev/null | wc -l)" 0
NIMFACTORY_CACHE="$W/cache-P" "$NF" plan "$W/recipe.yaml" >"$W/plan-P0.txt" 2>&1
is "plan without --cache-from: nothing remote, every stage but the fetches runs" \
	"$(grep -c ' remote (key' "$W/plan-P0.txt") $(grep -c '^ *[0-9]* .* runs (about' "$W/plan-P0.txt")" "0 7"

# --- B: another machine, empty cache, pulls everything
build B --cache-from "$REF"
is "build B with --cache-from exits 0" "$?" 0
is "build B compiled nothing" "$(compiled B)" 0
is "build B pulled both compile stages" "$(pulled B)" 2
t "build B's summary: 5 pulled, 0 missing, 0 refused" grep -q "from $REF: 5 pulled, 0 missing, 0 refused" "$W/B.log"
is "build B pulled both profiles' gates, and ran none" \
	"$(grep -c 'gate: cached: .*(pulled from' "$W/B.log") $(grep -c 'float32 reference' "$W/B.log")" "2 0"
is "build B made the same image as A (manifest digest)" "$(image_digest B)" "$(image_digest A)"
# (A's float32 reference stays in A's cache: it is not pushed, and B ran no gate)
stage_keys() { for d in "$W/cache-$1"/stages/*; do [ -f "$d/reference.json" ] || basename "$d"; done | sort | tr '\n' ' '; }
is "the pulled stages are in B's own cache, the image's too: the same keys as A's" \
	"$(stage_keys B)" "$(stage_keys A)"
t "the pulled engine is byte-identical to A's" diff -r "$W/cache-A/stages/$K1" "$W/cache-B/stages/$K1"

# --- --profile: one profile compiled (here: pulled) and gated, no image
build E --cache-from "$REF" --cache-to "$REF" --profile cpu-int8-wo-tp1
is "build --profile exits 0" "$?" 0
is "build --profile plans only that profile" "$(json_get "$W/out-E/plan.json" "[p['name'] for p in j['profiles']]")" "['cpu-int8-wo-tp1']"
t "build --profile pulled its convert, compile and gate stages, and pushed nothing: they are there already" \
	sh -c "grep -q 'from $REF: 3 pulled, 0 missing, 0 refused' '$W/E.log' && grep -q 'to $REF: 0 pushed, 3 already there' '$W/E.log'"
is "build --profile gated it, reports written" "$(json_get "$W/out-E/reports/gates.json" "[p['name'] for p in j['profiles']], j['verdict']")" "(['cpu-int8-wo-tp1'], 'passed')"
t "build --profile makes no image" test ! -e "$W/out-E/oci"
build F --profile cpu-nonesuch-tp1
is "build --profile with an unknown profile exits 2" "$?" 2
t "and names the profiles there are" grep -q "no such profile; it has: cpu-fp32-tp1, cpu-int8-wo-tp1" "$W/F.log"

# --- hostile registry content: stage 1's layer corrupted in the registry's
# storage, and stage 1's manifest put under stage 2's tag (a foreign artifact)
LAYER=$(json_get "$W/m1.json" "j['layers'][0]['digest'][7:]")
DATA="$W/reg-R/store/docker/registry/v2/blobs/sha256/$(echo "$LAYER" | cut -c1-2)/$LAYER/data"
if [ -f "$DATA" ]; then
	chmod u+w "$DATA"
	printf 'XXXX' | dd of="$DATA" bs=1 seek=100 conv=notrunc 2>/dev/null
	curl -s -o /dev/null -X PUT -H "Content-Type: $MT" --data-binary "@$W/m1.json" "$API/manifests/compile-$K2"
	build C --cache-from "$REF"
	is "build C (both stages bad in the registry) exits 0" "$?" 0
	t "build C warns that the corrupted stage was not used" grep -q "warning: .*remote cache .*:compile-$(echo "$K1" | cut -c1-12).* not used: .* its bytes hash to" "$W/C.log"
	t "build C warns that the foreign artifact was not used" grep -q "warning: .*remote cache .*:compile-$(echo "$K2" | cut -c1-12).* not used: it is annotated as another stage" "$W/C.log"
	t "build C's summary: 3 pulled (convert, gates), 0 missing, 2 refused" grep -q "from $REF: 3 pulled, 0 missing, 2 refused" "$W/C.log"
	is "build C compiled both itself" "$(compiled C)" 2
	is "build C still made the same image" "$(image_digest C)" "$(image_digest A)"
else
	skip "registry storage layout not found: $DATA"
	for _i in 1 2 3 4 5; do skip "(hostile registry content)"; done
fi

finish
