#!/bin/sh
# concurrent_builds.sh - two builds sharing one cache at the same time: the
# same recipe twice, then two recipes that share a checkpoint and a profile.
# Both succeed, give the image of a build that ran alone, and one of them
# waited for (or reused) the stage the other computed rather than computing
# it twice; the cache verifies and holds no temp leftovers.  Last, a build
# killed holding a stage's lock does not block the next one on that cache
# (which, alone, gives recipe b's image of the concurrent run).
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-concurrent-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
export NIMFACTORY_OFFLINE=1

digest() { json_get "$1/oci/index.json" "j['manifests'][0]['digest']"; }
seed() { NIMFACTORY_CACHE="$1" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null; }
# Autotune off: the engines are then the same bytes whoever compiles them.
sed 's/autotune: true/autotune: false/' "$SRC/recipes/llama.yaml" >"$W/a.yaml"
# A second recipe on the same checkpoint: its fp32 profile is the same stage.
sed -e 's/autotune: true/autotune: false/' -e 's/precisions: \[fp32, int8-wo\]/precisions: [fp32]/' \
	-e 's/precision_preference: \[int8-wo, fp32\]/precision_preference: [fp32]/' \
	-e 's|repository: nimfactory/stories260k|repository: nimfactory/stories260k-fp32|' "$SRC/recipes/llama.yaml" >"$W/b.yaml"

seed "$W/ref-cache"
NIMFACTORY_CACHE="$W/ref-cache" "$NF" build "$W/a.yaml" --out "$W/ref-a" >"$W/ref-a.log" 2>&1
is "reference build of recipe a, alone" "$?" 0

# together: start two builds on one empty cache, wait for both
together() { # together CACHE RECIPE1 OUT1 RECIPE2 OUT2
	seed "$1"
	NIMFACTORY_CACHE="$1" "$NF" build "$2" --out "$3" >"$3.log" 2>&1 &
	p1=$!
	NIMFACTORY_CACHE="$1" "$NF" build "$4" --out "$5" >"$5.log" 2>&1 &
	p2=$!
	wait $p1
	s1=$?
	wait $p2
	s2=$?
	echo "$s1 $s2"
}
# waited_or_reused LOG...: some log says it waited for the other build's stage,
# or used it (a build that started after the other's commit finds it cached)
waited_or_reused() {
	grep -q "waiting for another build computing stage" "$@" ||
		grep -h "compile: .*cached" "$@" | grep -q .
}
compile_stages() { ls -d "$W/$1"/stages/*/engine 2>/dev/null | wc -l; }
compiled_once() { # compiled_once LOG1 LOG2 CACHE: each compile stage was computed by one build only
	test "$(cat "$1" "$2" | grep -c 'compile: done in')" -eq "$(compile_stages "$3")"
}

is "the same recipe twice at once: both succeed" "$(together "$W/c1" "$W/a.yaml" "$W/a1" "$W/a.yaml" "$W/a2")" "0 0"
is "first has the image of a build alone" "$(digest "$W/a1")" "$(digest "$W/ref-a")"
is "second has the same image" "$(digest "$W/a2")" "$(digest "$W/ref-a")"
t "one waited for or reused the other's stage" waited_or_reused "$W/a1.log" "$W/a2.log"
t "no stage was compiled twice" compiled_once "$W/a1.log" "$W/a2.log" c1
t "the cache verifies" env NIMFACTORY_CACHE="$W/c1" "$NF" cache verify
is "no temp leftovers in the cache" "$(ls -A "$W/c1/tmp")" ""

is "two recipes sharing a checkpoint at once: both succeed" \
	"$(together "$W/c2" "$W/a.yaml" "$W/a3" "$W/b.yaml" "$W/b3")" "0 0"
is "recipe a's image as when built alone" "$(digest "$W/a3")" "$(digest "$W/ref-a")"
t "the shared fp32 stage was computed once" compiled_once "$W/a3.log" "$W/b3.log" c2
is "two compile stages in the cache: fp32 shared, int8-wo" "$(compile_stages c2)" 2
t "the cache verifies" env NIMFACTORY_CACHE="$W/c2" "$NF" cache verify

# A lock left by a killed build never blocks: flock dies with its process.
seed "$W/c3"
NIMFACTORY_CACHE="$W/c3" "$NF" build "$W/b.yaml" --out "$W/b4" >"$W/b4.log" 2>&1 &
pk=$!
sleep 0.2
kill -KILL $pk 2>/dev/null
wait $pk 2>/dev/null
NIMFACTORY_CACHE="$W/c3" timeout 60 "$NF" build "$W/b.yaml" --out "$W/b4" >"$W/b4b.log" 2>&1
is "a build after a killed one on the same cache and OUT succeeds" "$?" 0
is "recipe b alone gives the image it gave beside recipe a" "$(digest "$W/b4")" "$(digest "$W/b3")"
t "its log never says it waited" sh -c "! grep -q 'waiting for another build' '$W/b4b.log'"
finish
