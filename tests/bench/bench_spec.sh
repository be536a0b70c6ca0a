# bench_spec.sh - speculative decoding's speed-up on SmolLM2-135M-Instruct,
# nimserve beside llama-server with the same speculation on (sourced by
# run.sh; helpers shared with bench_guided.sh).
#
# Cases, each served twice in one run, speculation off then on, by both servers:
#   lookup  fp32, prompt lookup on a summarise-this-text task (its answer repeats
#           its input): nimserve --speculative lookup --spec-k 4 --spec-ngram 3;
#           llama-server --spec-type ngram-simple (n-gram 3, 4 drafted)
#   draft   fp32 and int8-wo, a draft engine on chat questions: the int4-wo
#           profile of the same model drafts 4 tokens (nimserve --speculative
#           draft --draft-profile cpu-int4-wo-tp1); llama-server -md with the
#           Q4_1 file (--spec-draft-n-max 4)
#   Every nimserve case drafts every step (--spec-adaptive 0: the cost of
#   drafting itself); the draft cases run once more as served by default
#   (--spec-adaptive 1, "-adaptive": drafting only while it is cheaper a token),
#   which should be no slower than off where drafting cannot pay.
# Every measurement is `nimfactory bench-serve --endpoint chat --concurrency C`
# (BENCH_SPEC_CONCURRENCY, 1) over BENCH_SPEC_REQUESTS (4) requests of at most
# BENCH_SPEC_TOKENS (128) tokens after one warm-up; the figure is output
# tokens/s and its ratio on/off, measured in the same run; nimserve's
# acceptance rate is read from /v1/metrics.  Greedy answers are the same with
# speculation, so on and off must report the same output tokens (checked for
# nimserve).  BENCH_SPEC_PEER=0 leaves llama-server out (on cores shared with
# other work its threads, which spin while waiting, slow down far more than
# ours).  Results: build/bench/results/spec.{tsv,md}.

SPEC_K=4

# The model's engines (fp32, int8-wo, int4-wo), the three-profile manifest
# serving them (chat_template: model), and llama.cpp's files of them.
spec_prepare() {
	bench_build_tools nf_engine_build_tool
	make -s -j"$THREADS" BUILD="$NFB" "$NFB/bin/nimserve" >>"$BB/nf-build.log" 2>&1 ||
		bench_die "building nimserve failed (log: $BB/nf-build.log)"
	SPEC_GGUF=$(bench_smollm2_gguf)
	[ -f "$SPEC_GGUF" ] || bench_die "no $SPEC_GGUF"
	mkdir -p "$BB/serve"
	for prec in fp32 int8-wo int4-wo; do
		bench_engine smollm2 "$SPEC_GGUF" - "$prec"
	done
	spec_manifest >"$BB/serve/manifest-spec.yaml.tmp"
	mv "$BB/serve/manifest-spec.yaml.tmp" "$BB/serve/manifest-spec.yaml"
	[ "${BENCH_SPEC_PEER:-1}" = 1 ] || return 0
	bench_peer_start
	bench_peer_wait
	for prec in fp32 int8-wo int4-wo; do
		bench_requant smollm2 "$prec" "$SPEC_GGUF"
	done
}

spec_manifest() {
	printf 'apiVersion: nimfactory/v1\nkind: ModelManifest\n'
	printf 'model: {name: smollm2, family: llama, version: "1.0.0"}\n'
	printf 'recipe_digest: sha256:%064d\nserving:\n  chat_template: model\nprofiles:\n' 0
	for prec in fp32 int8-wo int4-wo; do
		printf '  - id: %s\n    name: cpu-%s-tp1\n    device: cpu\n    arch: ""\n' \
			"$(printf 'bench smollm2 cpu %s' "$prec" | sha256sum | cut -c1-64)" "$prec"
		printf '    precision: %s\n    tensor_parallel: 1\n    engine: %s\n    gate: passed\n' \
			"$prec" "$BB/engines/smollm2-$prec"
	done
}

# A chat dataset (bench-serve jsonl) of the lines of stdin into $1.
spec_jsonl() {
	python3 -c '
import json, sys
with open(sys.argv[1], "w") as f:
    for line in sys.stdin.read().split("\n\n"):
        if line.strip():
            f.write(json.dumps({"messages": [{"role": "user", "content": line.strip()}]}) + "\n")' "$1"
}

# Texts to summarise: answers that repeat their input, prompt lookup's case.
spec_summarise_texts() {
	cat <<'EOF'
Summarise this text in a few sentences, keeping its words: The river Thames flows through London and into the North Sea. For centuries it carried ships, goods and people into the heart of the city. Bridges were built across it, docks were dug along its banks, and the city grew on both sides of the water. Today the river is cleaner than it has been for a hundred years, and seals and fish have returned to it.

Summarise this text in a few sentences, keeping its words: The honey bee lives in a colony of many thousands of workers, a few hundred drones and a single queen. The workers gather nectar and pollen from flowers, build the wax comb, feed the young and defend the hive. The queen lays the eggs, up to two thousand a day in summer. In winter the colony clusters together and lives on the honey it stored.

Summarise this text in a few sentences, keeping its words: A bicycle is a simple machine with two wheels, a frame, pedals and a chain. The rider pushes the pedals, the chain turns the rear wheel, and the bicycle moves forward. Gears let the rider climb hills with less effort or go faster on flat roads. Bicycles are cheap, quiet and clean, and in many cities more people ride them every year.

Summarise this text in a few sentences, keeping its words: The moon goes around the Earth about once a month. As it moves, we see different parts of its sunlit side, which is why it seems to change shape from a thin crescent to a full moon and back again. The moon has no air and no water, and its surface is covered with dust and craters made by falling rocks.
EOF
}

# Chat questions: the draft engine's case.
spec_chat_questions() {
	printf '%s\n\n' "Tell me a short story about a dragon." "Write a short poem about the sea." \
		"Explain how a rainbow forms." "Give me three tips for learning to cook." \
		"What is photosynthesis?" "Describe a day at the beach." "Why is the sky blue?" \
		"$BENCH_CHAT_QUESTION"
}

# llama-server on GGUF $1 with extra options; tag $2; sets SERVE_PORT, SERVE_PID.
spec_start_llama() {
	gg=$1 tag=$2
	shift 2
	SERVE_PORT=$(serve_free_port)
	serve_start "$RESULTS/spec-llama-$tag.log" "$LLAMA_BIN/llama-server" -m "$gg" \
		--host 127.0.0.1 --port "$SERVE_PORT" -t "$THREADS" -tb "$THREADS" \
		-np "${BENCH_SPEC_CONCURRENCY:-1}" -c $((8192 * ${BENCH_SPEC_CONCURRENCY:-1})) \
		-cb --no-webui --jinja --alias smollm2 "$@"
	serve_wait_ready "http://127.0.0.1:$SERVE_PORT/health" "$SERVE_PID" "$RESULTS/spec-llama-$tag.log"
}

# bench-serve against port $1, dataset $2, into $RESULTS/$3.json (more
# options after); prints "tokens_per_s output_tokens tpot_p50_ms".
spec_measure() {
	port=$1 ds=$2 out=$3
	shift 3
	"$NFB/bin/nimfactory" bench-serve "http://127.0.0.1:$port" --endpoint chat --model smollm2 \
		--concurrency "${BENCH_SPEC_CONCURRENCY:-1}" --requests "${BENCH_SPEC_REQUESTS:-4}" \
		--warmup 1 --max-tokens "${BENCH_SPEC_TOKENS:-128}" --dataset "jsonl:$ds" \
		--json "$RESULTS/$out.json" --quiet "$@" >"$RESULTS/$out.txt" 2>&1 ||
		bench_die "bench-serve failed (log: $RESULTS/$out.txt)"
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
if r["failed"]:
    sys.exit("%d requests failed: %s" % (r["failed"], r["first_error"]))
print("%.2f %d %.2f" % (r["output_token_throughput"], r["output_tokens"], r["tpot_ms"]["p50"]))' \
		"$RESULTS/$out.json" || bench_die "bench-serve: no result in $RESULTS/$out.json"
}

# nimserve's gauge or counter nimserve_spec_$2 on port $1 (from /v1/metrics).
spec_metric() {
	curl -sf --max-time 10 "http://127.0.0.1:$1/v1/metrics" |
		sed -n "s/^nimserve_spec_$2 \([0-9.eE+-]*\)\$/\1/p"
}

# One case, nimserve: profile $1, dataset $2, name $3, speculation options
# after.  Appends a row to $SPEC_TSV.
spec_case_ours() {
	prec=$1 ds=$2 name=$3
	shift 3
	serve_start_nimserve "$BB/serve/manifest-spec.yaml" "spec-$name-off" --profile "cpu-$prec-tp1" \
		--speculative none --max-batch 8
	off=$(spec_measure "$SERVE_PORT" "$ds" "spec-$name-nimserve-off")
	serve_stop "$SERVE_PID"
	serve_start_nimserve "$BB/serve/manifest-spec.yaml" "spec-$name-on" --profile "cpu-$prec-tp1" \
		--max-batch 8 "$@"
	on=$(spec_measure "$SERVE_PORT" "$ds" "spec-$name-nimserve-on")
	acc=$(spec_metric "$SERVE_PORT" acceptance_rate)
	paused=$(spec_metric "$SERVE_PORT" paused_steps_total)
	serve_stop "$SERVE_PID"
	set -- $off
	off_tps=$1 off_tok=$2
	set -- $on
	[ "$off_tok" = "$2" ] ||
		bench_die "nimserve $name: $off_tok output tokens without speculation, $2 with it (greedy answers must be the same)"
	printf 'nimserve\t%s\t%s\t%s\t%s\t%s\n' "$name" "$off_tps" "$1" \
		"$(python3 -c "print('%.2f' % ($1 / $off_tps))")" "${acc:--}" >>"$SPEC_TSV"
	bench_log "spec: nimserve $name: $off_tps -> $1 tok/s, acceptance ${acc:--}, steps without drafts ${paused:--}"
}

# The same case on llama-server: GGUF $1, dataset $2, name $3, its options after.
spec_case_peer() {
	gg=$1 ds=$2 name=$3
	shift 3
	[ "${BENCH_SPEC_PEER:-1}" = 1 ] || return 0
	spec_start_llama "$gg" "$name-off"
	off=$(spec_measure "$SERVE_PORT" "$ds" "spec-$name-llama-off")
	serve_stop "$SERVE_PID"
	spec_start_llama "$gg" "$name-on" "$@"
	on=$(spec_measure "$SERVE_PORT" "$ds" "spec-$name-llama-on")
	serve_stop "$SERVE_PID"
	set -- $off
	off_tps=$1
	set -- $on
	printf 'llama-server\t%s\t%s\t%s\t%s\t-\n' "$name" "$off_tps" "$1" \
		"$(python3 -c "print('%.2f' % ($1 / $off_tps))")" >>"$SPEC_TSV"
	bench_log "spec: llama-server $name: $off_tps -> $1 tok/s"
}

bench_spec() {
	. tests/bench/bench_serve.sh # server helpers
	trap serve_stop_all EXIT INT TERM
	spec_prepare
	SPEC_TSV=$RESULTS/spec.tsv
	printf 'server\tcase\toff_tok_s\ton_tok_s\tspeedup\tacceptance\n' >"$SPEC_TSV"
	spec_summarise_texts | spec_jsonl "$RESULTS/spec-summarise.jsonl"
	spec_chat_questions | spec_jsonl "$RESULTS/spec-chat.jsonl"
	q41=$BB/gguf/smollm2-$(bench_gguf_type int4-wo).gguf
	spec_case_ours fp32 "$RESULTS/spec-summarise.jsonl" "lookup-fp32-summarise" \
		--speculative lookup --spec-k "$SPEC_K" --spec-ngram 3 --spec-adaptive 0
	spec_case_peer "$BB/gguf/smollm2-f32.gguf" "$RESULTS/spec-summarise.jsonl" "lookup-fp32-summarise" \
		--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m "$SPEC_K"
	for prec in fp32 int8-wo; do
		spec_case_ours "$prec" "$RESULTS/spec-chat.jsonl" "draft-int4-for-$prec-chat" \
			--speculative draft --draft-profile cpu-int4-wo-tp1 --spec-k "$SPEC_K" --spec-adaptive 0
		spec_case_ours "$prec" "$RESULTS/spec-chat.jsonl" "draft-int4-for-$prec-chat-adaptive" \
			--speculative draft --draft-profile cpu-int4-wo-tp1 --spec-k "$SPEC_K" --spec-adaptive 1
		spec_case_peer "$BB/gguf/smollm2-$(bench_gguf_type "$prec").gguf" "$RESULTS/spec-chat.jsonl" \
			"draft-int4-for-$prec-chat" -md "$q41" --spec-draft-n-max "$SPEC_K" -td "$THREADS"
	done
	python3 -c '
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| " + " | ".join(rows[0]) + " |")
print("|" + " --- |" * len(rows[0]))
for r in rows[1:]:
    print("| " + " | ".join(r) + " |")' "$SPEC_TSV" | tee "$RESULTS/spec.md"
	serve_stop_all
	trap - EXIT INT TERM
}
