#!/bin/sh
# tests/gpu/run.sh - the checks that need a GPU, as TAP, in one command on a
# machine with one (not part of `make check`; docs/cuda.md):
#
#   sh tests/gpu/run.sh            from the repository root
#
# It builds the tools and `make cuda` (nvcc), then:
#   1. every kernel's products and row kernels against the CPU on random
#      inputs at several shapes, with a bound per format (tests/gpu/kernels.c);
#   2. stories260K engines (fp32, int8-wo) made the profile of this GPU: the
#      greedy text through the CUDA backend equals the same engine's on the
#      CPU (the fp32 engine on the CPU is the float32 reference, KL 0), and
#      its rows of logits and prefix copies (tests/gpu/gpu_rows.c); and the
#      tactics timed: every kernel variant, and cuBLASLt beside the GEMMs
#      when libcublasLt is here (tests/gpu/tune.c);
#   2c. `nimfactory build` of a recipe with this GPU's profile: the compile
#      measures the tactics into the engine's cuda_tactics.json (a rebuild
#      reuses the timing cache and times nothing), the gates run on the GPU
#      (not skipped; the performance gate gives the fraction of the HBM
#      roofline beside the model's), and the engine's greedy text on the
#      GPU equals the same engine's on the CPU;
#   3. a benchmark (tests/gpu/bench.c): decode and prefill tokens/s per
#      precision on SmolLM2-135M and a synthetic ~1.1B Llama, the fraction
#      of the HBM ceiling in decode, and PyTorch eager (tests/gpu/torch_eager.py)
#      in the same run.  Figures are TAP comments ("# ...").
# NF_SHARED (default ../shared) holds the models; GPU_BENCH=0 skips part 3.
set -u
B=${NF_BUILD:-build}
SHARED=${NF_SHARED:-../shared}
M="$SHARED/models/stories260K"
W=$(mktemp -d /tmp/nf-gpu-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fail=1; echo "not ok $n - $*"; }
skip() { n=$((n + 1)); echo "ok $n # skip $*"; }
finish() { echo "1..$n"; exit $fail; }
quote() { sed 's/^/# /'; }

if ! command -v nvcc >/dev/null 2>&1; then
	echo "1..0 # SKIP no nvcc here: make cuda cannot build the kernels"
	exit 0
fi
if ! make -j"$(nproc)" all gpu-tools cuda >"$W/make.log" 2>&1; then
	quote <"$W/make.log" | tail -30
	echo "not ok 1 - make all gpu-tools cuda"
	echo "1..1"
	exit 1
fi

# 1. kernels against the CPU
"$B/tests/gpu/kernels" "$B/cuda/nf_kernels.fatbin" >"$W/kernels.tap" 2>&1
if grep -q '^1\.\.0 # SKIP' "$W/kernels.tap"; then
	sed 's/^1\.\.0 # SKIP/# no GPU:/' "$W/kernels.tap"
	echo "1..0 # SKIP no GPU here"
	exit 0
fi
ok "make all gpu-tools cuda"
quote <"$W/kernels.tap"
if grep -q '^not ok' "$W/kernels.tap" || ! grep -q '^ok' "$W/kernels.tap"; then
	notok "every kernel within its bound of the CPU"
else
	ok "every kernel within its bound of the CPU ($(grep -c '^ok' "$W/kernels.tap") checks)"
fi

# 2. greedy text through the backend equals the CPU's
for p in fp32 int8-wo; do
	E="$W/s260k-$p"
	if ! "$B/tools/nf_engine_build_tool" "$M/stories260K.bin" "$M/tok512.bin" "$p" "$E" --no-autotune \
		>"$W/build.log" 2>&1 || ! sku=$("$B/tests/gpu/gpu_engine" "$E" "$B/cuda" 2>"$W/gpu_engine.err"); then
		quote <"$W/build.log"; quote <"$W/gpu_engine.err"
		notok "stories260K $p: a GPU profile's engine"
		continue
	fi
	"$B/bin/nimfactory" run "$E" --prompt "Once upon a time" --max-tokens 128 >"$W/gpu.txt" 2>"$W/gpu.err"
	NF_LIBCUDA=/nonexistent/libcuda.so.1 "$B/bin/nimfactory" run "$E" --prompt "Once upon a time" \
		--max-tokens 128 >"$W/cpu.txt" 2>"$W/cpu.err"
	quote <"$W/gpu.err"
	GPU_SKU=$sku
	if ! grep -q "engine on the GPU" "$W/gpu.err"; then
		notok "stories260K $p on $sku: ran on the GPU"
	elif cmp -s "$W/gpu.txt" "$W/cpu.txt"; then
		ok "stories260K $p on $sku: the greedy text (128 tokens) equals the CPU's"
	else
		quote <"$W/gpu.txt"; echo "# CPU:"; quote <"$W/cpu.txt"
		notok "stories260K $p on $sku: the greedy text equals the CPU's"
	fi
	# rows of logits (prompt, verifier) and prefix copies on the device
	if "$B/tests/gpu/gpu_rows" "$E" >"$W/rows.tap" 2>&1 && ! grep -q '^not ok' "$W/rows.tap"; then
		quote <"$W/rows.tap"
		ok "stories260K $p on $sku: rows of logits and prefix copies agree"
	else
		quote <"$W/rows.tap"
		notok "stories260K $p on $sku: rows of logits and prefix copies"
	fi
done

# 2b. the tactics timed on this GPU: every kernel variant of an fp16 engine's
#     products, and cuBLASLt's algorithms beside them when libcublasLt is here
E="$W/s260k-fp16-tune"
if "$B/tools/nf_engine_build_tool" "$M/stories260K.bin" "$M/tok512.bin" fp16 "$E" --no-autotune \
	>"$W/build.log" 2>&1 && "$B/tests/gpu/gpu_engine" "$E" "$B/cuda" >/dev/null 2>"$W/gpu_engine.err" &&
	"$B/tests/gpu/tune" "$E" >"$W/tune.tap" 2>&1 && ! grep -q '^not ok' "$W/tune.tap"; then
	quote <"$W/tune.tap"
	ok "stories260K fp16: the tactics (our variants, cuBLASLt) timed on this GPU"
else
	quote <"$W/build.log" | tail -3; quote <"$W/gpu_engine.err"; quote <"$W/tune.tap" 2>/dev/null
	notok "stories260K fp16: the tactics timed on this GPU"
fi

# 2c. a recipe built for this GPU: measured tactics, gates on the GPU
if [ -n "${GPU_SKU:-}" ]; then
	sh tests/gpu/build_recipe.sh "$B" "$M" "$GPU_SKU" "$W/recipe" >"$W/recipe.tap" 2>&1
	quote <"$W/recipe.tap"
	if grep -q '^not ok' "$W/recipe.tap" || ! grep -q '^ok' "$W/recipe.tap"; then
		notok "a $GPU_SKU recipe: measured tactics and gates on the GPU"
	else
		ok "a $GPU_SKU recipe: measured tactics and gates on the GPU ($(grep -c '^ok' "$W/recipe.tap") checks)"
	fi
else
	skip "no GPU profile engine was made above"
fi

# 3. benchmark
if [ "${GPU_BENCH:-1}" = 0 ]; then
	skip "GPU_BENCH=0"
	finish
fi
"$B/tools/nf_synth_model" --dim 2048 --hidden 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 \
	--seq 2048 "$W/synth1b.bin" "$W/synth1b.tok" >/dev/null 2>&1 || notok "write the synthetic 1.1B Llama"
bench_model() { # NAME CHECKPOINT TOKENIZER
	for p in fp16 bf16 int8-wo int4-wo fp8-e4m3; do
		E="$W/$1-$p"
		rm -rf "$E"
		if ! "$B/tools/nf_engine_build_tool" "$2" "$3" "$p" "$E" --no-autotune >"$W/build.log" 2>&1 ||
			! "$B/tests/gpu/gpu_engine" "$E" "$B/cuda" >/dev/null 2>"$W/gpu_engine.err"; then
			skip "$1 $p: no engine for this GPU ($(tail -1 "$W/build.log" "$W/gpu_engine.err" | tr '\n' ' '))"
			continue
		fi
		for batch in 1 16; do
			echo "# $1 $p batch $batch (nimfactory, CUDA backend):"
			if "$B/tests/gpu/bench" "$E" $batch 256 512 >"$W/bench.tap" 2>&1 && grep -q '^ok' "$W/bench.tap"; then
				grep '^#' "$W/bench.tap"
				ok "$1 $p batch $batch: benchmark ran"
			else
				quote <"$W/bench.tap"
				notok "$1 $p batch $batch: benchmark"
			fi
		done
		rm -rf "$E"
	done
}
bench_model stories260K "$M/stories260K.bin" "$M/tok512.bin"
bench_model synth1b "$W/synth1b.bin" "$W/synth1b.tok"
if [ -d "$SHARED/models/smollm2-135m-instruct" ]; then
	bench_model smollm2 "$SHARED/models/smollm2-135m-instruct" -
fi
for p in fp16 bf16; do
	for batch in 1 16; do
		if python3 tests/gpu/torch_eager.py "$W/synth1b.bin" $p $batch 256 512 >"$W/torch.txt" 2>&1; then
			cat "$W/torch.txt" | grep '^#'
			ok "synth1b PyTorch eager $p batch $batch"
		else
			quote <"$W/torch.txt" | tail -5
			skip "synth1b PyTorch eager $p batch $batch: torch did not run"
		fi
	done
done
finish
