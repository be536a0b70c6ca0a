#!/bin/sh
# registry_push.sh - nimfactory push / promote / inspect REF against Debian's
# docker-registry on 127.0.0.1 (through nf_fault_proxy where requests are
# counted): skopeo reads back the same manifest and blobs; a second push
# uploads nothing; promotion mounts (no layer bytes) and is refused without a
# passing gate report (exit 3) unless forced, which is recorded; a push through
# dropped connections, 500s and 429s completes and resumes mid-blob; the
# referrers API is used when there is one; credentials: wrong ones exit 4,
# right ones work, and no secret is ever printed.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
ART="$NF_BUILD/tools/nf_artifact_tool"
MODELS="${NF_SHARED:?}/models/stories260K"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-registry-XXXXXX)
. "$SRC/tests/tap.sh"
. "$SRC/tests/e2e/registry_lib.sh.inc"
trap 'reg_stop_all; rm -rf "$W"' EXIT INT TERM

if ! command -v docker-registry >/dev/null 2>&1 || ! command -v skopeo >/dev/null 2>&1; then
	echo "1..0 # skip docker-registry or skopeo missing"
	exit 0
fi
export NIMFACTORY_CACHE="$W/cache" NIMFACTORY_OFFLINE=1 DOCKER_CONFIG="$W/no-docker"
unset NIMFACTORY_REGISTRY_USER NIMFACTORY_REGISTRY_PASSWORD
"$NF" cache add "$MODELS/stories260K.bin" "$MODELS/tok512.bin" >/dev/null 2>&1
"$NF" build "$SRC/recipes/llama.yaml" --out "$W/out" >"$W/build.log" 2>&1
is "build exits 0" "$?" 0
L="$W/out/oci"
TAG=$(json_get "$L/index.json" "[m['annotations']['org.opencontainers.image.ref.name'] for m in j['manifests'] if not m['annotations']['org.opencontainers.image.ref.name'].startswith('sha256-')][0]")
DIGEST=$(json_get "$L/index.json" "[m['digest'] for m in j['manifests'] if m['annotations']['org.opencontainers.image.ref.name']=='$TAG'][0]")
is "nimfactory build attached its gate report to the image" \
	"$("$ART" list "$L" "$TAG" | python3 -c 'import json,sys; print([a["artifactType"] for a in json.load(sys.stdin)])')" \
	"['application/vnd.nimfactory.gate-report.v1+json']"

reg_start R || { echo "Bail out! docker-registry did not start"; exit 1; }
proxy_start P --upstream "127.0.0.1:$R_PORT" --log "$W/p.log"
REF="127.0.0.1:$P_PORT/team/model:1.0.0"

# --- push, read back with skopeo
"$NF" push "$L:$TAG" "$REF" --insecure >"$W/push1.out" 2>"$W/push1.err"
is "push exits 0" "$?" 0
t "push names the pushed digest" grep -q "@$DIGEST" "$W/push1.out"
skopeo copy --src-tls-verify=false "docker://127.0.0.1:$R_PORT/team/model:1.0.0" "oci:$W/back:1.0.0" >/dev/null 2>"$W/skopeo.err"
is "skopeo copy reads the pushed image back" "$?" 0
is "skopeo's copy has the same manifest digest" \
	"$(json_get "$W/back/index.json" "j['manifests'][0]['digest']")" "$DIGEST"
same_blobs() {
	for b in $(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(" ".join([m["config"]["digest"]]+[l["digest"] for l in m["layers"]]))' "$L/blobs/sha256/${DIGEST#sha256:}"); do
		cmp -s "$L/blobs/sha256/${b#sha256:}" "$W/back/blobs/sha256/${b#sha256:}" || return 1
	done
}
t "every blob came back byte for byte" same_blobs

# --- a second push uploads nothing
: >"$W/p.log"
"$NF" push "$L:$TAG" "$REF" --insecure >"$W/push2.out" 2>&1
is "second push exits 0" "$?" 0
is "second push sends no POST, PUT or PATCH" "$(grep -cE '^(POST|PUT|PATCH) ' "$W/p.log")" 0
t "second push reports every blob present" grep -q " 0 uploaded" "$W/push2.out"

# --- inspect REF
"$NF" inspect "$REF" --insecure >"$W/inspect.out" 2>"$W/inspect.err"
is "inspect REF exits 0" "$?" 0
t "inspect REF shows the gate verdict from the report (tag scheme)" grep -q "gate *passed (report sha256:.*referrers tag scheme" "$W/inspect.out"
t "inspect REF lists layers with digests and sizes" grep -qE "sha256:[0-9a-f]{64} +[0-9]+ +application/vnd.oci.image.layer" "$W/inspect.out"
t "inspect REF lists the profiles" grep -q "^  profiles " "$W/inspect.out"

# --- promote: mounts only
: >"$W/p.log"
"$NF" promote "$REF" "127.0.0.1:$P_PORT/release/model:1.0.0" --insecure >"$W/promote.out" 2>"$W/promote.err"
is "promote exits 0" "$?" 0
is "promotion uploaded no blob bytes (proxy count)" "$(in_bytes "$W/p.log")" 0
t "promotion mounted blobs (POST ?mount answered 201)" grep -q "^POST /v2/release/model/blobs/uploads/ 201" "$W/p.log"
is "promoted tag has the same digest" \
	"$(curl -s -I -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://127.0.0.1:$R_PORT/v2/release/model/manifests/1.0.0" | tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest"{print $2}')" "$DIGEST"
"$NF" inspect "127.0.0.1:$R_PORT/release/model:1.0.0" --insecure >"$W/inspect2.out" 2>&1
t "the gate report travelled with the promoted image" grep -q "gate *passed" "$W/inspect2.out"

# --- promote refuses an image without a passing report
mkdir -p "$W/nogate" && cp -r "$L" "$W/nogate/oci"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["manifests"]=[m for m in j["manifests"] if "artifact" not in json.dumps(m)]; json.dump(j, open(sys.argv[1],"w"))' "$W/nogate/oci/index.json"
"$NF" push "$W/nogate/oci:$TAG" "127.0.0.1:$R_PORT/nogate/model:1.0.0" --insecure >/dev/null 2>&1
"$NF" promote "127.0.0.1:$R_PORT/nogate/model:1.0.0" "127.0.0.1:$R_PORT/release/nogate:1.0.0" --insecure >/dev/null 2>"$W/nogate.err"
is "promote without a gate report exits 3" "$?" 3
t "and says why" grep -q "no gate report refers to" "$W/nogate.err"
is "and wrote nothing under the destination" \
	"$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$R_PORT/v2/release/nogate/manifests/1.0.0")" 404

mkdir -p "$W/bad" && cp -r "$L" "$W/bad/oci"
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); j["verdict"]="failed"; json.dump(j, open(sys.argv[2],"w"))' \
	"$W/out/reports/gates.json" "$W/bad/gates.json"
"$ART" attach "$W/bad/oci" "$TAG" "$W/bad/gates.json" >/dev/null
"$NF" push "$W/bad/oci:$TAG" "127.0.0.1:$R_PORT/team/failed:1.0.0" --insecure >/dev/null 2>&1
"$NF" promote "127.0.0.1:$R_PORT/team/failed:1.0.0" "127.0.0.1:$R_PORT/release/failed:1.0.0" --insecure >/dev/null 2>"$W/failed.err"
is "promote of a failed image exits 3" "$?" 3
t "and quotes the verdict" grep -q "says 'failed'" "$W/failed.err"
"$NF" promote "127.0.0.1:$R_PORT/team/failed:1.0.0" "127.0.0.1:$R_PORT/release/failed:1.0.0" --insecure --force-unpassed >/dev/null 2>"$W/forced.err"
is "--force-unpassed promotes it" "$?" 0
t "with a log line" grep -q "FORCED" "$W/forced.err"
"$NF" inspect "127.0.0.1:$R_PORT/release/failed:1.0.0" --insecure --json >"$W/forced.json" 2>&1
is "the copied report records io.nimfactory.promote.forced=true" \
	"$(json_get "$W/forced.json" "j['gate']['annotations']['io.nimfactory.promote.forced']")" true

# --- faults: dropped connections mid-blob, 500s, 429s
proxy_start F --upstream "127.0.0.1:$R_PORT" --log "$W/f.log" --kinds blob-upload,manifest-put \
	--fail 2 --throttle 2 --retry-after 1 --drop-after 1500000 --drop-count 2
"$NF" push "$L:$TAG" "127.0.0.1:$F_PORT/faulty/model:1.0.0" --insecure --chunk-size 1M >"$W/fault.out" 2>"$W/fault.err"
is "push through faults exits 0" "$?" 0
is "the proxy dropped two uploads mid-blob" "$(grep -c '^PATCH .* -1 ' "$W/f.log")" 2
t "the proxy answered 500 and 429" sh -c "grep -q ' 500 ' '$W/f.log' && grep -q ' 429 ' '$W/f.log'"
t "the chunked upload resumed (not restarted)" grep -q " 2 resumed, 0 restarted" "$W/fault.out"
skopeo copy --src-tls-verify=false "docker://127.0.0.1:$R_PORT/faulty/model:1.0.0" "oci:$W/back2:1.0.0" >/dev/null 2>&1
is "and skopeo reads back the same digest (blobs verified)" \
	"$(json_get "$W/back2/index.json" "j['manifests'][0]['digest']")" "$DIGEST"

# --- the referrers API path (the proxy serves it from the tag scheme)
proxy_start A --upstream "127.0.0.1:$R_PORT" --log "$W/a.log" --referrers-api
"$NF" inspect "127.0.0.1:$A_PORT/team/model:1.0.0" --insecure >"$W/api.out" 2>&1
t "inspect uses the referrers API where there is one" grep -q "gate *passed (report .*referrers API" "$W/api.out"
is "and never fell back to the tag scheme" "$(grep -c 'manifests/sha256-' "$W/a.log")" 0

# --- credentials
PASS="s3cret-Pa55-$$"
python3 -c 'import crypt,sys; print("ci:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' "$PASS" >"$W/htpasswd" 2>/dev/null
reg_start S "$W/htpasswd" || { echo "Bail out! auth registry did not start"; exit 1; }
NIMFACTORY_REGISTRY_USER=ci NIMFACTORY_REGISTRY_PASSWORD=wrong-$PASS \
	"$NF" push "$L:$TAG" "127.0.0.1:$S_PORT/team/model:1.0.0" --insecure >"$W/wrong.out" 2>"$W/wrong.err"
is "wrong credentials exit 4" "$?" 4
t "with a clear message" grep -q "refused the credentials (environment)" "$W/wrong.err"
is "on one line" "$(wc -l <"$W/wrong.err" | tr -d ' ')" 1
NIMFACTORY_REGISTRY_USER=ci NIMFACTORY_REGISTRY_PASSWORD=wrong-$PASS \
	"$NF" push "$L:$TAG" "127.0.0.1:$S_PORT/team/model:1.0.0" --insecure --verbose >"$W/wrong-v.out" 2>"$W/wrong-v.err"
"$NF" push "$L:$TAG" "127.0.0.1:$S_PORT/team/model:1.0.0" --insecure >/dev/null 2>"$W/anon.err"
is "no credentials at all exit 4" "$?" 4
t "and say how to give them" grep -q "asks for credentials: set NIMFACTORY_REGISTRY_USER" "$W/anon.err"
mkdir -p "$W/docker"
B64=$(printf 'ci:%s' "$PASS" | base64 -w0)
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}' "$S_PORT" "$B64" >"$W/docker/config.json"
DOCKER_CONFIG="$W/docker" "$NF" push "$L:$TAG" "127.0.0.1:$S_PORT/team/model:1.0.0" --insecure --verbose >"$W/auth.out" 2>"$W/auth.err"
is "push with docker config credentials exits 0" "$?" 0
t "it used basic auth from the docker config" grep -q "auth: basic (credentials from docker config)" "$W/auth.err"
DOCKER_CONFIG="$W/docker" "$NF" inspect "127.0.0.1:$S_PORT/team/model:1.0.0" --insecure >"$W/auth-inspect.out" 2>&1
is "inspect with credentials exits 0" "$?" 0
leak=$(cat "$W"/*.out "$W"/*.err | grep -c -e "$PASS" -e "$B64")
is "no password or base64 credential in any output or debug log" "$leak" 0

# --- --insecure only for loopback
"$NF" push "$L:$TAG" "registry.example.com/team/model:1" --insecure >/dev/null 2>"$W/insecure.err"
is "--insecure for a non-loopback registry exits 2" "$?" 2
finish
