#!/bin/sh
# quantize_stream.sh - an engine built straight from a checkpoint file a
# layer at a time (nf_engine_build_tool --stream, nf_engine_build_stream):
# byte for byte the engine of the model loaded whole, for a llama2.c file
# (pread) and a Hugging Face folder (mapped, its pages dropped after use),
# plain (int8-wo) and calibrated with AWQ (int4-awq); its peak resident
# memory a fraction of the float32 model's size; a damaged file leaves no
# weights behind.
set -u
B="${NF_BUILD:?}"
NF="$B/bin/nimfactory"
TOOL="$B/tools/nf_engine_build_tool"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-qstream-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

# ~100 MB of float32 weights, almost all in its 16 layers (the sanitizer
# build, ~10x slower, gets 4 layers and no memory bound: its shadow
# memory is not the builder's).
layers=16
[ "${NF_SAN:-}" = 1 ] && layers=4
"$B/tools/nf_synth_model" --dim 384 --hidden 1024 --layers $layers --heads 6 --kv-heads 2 \
	--vocab 1024 --seq 256 "$W/m.bin" "$W/tok.bin" >/dev/null

# build NAME MODEL PRECISION [--stream]: an engine in $W/NAME
build() {
	name=$1 model=$2 prec=$3
	shift 3
	"$TOOL" "$model" "$W/tok.bin" "$prec" "$W/$name" --no-autotune --threads 2 "$@" \
		>"$W/$name.out"
}

for p in int8-wo int4-awq; do
	t "llama2.c $p: streamed build" build s-$p "$W/m.bin" $p --stream
	t "llama2.c $p: whole-model build" build w-$p "$W/m.bin" $p
	t "llama2.c $p: the same weights" cmp "$W/s-$p/weights.safetensors" "$W/w-$p/weights.safetensors"
	t "llama2.c $p: the same config" cmp "$W/s-$p/config.json" "$W/w-$p/config.json"
done

model_kib=$(($(stat -c %s "$W/m.bin") / 1024))
peak=$(sed -n 's/^peak_rss_kib //p' "$W/s-int8-wo.out")
if [ "${NF_SAN:-}" = 1 ]; then
	skip "peak memory under a third of the model (not measured under sanitizers)"
else
	is "peak memory ${peak} KiB is under a third of the ${model_kib} KiB model" \
		"$([ "${peak:-999999999}" -lt $((model_kib / 3)) ] && echo yes)" yes
fi

t "convert to a Hugging Face folder (F16)" "$NF" convert "$W/m.bin" "$W/hf" --dtype F16
# the HF folder needs the tokenizer the tool is given; the weights are what count
t "hf int8-wo: streamed build" build hs "$W/hf" int8-wo --stream
t "hf int8-wo: whole-model build" build hw "$W/hf" int8-wo
t "hf int8-wo: the same weights" cmp "$W/hs/weights.safetensors" "$W/hw/weights.safetensors"

# a file cut short: one line naming it, nothing written
head -c $(($(stat -c %s "$W/m.bin") / 2)) "$W/m.bin" >"$W/cut.bin"
"$TOOL" "$W/cut.bin" "$W/tok.bin" int8-wo "$W/cut" --no-autotune --stream >/dev/null 2>"$W/cut.err"
is "a truncated checkpoint exits 2" "$?" 2
is "the message names the file" "$(grep -c "cut.bin" "$W/cut.err")" 1
is "no weights are left behind" "$(ls "$W/cut" 2>/dev/null | grep -c weights)" 0
finish
