#!/bin/sh
# gpu_profiles.sh - a recipe that targets cpu and h100-sxm, built for real on
# stories260K where there is no H100 (offline, from a cache seeded out of
# ../shared): the h100-sxm engine is compiled (weights in its precision, the
# roofline model of h100-sxm in roofline.json, listed in config.json), its
# gates are skipped with the model's figures as the reason and never passed;
# without --allow-skipped-gates the build stops before packaging (exit 3),
# with it the image holds the profile and gates.json records the choice and
# says "skipped"; a tensor-parallel point is dropped with its reason; the
# model is derated by docs/cuda-kernels.md's occupancy and the engine carries
# the cubin `make cuda` built (when it did); with the fake CUDA driver as the
# H100 and a fake cubin, the compile measures the tactics into
# cuda_tactics.json (timing cache in the nimfactory cache) and the gates
# stay skipped, saying the driver is the fake.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
FAKE="$NF_BUILD/tests/fakes/libcuda.so.1"
W=$(mktemp -d /tmp/nf-e2e-gpu-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
t "cache add seeds the model and tokenizer" "$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin"
# recipes/llama.yaml with an h100-sxm target beside the CPU's, without autotuning (lean)
sed -e 's/^  autotune: true$/  autotune: false/' \
    -e 's/^      tensor_parallel: \[1\]$/      tensor_parallel: [1]\n    - device: h100-sxm\n      precisions: [int8-wo]\n      tensor_parallel: [1, 2]/' \
    "$SRC/recipes/llama.yaml" >"$W/r.yaml"
export NF_LIBCUDA=/nonexistent/libcuda.so.1 # no driver, whatever this host has

"$NF" plan "$W/r.yaml" >"$W/plan.txt" 2>&1
t "plan keeps h100-sxm-int8-wo-tp1" grep -q "^  h100-sxm-int8-wo-tp1 " "$W/plan.txt"
t "plan drops tp2 with the reason" grep -q "h100-sxm-int8-wo-tp2: tensor parallelism over several GPUs needs the multi-GPU runtime" "$W/plan.txt"

"$NF" build "$W/r.yaml" --out "$W/refused" --log-format text >"$W/refused.log" 2>&1
is "without --allow-skipped-gates: exit 3" "$?" 3
t "no image" test ! -e "$W/refused/oci"
t "the error names the profile, the model's figures and the flag" grep -Eq \
	"the gates of h100-sxm-int8-wo-tp1 were skipped \(no h100-sxm here; modelled [0-9]+ tok/s at batch 1, [0-9.]+% of HBM roofline\); no image was made: --allow-skipped-gates" \
	"$W/refused.log"
G="$W/refused/reports/gates.json"
is "gates.json: verdict skipped, never passed" "$(json_get "$G" "j['verdict']")" skipped
is "gates.json records that skipped gates were not allowed" "$(json_get "$G" "j['allow_skipped_gates']")" False
is "the CPU profiles passed" "$(json_get "$G" "[p['verdict'] for p in j['profiles'] if p['device'] == 'cpu']")" "['passed', 'passed']"
is "h100-sxm: both gates skipped" \
	"$(json_get "$G" "[g['verdict'] for p in j['profiles'] if p['device'] == 'h100-sxm' for g in p['gates']]")" \
	"['skipped', 'skipped']"
t "its performance gate gives the modelled figures" python3 -c '
import json, re, sys
j = json.load(open(sys.argv[1]))
g = [g for p in j["profiles"] if p["device"] == "h100-sxm" for g in p["gates"] if g["gate"] == "performance"][0]
sys.exit(0 if re.fullmatch(r"no h100-sxm here; modelled \d+ tok/s at batch 1, [0-9.]+% of HBM roofline", g["reason"]) else 1)' "$G"

E=$(json_get "$W/refused/plan.json" "[p['id'] for p in j['profiles'] if p['device'] == 'h100-sxm'][0]")
R="$W/refused/engines/$E/roofline.json"
is "roofline.json: modelled for h100-sxm" "$(json_get "$R" "(j['method'], j['sku'], j['precision'])")" "('modelled', 'h100-sxm', 'int8-wo')"
is "roofline.json: batch buckets 1..64" "$(json_get "$R" "[b['batch'] for b in j['decode']]")" "[1, 2, 4, 8, 16, 32, 64]"
is "roofline.json: GEMV tactics marked modelled" "$(json_get "$R" "sorted({t['method'] for t in j['tactics']})")" "['modelled']"
is "config.json lists roofline.json with its sha256" \
	"$(json_get "$W/refused/engines/$E/config.json" "j['files']['roofline.json']['sha256']")" \
	"$(sha256sum "$R" | cut -d' ' -f1)"
is "the h100-sxm engine is int8-wo" "$(json_get "$W/refused/engines/$E/config.json" "j['precision']")" int8-wo
is "config.json: its GPU tactics are modelled, and why" \
	"$(json_get "$W/refused/engines/$E/config.json" "(j['cuda_tactics']['source'], j['cuda_tactics']['reason'])")" \
	"('modelled', 'no h100-sxm here')"
t "and it has no measured tactics file" test ! -e "$W/refused/engines/$E/cuda_tactics.json"

"$NF" build "$W/r.yaml" --out "$W/allowed" --allow-skipped-gates --log-format text >"$W/allowed.log" 2>&1
is "with --allow-skipped-gates: exit 0" "$?" 0
t "an image" test -e "$W/allowed/oci/index.json"
G="$W/allowed/reports/gates.json"
t "the image's engine layer carries roofline.json" python3 -c '
import glob, sys, tarfile
for blob in glob.glob(sys.argv[1] + "/blobs/sha256/*"):
    try:
        with tarfile.open(blob) as tf:
            if any(n.endswith("/roofline.json") for n in tf.getnames()):
                sys.exit(0)
    except tarfile.TarError:
        pass
sys.exit(1)' "$W/allowed/oci"
is "gates.json records that skipped gates were allowed" "$(json_get "$G" "j['allow_skipped_gates']")" True
is "and still says skipped" "$(json_get "$G" "j['verdict']")" skipped
t "the image's manifest lists the h100-sxm profile, gate skipped" python3 -c '
import sys
m = open(sys.argv[1]).read().split("- id:")
sys.exit(0 if any("name: \"h100-sxm-int8-wo-tp1\"" in p and "gate: \"skipped\"" in p for p in m) else 1)' "$W/allowed/model_manifest.yaml"

"$NF" run "$W/allowed" --profile h100-sxm-int8-wo-tp1 --prompt "Once upon a time" --max-tokens 8 >"$W/run.out" 2>"$W/run.err"
is "run of the h100-sxm profile without a driver: exit 0" "$?" 0
t "run says in one line why it runs on the CPU" grep -q "^run: h100-sxm engine on the CPU: no NVIDIA driver: " "$W/run.err"
t "and generates the text" grep -q "there was" "$W/run.out"

# nimserve refuses the GPU profile where its GPU is not, naming what fits;
# with the fake driver's H100 it picks that profile and opens it on the device
"$NF_BUILD/bin/nimserve" --manifest "$W/allowed/model_manifest.yaml" --profile h100-sxm-int8-wo-tp1 \
	--host 127.0.0.1 --port 0 2>"$W/serve.log"
is "nimserve with the h100-sxm profile forced and no driver: exit 2" "$?" 2
t "it says the profile does not fit and which do" grep -q "does not fit this machine.*profiles that fit: cpu-" "$W/serve.log"
if [ -e "$FAKE" ]; then
	NF_LIBCUDA="$FAKE" "$NF_BUILD/bin/nimserve" --manifest "$W/allowed/model_manifest.yaml" \
		--host 127.0.0.1 --port 0 --port-file "$W/serve.port" 2>"$W/serve-gpu.log" &
	SPID=$!
	for _ in $(seq 1 100); do [ -s "$W/serve.port" ] && break; sleep 0.1; done
	# this engine has no cubin: the device is found, and the one line says why not
	t "on the fake H100 nimserve picks the h100-sxm profile and says where it runs and why" \
		grep -Eq "nimserve: h100-sxm engine on the (GPU|CPU: .*cuda/sm_90.cubin)" "$W/serve-gpu.log"
	kill -TERM "$SPID" 2>/dev/null
	wait "$SPID" 2>/dev/null
else
	skip "fake driver $FAKE not built"
fi

# docs/cuda-kernels.md's occupancy derates the model; the kernels `make cuda`
# built (NF_CUDA, the Makefile's build/cuda) go into the engine's cuda/ part.
if [ -n "${NF_CUDA:-}" ] && [ -e "$NF_CUDA/sm_90a/nf_kernels.cubin" ]; then
	export NF_CUDA_KERNELS_DIR="$NF_CUDA"
fi
NF_CUDA_KERNELS_TABLE="$SRC/docs/cuda-kernels.md" "$NF" build "$W/r.yaml" --out "$W/kernels-out" --allow-skipped-gates >"$W/k.log" 2>&1
is "a build with the kernels' table: exit 0" "$?" 0
E=$(json_get "$W/kernels-out/plan.json" "[p['id'] for p in j['profiles'] if p['device'] == 'h100-sxm'][0]")
is "the model takes nf_cu_gemv_q8's occupancy on sm_90a from docs/cuda-kernels.md" \
	"$(json_get "$W/kernels-out/engines/$E/roofline.json" "j['occupancy']")" \
	"$(awk '/^### /{a=$2} a=="sm_90a" && /^\| nf_cu_gemv_q8 /{gsub(/[ %]/,"",$(NF-1)); print $(NF-1)/100}' "$SRC/docs/cuda-kernels.md")"
if [ -n "${NF_CUDA_KERNELS_DIR:-}" ]; then
	C="$W/kernels-out/engines/$E"
	is "the engine holds make cuda's sm_90a cubin as cuda/sm_90.cubin, and the PTX" "$(json_get "$C/config.json" "j['cuda']")" \
		"{'arch': 'sm_90', 'cubin': 'cuda/sm_90.cubin', 'ptx': 'cuda/kernels.ptx'}"
	is "listed with its sha256" "$(json_get "$C/config.json" "j['files']['cuda/sm_90.cubin']['sha256']")" \
		"$(sha256sum "$NF_CUDA/sm_90a/nf_kernels.cubin" | cut -d' ' -f1)"
	t "and the image's engine layer carries it" python3 -c '
import glob, sys, tarfile
for blob in glob.glob(sys.argv[1] + "/blobs/sha256/*"):
    try:
        with tarfile.open(blob) as tf:
            if any(n.endswith(sys.argv[2] + "/cuda/sm_90.cubin") for n in tf.getnames()):
                sys.exit(0)
    except tarfile.TarError:
        pass
sys.exit(1)' "$W/kernels-out/oci" "$E"
	unset NF_CUDA_KERNELS_DIR
else
	skip "no cubins from make cuda (NF_CUDA): nothing to package"
	skip "no cubins from make cuda (NF_CUDA): nothing to package"
	skip "no cubins from make cuda (NF_CUDA): nothing to package"
fi

if [ "${NF_SAN:-}" = 1 ]; then
	for _ in 1 2 3 4 5; do skip "sanitizer build: the fourth build (the fake H100) is left to the plain run"; done
elif [ -e "$FAKE" ]; then
	# a fake sm_90 cubin, so the compile opens the engine on the fake H100
	# and "times" it (the fake runs no kernel; its events say 1 ms)
	python3 -c '
import os, struct, sys
d = os.path.join(sys.argv[1], "sm_90"); os.makedirs(d)
b = bytearray(b"\x5c" * 512); b[0:9] = b"\x7fELF\x02\x01\x01\x41\x08"
b[18:20] = struct.pack("<H", 190); b[48:52] = struct.pack("<I", 0x6000004 | 90 << 8)
open(os.path.join(d, "nf_kernels.cubin"), "wb").write(b)' "$W/fakecubin"
	NF_LIBCUDA="$FAKE" NF_CUDA_KERNELS_DIR="$W/fakecubin" NF_LIBCUBLASLT=/nonexistent/libcublasLt.so.13 "$NF" build "$W/r.yaml" --out "$W/fake" \
		--allow-skipped-gates >"$W/fake.log" 2>&1
	is "with the fake H100 driver: exit 0" "$?" 0
	t "the gates stay skipped: the reason says the driver is the tests' fake" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
g = [g for p in j["profiles"] if p["device"] == "h100-sxm" for g in p["gates"]]
sys.exit(0 if g and all(x["verdict"] == "skipped" and x["reason"].startswith("GPU 0 (NVIDIA H100 80GB HBM3) is the tests\x27 fake CUDA driver") for x in g) else 1)' "$W/fake/reports/gates.json"
	E=$(json_get "$W/fake/plan.json" "[p['id'] for p in j['profiles'] if p['device'] == 'h100-sxm'][0]")
	C="$W/fake/engines/$E"
	is "on its very SKU the compile measures the tactics: cuda_tactics.json, every one measured" \
		"$(json_get "$C/cuda_tactics.json" "(j['sku'], sorted({t['source'] for t in j['tactics']}))")" \
		"('h100-sxm', ['measured'])"
	is "config.json lists it with its sha256 and says measured" \
		"$(json_get "$C/config.json" "(j['files']['cuda_tactics.json']['sha256'], j['cuda_tactics']['source'])")" \
		"('$(sha256sum "$C/cuda_tactics.json" | cut -d' ' -f1)', 'measured')"
	t "the timing cache is kept in the nimfactory cache" sh -c 'ls "$1"/cuda-timing/h100-sxm-*.json' sh "$NIMFACTORY_CACHE"
else
	skip "fake driver $FAKE not built"
	skip "fake driver $FAKE not built"
	skip "fake driver $FAKE not built"
	skip "fake driver $FAKE not built"
	skip "fake driver $FAKE not built"
fi
finish
