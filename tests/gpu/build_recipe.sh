#!/bin/sh
# tests/gpu/build_recipe.sh - part 2c of tests/gpu/run.sh, on a machine with
# a GPU and `make cuda`'s kernels (TAP):
#
#   sh tests/gpu/build_recipe.sh BUILD STORIES260K_DIR SKU WORKDIR
#
# recipes/llama.yaml on stories260K with a SKU int8-wo profile beside the
# CPU's, built with the kernels of BUILD/cuda: the compile measures the
# tactics on the GPU (cuda_tactics.json, every one "measured", listed in
# config.json), a --rebuild finds them all in the timing cache (0 shapes
# timed), both gates of the GPU profile ran on the GPU (passed or failed,
# never skipped) and the performance gate reports the fraction of the HBM
# roofline beside the model's, and the engine's greedy text on the GPU
# equals the same engine's on the CPU.
set -u
B=$1 M=$2 SKU=$3 W=$4
SRC=$(pwd)
case "$B" in /*) ;; *) B="$SRC/$B" ;; esac
NF="$B/bin/nimfactory"
mkdir -p "$W"
. "$SRC/tests/tap.sh"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1 NF_CUDA_KERNELS_DIR="${NF_CUDA_KERNELS_DIR:-$B/cuda}"
t "cache add seeds the model and tokenizer" "$NF" cache add "$M/stories260K.bin" "$M/tok512.bin"
sed -e 's/^  autotune: true$/  autotune: false/' \
    -e "s/^      tensor_parallel: \[1\]\$/      tensor_parallel: [1]\n    - device: $SKU\n      precisions: [int8-wo]\n      tensor_parallel: [1]/" \
    "$SRC/recipes/llama.yaml" >"$W/r.yaml"

"$NF" build "$W/r.yaml" --out "$W/out" --log-format text >"$W/build.log" 2>&1
rc=$?
sed 's/^/# /' "$W/build.log" | grep -i "tactics\|gate" | head -20
# exit 0, or 1 when a gate failed: either way the gates ran (3 is skipped ones)
t "the build ran its gates (exit $rc)" test "$rc" -eq 0 -o "$rc" -eq 1
E=$(json_get "$W/out/plan.json" "[p['id'] for p in j['profiles'] if p['device'] == '$SKU'][0]")
C="$W/out/engines/$E"
is "cuda_tactics.json: measured on $SKU" \
	"$(json_get "$C/cuda_tactics.json" "(j['sku'], sorted({t['source'] for t in j['tactics']}))")" \
	"('$SKU', ['measured'])"
json_get "$C/cuda_tactics.json" "'\n'.join('%s %dx%d batch %d: %s %.1f us%s' % (t['family'], t['rows'], t['cols'], t['batch'], t['kernel'], t['median_us'], ' (cuBLASLt %.1f us)' % t['cublaslt_us'] if 'cublaslt_us' in t else '') for t in j['tactics'])" | sed 's/^/# /'
is "config.json lists it and says measured" \
	"$(json_get "$C/config.json" "(j['files']['cuda_tactics.json']['sha256'], j['cuda_tactics']['source'])")" \
	"('$(sha256sum "$C/cuda_tactics.json" | cut -d' ' -f1)', 'measured')"
t "the gates of $SKU ran on the GPU: none skipped" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
g = [g for p in j["profiles"] if p["device"] == sys.argv[2] for g in p["gates"]]
for x in g:
    print("#", x["gate"], x["verdict"], x.get("reason") or "")
sys.exit(0 if len(g) == 2 and all(x["verdict"] in ("passed", "failed") for x in g) else 1)' \
	"$W/out/reports/gates.json" "$SKU"
json_get "$W/out/reports/gates.json" "'\n'.join('decode %.0f tok/s, %.1f%% of the HBM roofline (modelled: %.0f tok/s, %.1f%%)' % (m['decode_tokens_per_s'], 100 * m['hbm_fraction'], m['modelled_decode_tokens_per_s'], 100 * m['modelled_hbm_fraction']) for m in [{x['name']: x['value'] for x in g['metrics']} for p in j['profiles'] if p['device'] == '$SKU' for g in p['gates'] if g['gate'] == 'performance'] if 'hbm_fraction' in m)" >"$W/perf.txt" 2>&1
sed 's/^/# /' "$W/perf.txt"
t "the performance gate gives the fraction of the HBM roofline beside the model's" grep -q "of the HBM roofline" "$W/perf.txt"
"$NF" build "$W/r.yaml" --out "$W/again" --rebuild --log-format text >"$W/again.log" 2>&1
t "a rebuild reuses the timing cache: 0 shapes timed" grep -q "tactics measured on its GPU (0 shapes timed" "$W/again.log"
"$NF" run "$C" --prompt "Once upon a time" --max-tokens 64 >"$W/gpu.txt" 2>"$W/gpu.err"
NF_LIBCUDA=/nonexistent/libcuda.so.1 "$NF" run "$C" --prompt "Once upon a time" --max-tokens 64 \
	>"$W/cpu.txt" 2>/dev/null
t "its engine runs on the GPU" grep -q "engine on the GPU" "$W/gpu.err"
t "with the measured tactics, its greedy text equals the CPU's" cmp "$W/gpu.txt" "$W/cpu.txt"
finish
