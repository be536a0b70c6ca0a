#!/bin/bash
# tokenizer_hf.sh - `nimfactory tokenize/detokenize` against Hugging Face
# `tokenizers` on real vocabularies: SmolLM2's (from its GGUF, with the
# SmolLM, GPT-2, Llama-3 and Qwen2 pre-tokenizer splits) and stories260K's
# tok512.bin as a SentencePiece tokenizer.json (byte fallback, merges from
# the scores); also a tokenizer.json written by our writer, read by both.
# The work is in tokenizer_hf.py; this script checks the inputs are there.
set -u
: "${NF_BUILD:?}" "${NF_SRC:?}" "${NF_SHARED:?}"
. "$NF_SRC/tests/pyref.sh"
GGUF="$NF_SHARED/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
TOK="$NF_SHARED/models/stories260K/tok512.bin"
if [ ! -f "$GGUF" ] || [ ! -f "$TOK" ]; then
	echo "1..0 # skip NF_SHARED lacks the SmolLM2 GGUF or tok512.bin"
	exit 0
fi
pyref_python
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" "$NF_SRC/tests/e2e/tokenizer_hf.py" "$WORK"
