#!/bin/bash
# smollm2.sh - a real instruction-tuned model end to end: recipes/smollm2-135m-instruct.yaml
# builds cpu fp32 and int8-wo engines from SmolLM2-135M-Instruct's GGUF (its
# byte-level BPE tokenizer and ChatML template come from the file), gated
# against the float32 reference; `nimfactory run --chat` answers "What is the
# capital of France?" with "The capital of France is Paris."; tokenize and
# detokenize work on the engine; the image, unpacked and started in its own
# root, answers the same question through the official openai client (plain
# and streamed) with the model's own template; and the Hugging Face folder
# `nimfactory convert` writes from the GGUF builds the same fp32 engine
# weights and the same greedy answer.
#
# The sanitizer pass (NF_SAN=1) gates a reduced copy of the recipe (one gate
# prompt of 8 tokens): the same code paths, in a fraction of the time the
# float32 reference takes under ASan.
#
# The Hugging Face side (convert, then a build from the folder, in a cache
# of its own) runs in the background from the start, beside the GGUF build
# and its checks.  Its recipe neither autotunes nor compresses: the GGUF
# build does both, and what is compared (the weights file, the greedy
# answer from the output folder) depends on neither.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
SRC="${NF_SRC:?}"
GGUF="${NF_SHARED:?}/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
W=$(mktemp -d /tmp/nf-e2e-smollm2-XXXXXX)
PID=
HF_PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	[ -n "$HF_PID" ] && kill "$HF_PID" 2>/dev/null && wait "$HF_PID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
. "$SRC/tests/tap.sh"
. "$SRC/tests/pyref.sh"

if [ ! -f "$GGUF" ]; then
	echo "1..0 # skip no $GGUF"
	exit 0
fi
pyref_python
QUESTION="What is the capital of France?"
ANSWER="The capital of France is Paris."

# The recipe as shipped, or reduced for the sanitizer pass.
recipe_for_pass() { # recipe_for_pass DEST [SOURCE-YAML-LINES]
	if [ "${NF_SAN:-}" = 1 ]; then
		"$PY" - "$SRC/recipes/smollm2-135m-instruct.yaml" "$1" <<'PY'
import sys, re
s = open(sys.argv[1]).read()
s = re.sub(r"    prompts:\n(      - .*\n)+", '    prompts: ["The three primary colours are"]\n', s)
s = s.replace("    max_tokens: 32\n    default:", "    max_tokens: 8\n    default:")
open(sys.argv[2], "w").write(s)
PY
	else
		cp "$SRC/recipes/smollm2-135m-instruct.yaml" "$1"
	fi
}

# The recipe with the Hugging Face folder `convert` writes as its source.
hf_recipe() { # hf_recipe RECIPE DEST HF-FOLDER
	"$PY" - "$1" "$2" "$3" <<'PY'
import sys, re
s = open(sys.argv[1]).read()
s = re.sub(r"  source:\n    url: .*\n    sha256: .*\n    format: gguf\n", "  source:\n    path: %s\n    format: hf\n" % sys.argv[3], s)
# the fp32 profile is the one compared: build only it
s = s.replace("precisions: [fp32, int8-wo]", "precisions: [fp32]").replace("precision_preference: [int8-wo, fp32]", "precision_preference: [fp32]")
# what is compared depends on neither (the GGUF build autotunes and compresses)
s = s.replace("  autotune: true\n", "  autotune: false\n").replace("  compression: gzip\n", "  compression: none\n")
open(sys.argv[2], "w").write(s)
PY
}

# convert GGUF -> hf, then the build from it: exit statuses in hf-*.rc
hf_side() {
	"$NF" convert "$GGUF" "$W/hf" >/dev/null 2>"$W/convert.err"
	echo $? >"$W/hf-convert.rc"
	hf_recipe "$W/recipe.yaml" "$W/recipe-hf.yaml" "$W/hf" &&
		NIMFACTORY_CACHE="$W/cache-hf" "$NF" build "$W/recipe-hf.yaml" --out "$W/out-hf" \
			>"$W/build-hf.log" 2>&1
	echo $? >"$W/hf-build.rc"
}

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
"$NF" cache add "$GGUF" >/dev/null
recipe_for_pass "$W/recipe.yaml"
hf_side &
HF_PID=$!
"$NF" build "$W/recipe.yaml" --out "$W/out" >"$W/build.log" 2>&1
rc=$?
is "the recipe builds, every gate passed" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$W/build.log" | tail -20
t "the gate report says passed" grep -q '"verdict": *"passed"' "$W/out/reports/gates.json"
t "the manifest serves chat with the model's own template" grep -q 'chat_template: "model"' "$W/out/model_manifest.yaml"
FP32=$(grep -l '"precision": "fp32"' "$W"/out/engines/*/config.json | head -1 | xargs -r dirname)
t "the fp32 engine holds tokenizer.json and tokenizer_config.json" \
	test -s "$FP32/tokenizer.json" -a -s "$FP32/tokenizer_config.json"

# Tokenizer on the engine: control tokens whole, no BOS added (SmolLM2 adds none).
ids=$("$NF" tokenize "$W/out" --profile cpu-fp32-tp1 --text "<|im_start|>user")
is "tokenize matches <|im_start|> whole, adds no BOS" "${ids%% *}" 1
ids_text=$("$NF" tokenize "$W/out" --profile cpu-fp32-tp1 --no-special --text "<|im_start|>user")
t "--no-special spells it as text" test "${ids_text%% *}" != 1
back=$("$NF" detokenize "$W/out" --profile cpu-fp32-tp1 --ids "$ids_text")
is "detokenize gives the text back" "$back" "<|im_start|>user"
t "the engine's tokenizer equals Hugging Face's on it" "$PY" -c '
import sys, subprocess, tokenizers
tok = tokenizers.Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
for s in ["What is the capital of France?", "  two  spaces\r\n and 12345 \U0001F44B\U0001F3FD", "<|im_start|>user\nhi<|im_end|>"]:
    ours = subprocess.run([sys.argv[2], "tokenize", sys.argv[1], "--text", s], capture_output=True, text=True, check=True).stdout.split()
    assert [int(x) for x in ours] == tok.encode(s).ids, (s, ours, tok.encode(s).ids)' "$FP32" "$NF"

# One user message through the model's template, greedy.
"$NF" run "$W/out" --profile cpu-fp32-tp1 --chat "$QUESTION" --max-tokens 40 --quiet >"$W/chat.txt" 2>"$W/chat.err"
is "run --chat: the fp32 engine's greedy answer" "$(cat "$W/chat.txt")" "$ANSWER"

# The image serves chat through the openai client.
serve_image() {
	if [ "$(id -u)" != 0 ] || ! command -v chroot >/dev/null || ! unshare --mount true 2>/dev/null; then
		skip "starting the image's entrypoint needs root (chroot, unshare --mount)"
		return
	fi
	umoci unpack --rootless --image "$W/out/oci:1.0.0" "$W/bundle" >/dev/null 2>&1
	ROOT="$W/bundle/rootfs"
	mkdir -p "$ROOT/proc"
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin NIM_HOST=127.0.0.1 NIM_PORT=0 \
		NIM_MODEL_PROFILE=cpu-fp32-tp1 \
		unshare --mount sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$ROOT" \
		/opt/nim/bin/nimserve --port-file /tmp/port --drain-timeout 10 >"$W/serve.log" 2>&1 &
	PID=$!
	i=0
	while [ ! -s "$ROOT/tmp/port" ] && [ $i -lt 300 ] && kill -0 "$PID" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	PORT=$(cat "$ROOT/tmp/port" 2>/dev/null)
	i=0
	until curl -sf "http://127.0.0.1:$PORT/v1/health/ready" >/dev/null 2>&1 || [ $i -ge 300 ]; do sleep 0.1; i=$((i + 1)); done
	t "the image's nimserve becomes ready" curl -sf "http://127.0.0.1:$PORT/v1/health/ready"
	t "the openai client's chat.completions.create gets the answer, plain and streamed" "$PY" - "$PORT" "$QUESTION" "$ANSWER" <<'PY'
import sys, openai
port, question, answer = sys.argv[1], sys.argv[2], sys.argv[3]
c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=120, max_retries=0)
msgs = [{"role": "user", "content": question}]
r = c.chat.completions.create(model="smollm2-135m-instruct", messages=msgs, max_tokens=40, temperature=0)
assert r.choices[0].message.content == answer, r
assert r.choices[0].finish_reason == "stop", r.choices[0].finish_reason
s = c.chat.completions.create(model="smollm2-135m-instruct", messages=msgs, max_tokens=40, temperature=0, stream=True)
text = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
assert text == answer, text
PY
	kill -TERM "$PID"
	wait "$PID"
	is "SIGTERM: nimserve exits 0" "$?" 0
	PID=
}
serve_image

# The same weights as a Hugging Face folder build the same engine.
wait "$HF_PID"
HF_PID=
is "convert GGUF -> hf" "$(cat "$W/hf-convert.rc")" 0
t "it wrote the five files" test -s "$W/hf/config.json" -a -s "$W/hf/model.safetensors" -a \
	-s "$W/hf/tokenizer.json" -a -s "$W/hf/tokenizer_config.json" -a -s "$W/hf/generation_config.json"
t "tokenizer_config.json carries the chat template" grep -q '"chat_template"' "$W/hf/tokenizer_config.json"
rc=$(cat "$W/hf-build.rc")
is "the recipe with the Hugging Face folder as its source builds" "$rc" 0
[ "$rc" = 0 ] || sed 's/^/#   /' "$W/build-hf.log" | tail -20
FP32_HF=$(grep -l '"precision": "fp32"' "$W"/out-hf/engines/*/config.json 2>/dev/null | head -1 | xargs -r dirname)
t "its fp32 engine's weights are the GGUF build's, byte for byte" \
	cmp "$FP32/weights.safetensors" "$FP32_HF/weights.safetensors"
"$NF" run "$W/out-hf" --profile cpu-fp32-tp1 --chat "$QUESTION" --max-tokens 40 --quiet >"$W/chat-hf.txt" 2>/dev/null
is "and the same greedy answer" "$(cat "$W/chat-hf.txt")" "$ANSWER"
finish
