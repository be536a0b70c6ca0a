#!/bin/sh
# oci_umoci_skopeo.sh - layouts written by images/ (through nf_oci_tool) are
# accepted by umoci (unpack --rootless) and skopeo (inspect), unpack to the
# right bytes and modes, and are reproducible across folders and processes.
set -u
TOOL="${NF_BUILD:?}/tools/nf_oci_tool"
if [ ! -x "$TOOL" ]; then
	echo "Bail out! $TOOL is not built"
	exit 1
fi
n=0
fail=0
t() { # t NAME CMD...
	n=$((n + 1))
	name=$1
	shift
	if "$@" >/dev/null 2>"$W/err"; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name"
		sed 's/^/# /' "$W/err" | head -5
		fail=$((fail + 1))
	fi
}
skipt() { n=$((n + 1)); echo "ok $n # skip $1"; }

W=$(mktemp -d /tmp/nf-e2e-oci-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
export SOURCE_DATE_EPOCH=1700000000

mkdir -p "$W/src/bin" "$W/src/lib"
printf '#!/bin/sh\necho nimserve\n' >"$W/src/bin/nimserve"
chmod 700 "$W/src/bin/nimserve"
head -c 100000 /dev/urandom >"$W/src/lib/weights.bin"
chmod 600 "$W/src/lib/weights.bin"
printf 'name: stories260K\n' >"$W/manifest.yaml"

build() { # build LAYOUT COMPRESSION
	"$TOOL" image "$1" "$2" --compression "$2" --entrypoint /opt/nim/bin/nimserve \
		--cmd --port --cmd 8000 --env NIM_HOME=/opt/nim --port 8000/tcp \
		--label org.nimfactory.model=stories260K \
		--annotation org.opencontainers.image.title=stories260K \
		--layer "$W/src:opt/nim" \
		--layer "file=$W/manifest.yaml:opt/nim/model_manifest.yaml" \
		--layer "link=usr/bin/nimserve:/opt/nim/bin/nimserve,dir=var/lib/nim"
}

for c in gzip zstd none; do
	t "$c: image built" build "$W/oci" $c
	if command -v umoci >/dev/null 2>&1; then
		src="$W/oci"
		if [ $c = zstd ]; then
			# umoci 0.4.7 (Debian 12) does not read zstd layers: skopeo decompresses
			# ours (checking the blob digests) and writes gzip for umoci.
			t "$c: skopeo reads our zstd layers and recompresses them" \
				skopeo copy --dest-compress --dest-compress-format gzip "oci:$W/oci:$c" "oci:$W/oci-gz:$c"
			src="$W/oci-gz"
		fi
		t "$c: umoci unpack --rootless accepts it" umoci unpack --rootless --image "$src:$c" "$W/bundle-$c"
		R="$W/bundle-$c/rootfs"
		t "$c: nimserve has the right bytes" cmp "$W/src/bin/nimserve" "$R/opt/nim/bin/nimserve"
		t "$c: weights have the right bytes" cmp "$W/src/lib/weights.bin" "$R/opt/nim/lib/weights.bin"
		t "$c: in-memory manifest file" cmp "$W/manifest.yaml" "$R/opt/nim/model_manifest.yaml"
		t "$c: executable is 0755" test "$(stat -c %a "$R/opt/nim/bin/nimserve")" = 755
		t "$c: data file is 0644" test "$(stat -c %a "$R/opt/nim/lib/weights.bin")" = 644
		t "$c: directory is 0755" test "$(stat -c %a "$R/opt/nim/lib")" = 755
		t "$c: symlink kept" test "$(readlink "$R/usr/bin/nimserve")" = /opt/nim/bin/nimserve
		t "$c: empty dir" test -d "$R/var/lib/nim"
		t "$c: runtime spec has our entrypoint" grep -q '/opt/nim/bin/nimserve' "$W/bundle-$c/config.json"
	else
		skipt "umoci not installed"
	fi
	if command -v skopeo >/dev/null 2>&1; then
		t "$c: skopeo inspect accepts it" skopeo inspect "oci:$W/oci:$c"
		skopeo inspect "oci:$W/oci:$c" >"$W/inspect-$c.json" 2>/dev/null
		t "$c: skopeo sees 3 layers" sh -c "grep -c '\"sha256:' '$W/inspect-$c.json' | grep -qx 4"
		t "$c: skopeo sees the label" grep -q stories260K "$W/inspect-$c.json"
	else
		skipt "skopeo not installed"
	fi
done

# Reproducible across folders and processes: the same manifest digest.
d1=$(build "$W/oci" zstd | cut -d' ' -f1)
mkdir -p "$W/elsewhere"
cp -a "$W/src" "$W/elsewhere/src"
touch -d '2001-01-01' "$W/elsewhere/src/lib/weights.bin"
d2=$(cd "$W/elsewhere" && umask 077 && "$TOOL" image "$W/oci2" zstd --compression zstd \
	--entrypoint /opt/nim/bin/nimserve --cmd --port --cmd 8000 --env NIM_HOME=/opt/nim \
	--port 8000/tcp --label org.nimfactory.model=stories260K \
	--annotation org.opencontainers.image.title=stories260K --layer "src:opt/nim" \
	--layer "file=$W/manifest.yaml:opt/nim/model_manifest.yaml" \
	--layer "link=usr/bin/nimserve:/opt/nim/bin/nimserve,dir=var/lib/nim" | cut -d' ' -f1)
t "same manifest digest from another folder, umask and mtime" test -n "$d1" -a "$d1" = "$d2"

# An image index of one image per device; skopeo reads it; inspect lists it.
t "image index built" "$TOOL" index "$W/oci" all gzip zstd
t "skopeo inspect --raw reads the index" sh -c "skopeo inspect --raw 'oci:$W/oci:all' | grep -q 'image.index.v1'"
t "nf_oci_tool inspect lists 4 tags" sh -c "'$TOOL' inspect '$W/oci' | grep -q '4 image'"

# A derived image on a base; umoci unpacks base and new files.
t "derived image on a base" "$TOOL" image "$W/oci3" derived --base "$W/oci:gzip" --layer "dir=extra"
if command -v umoci >/dev/null 2>&1; then
	t "umoci unpacks the derived image" umoci unpack --rootless --image "$W/oci3:derived" "$W/bundle-d"
	t "derived has the base's files" cmp "$W/src/lib/weights.bin" "$W/bundle-d/rootfs/opt/nim/lib/weights.bin"
	t "derived has its own layer" test -d "$W/bundle-d/rootfs/extra"
fi

# Bad input: exit code 2 and a one-line error.
n=$((n + 1))
"$TOOL" layer "$W/oci" none "bytes=../etc/x:y" >/dev/null 2>"$W/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l <"$W/err")" -eq 1 ]; then echo "ok $n - bad path: exit 2, one line"; else echo "not ok $n - bad path: rc $rc"; fail=$((fail + 1)); fi

echo "1..$n"
exit $((fail > 0))
