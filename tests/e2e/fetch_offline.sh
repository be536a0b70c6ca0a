#!/bin/sh
# fetch_offline.sh - `nimfactory cache` end to end (TAP): seed with `cache add`,
# fetch a pinned url through NIMFACTORY_URL_MIRROR from nf_test_httpd on
# 127.0.0.1, then with the server stopped and NIMFACTORY_OFFLINE=1 the cached
# blob is used; a missing blob offline fails with the seeding hint (exit 4).
set -u
BUILD=${NF_BUILD:-$(pwd)/build}
NF=$BUILD/bin/nimfactory
HTTPD=$BUILD/tools/nf_test_httpd
T=$(mktemp -d /tmp/nf_e2e_fetch.XXXXXX)
SERVER_PID=
n=0
fails=0

cleanup() {
	if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
	chmod -R u+w "$T" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

ok() { # ok COND-EXIT-STATUS NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails + 1)); fi
}

echo "1..14"
if [ ! -x "$NF" ] || [ ! -x "$HTTPD" ]; then
	for i in $(seq 1 14); do echo "not ok $i - $NF or $HTTPD not built"; done
	exit 1
fi

export NIMFACTORY_CACHE="$T/cache"
unset NIMFACTORY_OFFLINE NIMFACTORY_URL_MIRROR
mkdir -p "$T/www/org/m/resolve/main"
head -c 300000 /dev/urandom > "$T/www/org/m/resolve/main/model.bin"
echo "seed me" > "$T/seed.txt"
SUM=$(sha256sum "$T/www/org/m/resolve/main/model.bin" | cut -d' ' -f1)
SEED_SUM=$(sha256sum "$T/seed.txt" | cut -d' ' -f1)

out=$("$NF" cache path)
[ "$out" = "$T/cache" ]; ok $? "cache path honours NIMFACTORY_CACHE"

out=$("$NF" cache add "$T/seed.txt")
[ "$out" = "sha256:$SEED_SUM  $T/seed.txt" ]; ok $? "cache add prints sha256:<hex>  FILE"
mode=$(stat -c %a "$T/cache/blobs/sha256/$SEED_SUM" 2>/dev/null)
[ "$mode" = 444 ]; ok $? "the blob is read-only (mode $mode)"

"$NF" cache add "$T/nonexistent" 2>/dev/null
[ $? -eq 2 ]; ok $? "cache add of a missing file exits 2"

# Serve the model and fetch it through a mirror.
"$HTTPD" --root "$T/www" --max-seconds 60 --log "$T/requests.log" > "$T/port" &
SERVER_PID=$!
i=0
while [ ! -s "$T/port" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
PORT=$(head -1 "$T/port")
[ -n "$PORT" ]; ok $? "test server listening on 127.0.0.1:$PORT"

export NIMFACTORY_URL_MIRROR="https://huggingface.co/=http://127.0.0.1:$PORT/"
URL=https://huggingface.co/org/m/resolve/main/model.bin
out=$(timeout 60 "$NF" cache fetch "$URL" "$SUM")
[ "$out" = "sha256:$SUM  $T/cache/blobs/sha256/$SUM" ]; ok $? "cache fetch through the mirror"
cmp -s "$T/cache/blobs/sha256/$SUM" "$T/www/org/m/resolve/main/model.bin"; ok $? "the bytes match"

BAD=$(echo "$SUM" | tr '0-9a-f' '1-9a-f0')
timeout 60 "$NF" cache fetch "$URL" "$BAD" 2> "$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "sha256 mismatch" "$T/err"; ok $? "a wrong pin is refused with exit 2"
[ ! -e "$T/cache/blobs/sha256/$BAD" ]; ok $? "and nothing is stored under it"

kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=
reqs=$(wc -l < "$T/requests.log")

out=$(NIMFACTORY_OFFLINE=1 timeout 60 "$NF" cache fetch "$URL" "$SUM")
[ "$out" = "sha256:$SUM  $T/cache/blobs/sha256/$SUM" ]; ok $? "offline, server stopped: the cached blob is used"
[ "$(wc -l < "$T/requests.log")" -eq "$reqs" ]; ok $? "no request was made"

MISSING=https://huggingface.co/org/m/resolve/main/other.bin
NIMFACTORY_OFFLINE=1 timeout 60 "$NF" cache fetch "$MISSING" "$BAD" 2> "$T/err"
rc=$?
[ $rc -eq 4 ]; ok $? "offline and not cached exits 4 (got $rc)"
want="nimfactory cache: source $MISSING (sha256 $BAD) is not in the cache $T/cache and the network is off; seed it with: nimfactory cache add FILE"
got=$(cat "$T/err")
[ "$got" = "$want" ]; ok $? "the message says how to seed"
[ "$got" = "$want" ] || { echo "# got:  $got"; echo "# want: $want"; }

"$NF" cache ls | grep -q "^blob   sha256:$SUM  300000\$"; ok $? "cache ls lists the blob and its size"

[ $fails -eq 0 ]
