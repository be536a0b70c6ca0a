#!/bin/sh
# parallel_build.sh - profiles compile at once with -j within --memory:
# with room for both, the second starts while the first runs (the log's
# "started (2 running" line); a budget that holds one at a time (beside the
# float32 model) runs them one after the other; a budget one compile alone
# exceeds is refused with the numbers; the engines are the same either way.
# stories260K: the model is ~1.0 MiB in float32, the fp32 compile ~1.6 MiB
# (engine and KV cache), the int8-wo one ~0.9 MiB.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-parallel-XXXXXX)
trap 'chmod -R u+w "$W" 2>/dev/null; rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
export NIMFACTORY_OFFLINE=1 NIMFACTORY_CACHE="$W/cache"

"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null
sed 's/autotune: true/autotune: false/' "$SRC/recipes/llama.yaml" >"$W/r.yaml"
build() { # build OUT LOG ARGS...: every stage run (--rebuild), the log kept
	out=$1 log=$2
	shift 2
	"$NF" build "$W/r.yaml" --out "$W/$out" --rebuild --log-format text "$@" >"$W/$log" 2>&1
}
started() { sed -n 's/.*compile: \(cpu-[a-z0-9-]*\): started (\([0-9]*\) running.*/\1 \2/p' "$W/$1" | tr '\n' ' '; }

build par par.log -j 2 --memory 4M
is "-j 2 --memory 4M: built" "$?" 0
is "both compiles ran at once" "$(started par.log)" "cpu-fp32-tp1 1 cpu-int8-wo-tp1 2 "
t "both engines built" test -f "$W/par/engines/$(json_get "$W/par/plan.json" "j['profiles'][1]['id']")/weights.safetensors"

build seq seq.log -j 2 --memory 3M
is "-j 2 --memory 3M: built" "$?" 0
is "the budget holds one compile at a time: one after the other" "$(started seq.log)" \
	"cpu-fp32-tp1 1 cpu-int8-wo-tp1 1 "
t "the int8-wo compile started after the fp32 one was done" \
	sh -c "grep -e 'compile: done' -e 'cpu-int8-wo-tp1: started' '$W/seq.log' | head -1 | grep -q 'done'"
t "the engines are the same, at once or in turn" diff -r "$W/par/engines" "$W/seq/engines"

build one one.log -j 1
is "-j 1: one at a time" "$(started one.log)" "cpu-fp32-tp1 1 cpu-int8-wo-tp1 1 "

build small small.log -j 2 --memory 2M
is "--memory 2M: refused as bad input" "$?" 2
t "the refusal names the compile, its estimate and what the budget leaves" \
	grep -q "compile cpu-fp32-tp1 needs about 1.6 MiB, more than the 1.0 MiB its stages have of the memory budget" "$W/small.log"
"$NF" build "$W/r.yaml" --out "$W/x" --memory 12Q >"$W/bad.log" 2>&1
is "--memory 12Q: bad input" "$?" 2
finish
