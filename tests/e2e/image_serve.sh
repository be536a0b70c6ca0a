#!/bin/sh
# image_serve.sh - the image `nimfactory build recipes/llama.yaml` emits really
# serves the model: unpack it with umoci, start its entrypoint inside the
# unpacked root filesystem (chroot, listening on 127.0.0.1), wait for
# /v1/health/ready, and check that greedy completions, streamed and not,
# equal what `nimfactory run` prints for the same engine and prompt; the
# image's own health-check command answers; SIGTERM ends it cleanly.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-image-XXXXXX)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
. "$SRC/tests/tap.sh"

if [ "$(id -u)" != 0 ] || ! command -v chroot >/dev/null || ! unshare --mount true 2>/dev/null; then
	echo "1..0 # skip starting the image's entrypoint needs root (chroot, unshare --mount)"
	exit 0
fi

export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1
"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null
"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "build exits 0" "$?" 0
skopeo inspect --config --raw "oci:$W/out/oci:1.0.0" >"$W/config.json" 2>"$W/t.err"
is "entrypoint is nimserve" "$(json_get "$W/config.json" "j['config']['Entrypoint']")" "['/opt/nim/bin/nimserve']"
is "port 8000/tcp is exposed" "$(json_get "$W/config.json" "list(j['config']['ExposedPorts'])")" "['8000/tcp']"
t "a health check is declared" json_get "$W/config.json" "j['config']['Healthcheck']['Test']"

t "umoci unpacks the image" umoci unpack --rootless --image "$W/out/oci:1.0.0" "$W/bundle"
ROOT="$W/bundle/rootfs"
t "the runtime layer holds nimserve" test -x "$ROOT/opt/nim/bin/nimserve"

# Start the entrypoint as a container runtime would: its own root, a /proc of
# its own (in a private mount namespace, gone when it exits), the image's
# environment, on loopback.
ENTRY=$(json_get "$W/config.json" "j['config']['Entrypoint'][0]")
mkdir -p "$ROOT/proc"
in_image() { # in_image CMD... : run CMD inside the unpacked image (exec keeps the PID)
	exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin $(json_get "$W/config.json" "' '.join(j['config']['Env'])") \
		NIM_HOST=127.0.0.1 NIM_PORT="${PORT:-0}" \
		unshare --mount sh -c 'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"' "$ROOT" "$@"
}
run_in_image() { (in_image "$@"); }
in_image "$ENTRY" --port-file /tmp/port --drain-timeout 10 >"$W/serve.log" 2>&1 &
PID=$!
i=0
while [ ! -s "$ROOT/tmp/port" ] && [ $i -lt 100 ] && kill -0 "$PID" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
PORT=$(cat "$ROOT/tmp/port" 2>/dev/null)
t "nimserve started inside the root filesystem" test -n "$PORT"
U="http://127.0.0.1:$PORT"
i=0
until curl -sf "$U/v1/health/ready" >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
t "it becomes ready" curl -sf "$U/v1/health/ready"
t "the image's health-check command says ready" run_in_image $(json_get "$W/config.json" "' '.join(j['config']['Healthcheck']['Test'][1:])")

curl -s "$U/v1/metadata" >"$W/meta.json"
PROFILE=$(json_get "$W/meta.json" "j['profile']['id']")
t "metadata reports a profile of this build" grep -q "$PROFILE" "$W/out/model_manifest.yaml"

for prompt in "" "Once upon a time" "Tom had a red ball"; do
	"$NF" run "$W/out" --profile "$PROFILE" --prompt "$prompt" --max-tokens 48 --quiet >"$W/want.txt" 2>/dev/null
	body=$(python3 -c 'import json,sys; print(json.dumps({"model":"stories260k","prompt":sys.argv[1],"max_tokens":48,"temperature":0}))' "$prompt")
	curl -s "$U/v1/completions" -H 'Content-Type: application/json' -d "$body" >"$W/got.json"
	t "completion of \"$prompt\" equals nimfactory run" python3 -c '
import json, sys
got = json.load(open(sys.argv[1]))["choices"][0]["text"]
want = open(sys.argv[2]).read()[:-1]   # run ends the text with a newline
assert got == want, (got, want)' "$W/got.json" "$W/want.txt"
	body=$(python3 -c 'import json,sys; print(json.dumps({"model":"stories260k","prompt":sys.argv[1],"max_tokens":48,"temperature":0,"stream":True}))' "$prompt")
	curl -sN "$U/v1/completions" -H 'Content-Type: application/json' -d "$body" >"$W/got.sse"
	t "streamed completion of \"$prompt\" equals nimfactory run and ends in [DONE]" python3 -c '
import json, sys
events = [l[6:] for l in open(sys.argv[1]).read().splitlines() if l.startswith("data: ")]
assert events[-1] == "[DONE]", events[-1]
got = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
want = open(sys.argv[2]).read()[:-1]
assert got == want, (got, want)' "$W/got.sse" "$W/want.txt"
done

kill -TERM "$PID"
wait "$PID"
is "SIGTERM: nimserve exits 0" "$?" 0
PID=
finish
