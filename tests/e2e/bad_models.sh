#!/bin/bash
# bad_models.sh - damaged model files through the real CLI: a GGUF cut short
# or lying, a damaged tokenizer.json, and chat templates that do not compile
# or refuse every conversation each give exit 2 and one line naming the file
# and the offset or line:col; a build that fails on them makes no output and
# leaves an earlier one as it was.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
SRC="${NF_SRC:?}"
GGUF="${NF_SHARED:?}/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
W=$(mktemp -d /tmp/nf-e2e-badmodels-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"

if [ ! -f "$GGUF" ]; then
	echo "1..0 # skip no $GGUF"
	exit 0
fi
export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1

# refused NAME WANT-REGEX CMD...: exit 2, stderr one line matching WANT (a
# build logs its stages first: there the error is its last line)
refused() {
	name=$1 want=$2
	shift 2
	"$@" >"$W/out.txt" 2>"$W/err.txt"
	rc=$?
	is "$name: exit 2" "$rc" 2
	if [ "$2" = build ]; then
		tail -1 "$W/err.txt" >"$W/err1.txt"
	else
		t "$name: one line on stderr" test "$(grep -c . "$W/err.txt")" = 1
		cp "$W/err.txt" "$W/err1.txt"
	fi
	t "$name: it says where and what ($(head -c 200 "$W/err1.txt"))" grep -Eq "$want" "$W/err1.txt"
}

# GGUF: cut inside the metadata, and a version byte that lies.
head -c 5000 "$GGUF" >"$W/cut.gguf"
refused "a GGUF cut short" "cut\.gguf: offset [0-9]+: " "$NF" convert "$W/cut.gguf" "$W/x"
t "no output folder for it" test ! -e "$W/x"
cp "$GGUF" "$W/v9.gguf"
printf '\011' | dd of="$W/v9.gguf" bs=1 seek=4 conv=notrunc 2>/dev/null
refused "a GGUF of version 9" "v9\.gguf: offset 4: .*version" "$NF" convert "$W/v9.gguf" "$W/x"

# A Hugging Face folder with its tokenizer (convert writes it from the GGUF).
"$NF" convert "$GGUF" "$W/hf" >/dev/null 2>&1
is "convert GGUF -> hf" "$?" 0
mkdir -p "$W/tok"
cp "$W/hf/tokenizer.json" "$W/hf/tokenizer_config.json" "$W/tok/"
head -c 70000 "$W/hf/tokenizer.json" >"$W/tok/tokenizer.json"
refused "a tokenizer.json cut short" "tokenizer\.json.*[0-9]+:[0-9]+|tokenizer\.json.*line [0-9]+" \
	"$NF" tokenize "$W/tok" --text "hi"

# Recipes over the HF folder with a template edited in tokenizer_config.json.
with_template() { # with_template NAME TEMPLATE: a recipe over a copy of the folder
	mkdir -p "$W/$1"
	for f in "$W"/hf/*; do ln -f "$f" "$W/$1/"; done # hard links: sources are regular files
	rm "$W/$1/tokenizer_config.json"
	python3 - "$W/hf/tokenizer_config.json" "$W/$1/tokenizer_config.json" "$2" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["chat_template"] = sys.argv[3]
json.dump(c, open(sys.argv[2], "w"))
PY
	sed -e "s|^    url: .*|    path: $W/$1|; /^    sha256: /d; s|^    format: gguf|    format: hf|" \
		"$SRC/recipes/smollm2-135m-instruct.yaml" >"$W/$1.yaml"
}
with_template broken "{% for m in messages %}{{ m.content }}{% endfor"
refused "a template that does not compile fails the build" "chat_template:1:[0-9]+: " \
	"$NF" build "$W/broken.yaml" --out "$W/out-broken" --log-format text
t "no output for it" test ! -e "$W/out-broken"
with_template raises "{{ raise_exception('this model does not chat') }}"
refused "a template that refuses every conversation fails the build" \
	"chat_template:1:[0-9]+: this model does not chat" \
	"$NF" build "$W/raises.yaml" --out "$W/out-raises" --log-format text

# An earlier good output survives a failing build into the same folder.
mkdir -p "$W/kept" && echo keep >"$W/kept/marker"
"$NF" build "$W/broken.yaml" --out "$W/kept" --log-format text >/dev/null 2>&1
t "a failed build leaves the earlier output as it was" grep -qx keep "$W/kept/marker"
finish
