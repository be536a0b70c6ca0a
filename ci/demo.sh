#!/bin/sh
# make demo: build recipes/llama.yaml end to end and show what came out.
#
# Where ../shared/models holds the model (this project's machines), the cache
# is seeded from it and nothing is fetched; elsewhere the recipe's pinned URLs
# are fetched (NIMFACTORY_URL_MIRROR can point them at a mirror).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
NF=$BUILD/bin/nimfactory
OUT=${OUT:-out/stories260k}
SHARED=${SHARED:-../shared}
MODELS=$SHARED/models/stories260K

if [ -f "$MODELS/stories260K.bin" ] && [ -f "$MODELS/tok512.bin" ]; then
	echo "demo: seeding the cache from $MODELS"
	"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin"
else
	echo "demo: no $MODELS here; the build fetches the recipe's pinned URLs"
fi

"$NF" build recipes/llama.yaml --out "$OUT"

echo
echo "demo: the image is the OCI layout $OUT/oci (tag $(sed -n 's/^  tag: "\(.*\)"$/\1/p' recipes/llama.yaml))"
echo "demo: a sample of the fp32 engine's text (greedy, empty prompt):"
"$NF" run "$OUT" --profile cpu-fp32-tp1 --prompt "" --max-tokens 60 --quiet
