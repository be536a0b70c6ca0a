#!/bin/sh
# registry_hostile.sh - a registry is outside input: nf_fault_proxy --fake
# answers with a manifest whose digest does not match its bytes, a blob whose
# bytes do not match its digest, oversized JSON, broken JSON, a redirect to
# another host, a garbage WWW-Authenticate.  Each is refused with one line on
# stderr, a non-zero exit, and nothing written in the working folder; no
# credential follows the redirect.
set -u
NF="${NF_BUILD:?}/bin/nimfactory"
SRC="${NF_SRC:?}"
W=$(mktemp -d /tmp/nf-e2e-reghostile-XXXXXX)
. "$SRC/tests/tap.sh"
. "$SRC/tests/e2e/registry_lib.sh.inc"
trap 'reg_stop_all; rm -rf "$W"' EXIT INT TERM
export DOCKER_CONFIG="$W/no-docker" NIMFACTORY_REGISTRY_USER=hostile NIMFACTORY_REGISTRY_PASSWORD=pw-never-shown-42

hostile() { # hostile MODE EXPECTED-TEXT
	proxy_start H --fake "$1" --log "$W/$1.log"
	mkdir -p "$W/cwd-$1"
	(cd "$W/cwd-$1" && "$NF" inspect "127.0.0.1:$H_PORT/team/model:1.0.0" --insecure >"$W/$1.out" 2>"$W/$1.err")
	rc=$?
	ok_=0
	[ $rc -ne 0 ] && [ $rc -ne 1 ] || ok_=1
	is "$1: refused with a non-zero exit (not a crash)" "$ok_:$([ $rc -ge 128 ] && echo crash || echo exit)" "0:exit"
	is "$1: one line on stderr" "$(wc -l <"$W/$1.err" | tr -d ' ')" 1
	t "$1: the line says '$2'" grep -q -- "$2" "$W/$1.err"
	is "$1: nothing on stdout, nothing written locally" "$(cat "$W/$1.out")$(ls -A "$W/cwd-$1")" ""
	t "$1: no secret printed" sh -c "! grep -q pw-never-shown-42 '$W/$1.err'"
}
hostile bad-digest "is not the digest of its bytes"
hostile bad-blob "bytes hash to"
hostile big-json "larger than"
hostile bad-json "not a JSON object"
hostile redirect "another host"
hostile garbage-auth "malformed WWW-Authenticate"
is "redirect: nothing was requested from the other host" "$(grep -c elsewhere "$W/redirect.log")" 0

# push into a fake that refuses to authenticate sanely: nothing pushed, one line
proxy_start G --fake garbage-auth --log "$W/push.log"
mkdir -p "$W/oci" && printf '{"imageLayoutVersion":"1.0.0"}' >"$W/oci/oci-layout" && mkdir -p "$W/oci/blobs/sha256" &&
	printf '{"schemaVersion":2,"manifests":[]}' >"$W/oci/index.json"
"$NF" push "$W/oci" "127.0.0.1:$G_PORT/team/model:1" --insecure >/dev/null 2>"$W/push.err"
is "push to an empty layout exits 2 before any request" "$?:$(wc -l <"$W/push.log" | tr -d ' ')" "2:0"
finish
