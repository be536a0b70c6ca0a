#!/bin/sh
# reproducible.sh - the same recipe built twice, into different output
# folders, with different caches, umasks, time zones and clocks, gives the
# same image to the byte (same manifest digest); a recipe that changes only a
# gate shares every engine and weights layer with it; SOURCE_DATE_EPOCH moves
# the image's timestamps and nothing else.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-repro-XXXXXX)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
export NIMFACTORY_OFFLINE=1
unset SOURCE_DATE_EPOCH

build() { # build CACHE OUT UMASK TZ CLOCK RECIPE
	(
		umask "$3"
		export NIMFACTORY_CACHE="$1" TZ="$4"
		"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null &&
			if [ -n "$5" ] && command -v faketime >/dev/null; then
				ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
					faketime "$5" "$NF" build "$6" --out "$2"
			else
				"$NF" build "$6" --out "$2"
			fi
	) >"$W/log" 2>&1
}
digest() { json_get "$1/oci/index.json" "j['manifests'][0]['digest']"; }
layers() { # the layer digests of the tagged image, one per line
	skopeo inspect --raw "oci:$1/oci:1.0.0" | python3 -c 'import json,sys; [print(l["digest"]) for l in json.load(sys.stdin)["layers"]]'
}

build "$W/cache-a" "$W/a" 022 UTC "" "$SRC/recipes/llama.yaml"
is "first build" "$?" 0
command -v faketime >/dev/null || skip "faketime is not installed: the second build runs on the real clock"
build "$W/cache-b" "$W/elsewhere/b" 077 Asia/Tokyo "+400 days" "$SRC/recipes/llama.yaml"
is "second build: other cache, folder, umask 077, time zone and a clock 400 days ahead" "$?" 0
is "same manifest digest" "$(digest "$W/elsewhere/b")" "$(digest "$W/a")"
# The image's blobs; the gate report artifact beside it records measured
# timings of its own run, so it is evidence of that run, not part of the image.
image_blobs() {
	skopeo inspect --raw "oci:$1/oci:1.0.0" | python3 -c '
import json, sys
m = json.load(sys.stdin)
print(m["config"]["digest"])
for l in m["layers"]: print(l["digest"])'
}
same_blobs() { # same_blobs LAYOUT_A LAYOUT_B: the image's blobs are byte-identical
	for d in $(image_blobs "$1"); do
		cmp "$1/oci/blobs/sha256/${d#sha256:}" "$2/oci/blobs/sha256/${d#sha256:}" || return 1
	done
}
t "every blob of the image identical" same_blobs "$W/a" "$W/elsewhere/b"
t "the gate report travels beside the image" sh -c "grep -q 'gate-report' '$W/a/oci/index.json'"

# Only a gate changed: the engines and weights are the same layers.
sed 's/min_decode_tokens_per_s: .*/min_decode_tokens_per_s: 10/' "$SRC/recipes/llama.yaml" >"$W/gate.yaml"
build "$W/cache-a" "$W/c" 022 UTC "" "$W/gate.yaml"
is "build with another gate threshold" "$?" 0
layers "$W/a" >"$W/a.layers"
layers "$W/c" >"$W/c.layers"
is "the image differs (its recipe digest does)" "$(test "$(digest "$W/a")" != "$(digest "$W/c")" && echo differs)" differs
is "every runtime, weights and engine layer is shared" "$(sed '$d' "$W/c.layers")" "$(sed '$d' "$W/a.layers")"
is "only the model-manifest layer (it names the recipe) differs" \
	"$(test "$(tail -1 "$W/c.layers")" != "$(tail -1 "$W/a.layers")" && echo differs)" differs
skopeo inspect --config --raw "oci:$W/a/oci:1.0.0" >"$W/config.json"
is "one weights layer per precision, engines link to them" \
	"$(json_get "$W/config.json" "sum('weights sha256' in h['created_by'] for h in j['history'])")" 2

# SOURCE_DATE_EPOCH changes the timestamps, so the digest, and nothing else.
(export SOURCE_DATE_EPOCH=1700000000; build "$W/cache-a" "$W/d" 022 UTC "" "$SRC/recipes/llama.yaml")
is "build with SOURCE_DATE_EPOCH" "$?" 0
skopeo inspect --config --raw "oci:$W/d/oci:1.0.0" >"$W/config-d.json"
is "created comes from SOURCE_DATE_EPOCH" "$(json_get "$W/config-d.json" "j['created']")" "2023-11-14T22:13:20Z"
is "without it, the epoch" "$(json_get "$W/config.json" "j['created']")" "1970-01-01T00:00:00Z"

# The unpacked image resolves the weights link to the gated bytes.
t "umoci unpacks" umoci unpack --rootless --image "$W/a/oci:1.0.0" "$W/bundle"
ID=$(json_get "$W/a/plan.json" "j['profiles'][1]['id']")
t "weights.safetensors in the image is a link" test -L "$W/bundle/rootfs/opt/nim/engines/$ID/weights.safetensors"
t "it resolves to the engine's weights" cmp "$W/bundle/rootfs/opt/nim/engines/$ID/weights.safetensors" "$W/a/engines/$ID/weights.safetensors"
finish
