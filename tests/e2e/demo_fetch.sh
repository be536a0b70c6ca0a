#!/bin/sh
# demo_fetch.sh - `make demo` on a machine without ../shared: ci/demo.sh
# fetches the recipe's pinned URLs, here redirected by NIMFACTORY_URL_MIRROR
# to a loopback server of ours serving the same bytes, builds the image and
# prints the sample sentence.  Then a server serving different bytes under
# the same URL is refused by the sha256 pin.
set -u
SRC="${NF_SRC:?}"
BUILD="${NF_BUILD:?}"
MODELS="${NF_SHARED:?}/models/stories260K"
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
	"$BUILD/tools/nf_test_httpd" --root "$1" --max-seconds 120 --log "$W/requests.log" >"$W/port" &
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
t "it printed where the image is" grep -q "the image is the OCI layout $W/out/oci" "$W/demo.log"
t "it printed the sample sentence" grep -q "^Once upon a time, there was a little girl named Lily" "$W/demo.log"
t "the image is there" test -f "$W/out/oci/index.json"
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
