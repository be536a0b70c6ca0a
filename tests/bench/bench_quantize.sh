# bench_quantize.sh - quantization throughput (sourced by run.sh).
#
# nf_quant_bench on THREADS threads: a 512 MiB float32 matrix quantized into
# every weight format by the engine build's row-parallel quantizer, best of
# 3; GB/s of float32 input, beside the memory read bandwidth (nf_membw) that
# bounds a pass that reads the input once.  The table goes to stdout,
# build/bench/results/quantize.md and docs/benchmarks.md (between the
# bench:quantize markers).

bench_quantize() {
	bench_build_tools nf_membw nf_quant_bench
	gbs=$(bench_membw)
	out=$("$TOOLS/nf_quant_bench" --mb 512 --threads "$THREADS" --runs 3) ||
		bench_die "nf_quant_bench failed"
	printf '%s\n' "$out" >"$RESULTS/quantize.txt"
	{
		echo "Command: \`make bench BENCH=quantize\` (nf_quant_bench: a 512 MiB float32 matrix of"
		echo "4096 columns quantized by the engine build's row-parallel quantizer on $THREADS threads,"
		echo "best of 3; GB/s of float32 input).  Memory read bandwidth: $gbs GB/s."
		echo
		echo "| format | GB/s of input | % of read bandwidth | seconds per GiB |"
		echo "| --- | --- | --- | --- |"
		printf '%s\n' "$out" | while read -r line; do
			f=$(bench_field format "$line")
			g=$(bench_field gb_s "$line")
			awk -v f="$f" -v g="$g" -v b="$gbs" 'BEGIN {
				printf "| %s | %.2f | %.0f%% | %.2f |\n", f, g, 100 * g / b, 1.073741824 / g }'
		done
	} >"$RESULTS/quantize.md"
	cat "$RESULTS/quantize.md"
	python3 tests/bench/report.py doc docs/benchmarks.md quantize "$RESULTS/quantize.md"
}
