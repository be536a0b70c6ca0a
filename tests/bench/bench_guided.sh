# bench_guided.sh - structured output's cost on SmolLM2-135M-Instruct int8-wo
# (sourced by run.sh): the same chat questions, each asking for a JSON
# record, answered by one server without a guide and then with
# response_format json_schema (bench-serve --extra-body), nimserve and
# llama-server (Q8_0, --jinja; its json_schema becomes a grammar) alike.
# The cost is the decode time per output token (TPOT p50) with the guide
# over without, from bench-serve in the same run (BENCH_GUIDED_REQUESTS, 8,
# one at a time, at most BENCH_GUIDED_TOKENS, 96, each); tokens/s are shown
# too, though a guided answer has another length.  Issue 16's target:
# nimserve's guided TPOT less than 10% above its unguided one.  Results:
# build/bench/results/guided.{tsv,md}.  BENCH_SPEC_PEER=0 leaves llama-server
# out (bench_spec.sh).

GUIDED_SCHEMA='{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}, "city": {"type": "string"}, "hobbies": {"type": "array", "items": {"type": "string"}, "maxItems": 4}, "member": {"type": "boolean"}}, "required": ["name", "age", "city", "hobbies", "member"], "additionalProperties": false}'

guided_questions() {
	for who in "a baker from Paris" "a young pilot" "a retired teacher who loves gardens" \
		"a chess player" "a fisherman from Norway" "a student of music" "a doctor in Kenya" \
		"a painter who lives by the sea"; do
		printf 'Describe %s as a JSON object with name, age, city, hobbies and member.\n\n' "$who"
	done
}

# One server on port $1 ($2 names it): unguided then guided; a row of $GUIDED_TSV.
guided_measure() {
	port=$1 who=$2
	set -- --requests "${BENCH_GUIDED_REQUESTS:-8}" --max-tokens "${BENCH_GUIDED_TOKENS:-96}"
	off=$(spec_measure "$port" "$RESULTS/guided.jsonl" "guided-$who-off" "$@")
	on=$(spec_measure "$port" "$RESULTS/guided.jsonl" "guided-$who-on" "$@" --extra-body \
		"{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", \"strict\": true, \"schema\": $GUIDED_SCHEMA}}}")
	python3 - "$who" "$off" "$on" "$RESULTS/guided-$who-on.json" >>"$GUIDED_TSV" <<'PY'
import sys
who, off, on = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print("%s\t%s\t%s\t%s\t%s\t%+.1f%%" % (who, off[0], on[0], off[2], on[2], 100 * (float(on[2]) / float(off[2]) - 1)))
PY
	bench_log "guided: $who: off '$off', on '$on' (tok/s, tokens, TPOT p50 ms)"
}

bench_guided() {
	. tests/bench/bench_serve.sh # server helpers
	. tests/bench/bench_spec.sh  # the SmolLM2 engines, manifest and llama.cpp files
	trap serve_stop_all EXIT INT TERM
	spec_prepare
	guided_questions | spec_jsonl "$RESULTS/guided.jsonl"
	GUIDED_TSV=$RESULTS/guided.tsv
	printf 'server\toff_tok_s\ton_tok_s\toff_tpot_p50_ms\ton_tpot_p50_ms\ttpot_cost\n' >"$GUIDED_TSV"
	serve_start_nimserve "$BB/serve/manifest-spec.yaml" guided --profile cpu-int8-wo-tp1 --max-batch 8
	guided_measure "$SERVE_PORT" nimserve
	serve_stop "$SERVE_PID"
	if [ "${BENCH_SPEC_PEER:-1}" = 1 ]; then
		spec_start_llama "$BB/gguf/smollm2-$(bench_gguf_type int8-wo).gguf" guided
		guided_measure "$SERVE_PORT" llama-server
		serve_stop "$SERVE_PID"
	fi
	python3 -c '
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| " + " | ".join(rows[0]) + " |")
print("|" + " --- |" * len(rows[0]))
for r in rows[1:]:
    print("| " + " | ".join(r) + " |")' "$GUIDED_TSV" | tee "$RESULTS/guided.md"
	trap - EXIT INT TERM
}
