#!/bin/sh
# make demo: build both shipped recipes end to end and show what came out:
# recipes/llama.yaml (stories260K, llama2.c checkpoint and tokenizer) and
# recipes/smollm2-135m-instruct.yaml (SmolLM2-135M-Instruct as GGUF, with its
# own byte-level BPE tokenizer and ChatML template).
#
# Where ../shared/models holds the models (this project's machines), the
# cache is seeded from it and nothing is fetched; elsewhere the recipes'
# pinned URLs are fetched (NIMFACTORY_URL_MIRROR can point them at a mirror).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NF=$BUILD/bin/nimfactory
OUT=${OUT:-out}
SHARED=${SHARED:-../shared}
STORIES=$SHARED/models/stories260K
SMOL=$SHARED/models/smollm2-135m-instruct

seed() { # seed FILE...: add the files to the cache when they are all here
	for f in "$@"; do [ -f "$f" ] || return 1; done
	echo "demo: seeding the cache from $(dirname "$1")"
	"$NF" cache add "$@"
}

seed "$STORIES/stories260K.bin" "$STORIES/tok512.bin" ||
	echo "demo: no $STORIES here; the build fetches the recipe's pinned URLs"
"$NF" build recipes/llama.yaml --out "$OUT/stories260k"
echo
echo "demo: the image is the OCI layout $OUT/stories260k/oci (tag $(sed -n 's/^  tag: "\(.*\)"$/\1/p' recipes/llama.yaml))"
echo "demo: a sample of the fp32 engine's text (greedy, empty prompt):"
"$NF" run "$OUT/stories260k" --profile cpu-fp32-tp1 --prompt "" --max-tokens 60 --quiet
echo

seed "$SMOL/SmolLM2-135M-Instruct.Q4_1.gguf" ||
	echo "demo: no $SMOL here; the build fetches the recipe's pinned URL"
"$NF" build recipes/smollm2-135m-instruct.yaml --out "$OUT/smollm2-135m-instruct"
echo
echo "demo: the image is the OCI layout $OUT/smollm2-135m-instruct/oci (tag $(sed -n 's/^  tag: "\(.*\)"$/\1/p' recipes/smollm2-135m-instruct.yaml))"
echo "demo: the fp32 engine answers a chat message through the model's own template (greedy):"
echo "demo: > What is the capital of France?"
"$NF" run "$OUT/smollm2-135m-instruct" --profile cpu-fp32-tp1 --chat "What is the capital of France?" \
	--max-tokens 40 --quiet
