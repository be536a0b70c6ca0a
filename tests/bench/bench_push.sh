# bench_push.sh - pushing a 2 GiB layer to a loopback registry (sourced by
# run.sh; issue 4): `nimfactory push` beside `skopeo copy` of the same layout
# in the same run, each into a fresh Debian docker-registry (127.0.0.1, store
# under build/bench/push, removed afterwards), so no blob is found present.
#
#   BENCH_PUSH_MB   layer size in MiB (default 2048)
#   BENCH_PUSH_CHUNK  our --chunk-size (default 64M)
# Prints seconds and MB/s of each and the ratio ours/skopeo (time).

push_time() { # push_time LOG CMD... : prints the seconds CMD took
	_log=$1
	shift
	t0=$(date +%s.%N)
	"$@" >"$_log" 2>&1 || { cat "$_log" >&2; return 1; }
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}

push_registry() { # push_registry DIR : starts a registry, prints its port; pid in DIR/pid
	_p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	mkdir -p "$1/store"
	printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/store\nhttp:\n  addr: 127.0.0.1:%s\n  secret: bench\n' \
		"$1" "$_p" >"$1/config.yml"
	docker-registry serve "$1/config.yml" >"$1/log" 2>&1 &
	echo $! >"$1/pid"
	_i=0
	until curl -s -o /dev/null "http://127.0.0.1:$_p/v2/"; do
		_i=$((_i + 1))
		[ $_i -lt 100 ] || bench_die "docker-registry did not start ($1/log)"
		sleep 0.1
	done
	echo "$_p"
}

bench_push() {
	command -v docker-registry >/dev/null || bench_die "push: docker-registry is not installed"
	command -v skopeo >/dev/null || bench_die "push: skopeo is not installed"
	bench_build_tools nf_oci_tool
	make -s -j"$THREADS" BUILD="$NFB" "$NFB/bin/nimfactory" >>"$BB/nf-build.log" 2>&1 ||
		bench_die "building nimfactory failed"
	mb=${BENCH_PUSH_MB:-2048}
	dir=$BB/push
	src=$dir/weights.bin
	mkdir -p "$dir"
	if [ ! -f "$src" ] || [ "$(stat -c %s "$src")" -ne $((mb * 1048576)) ]; then
		bench_log "push: writing a $mb MiB file"
		head -c $((mb * 1048576)) /dev/urandom >"$src.tmp" && mv "$src.tmp" "$src"
		rm -rf "$dir/oci"
	fi
	if [ ! -f "$dir/oci/index.json" ]; then
		bench_log "push: packaging it as one uncompressed layer"
		SOURCE_DATE_EPOCH=0 "$TOOLS/nf_oci_tool" image "$dir/oci" big --compression none \
			--layer "file=$src:opt/nim/engines/weights.bin" >/dev/null || bench_die "nf_oci_tool image failed"
	fi
	cat "$dir/oci/blobs/sha256/"* >/dev/null # page cache warm for both
	rm -rf "$dir/r1" "$dir/r2"
	p1=$(push_registry "$dir/r1")
	p2=$(push_registry "$dir/r2")
	bench_log "push: skopeo copy to 127.0.0.1:$p1, nimfactory push to 127.0.0.1:$p2"
	ts=$(push_time "$RESULTS/push-skopeo.log" skopeo copy --dest-tls-verify=false "oci:$dir/oci:big" \
		"docker://127.0.0.1:$p1/bench/big:1") || { kill "$(cat "$dir/r1/pid")" "$(cat "$dir/r2/pid")"; bench_die "skopeo copy failed"; }
	tn=$(push_time "$RESULTS/push-ours.log" "$NFB/bin/nimfactory" push "$dir/oci:big" "127.0.0.1:$p2/bench/big:1" \
		--insecure --chunk-size "${BENCH_PUSH_CHUNK:-64M}") || { kill "$(cat "$dir/r1/pid")" "$(cat "$dir/r2/pid")"; bench_die "nimfactory push failed"; }
	kill "$(cat "$dir/r1/pid")" "$(cat "$dir/r2/pid")"
	bytes=$(du -cb "$dir/oci/blobs/sha256/"* | tail -1 | cut -f1)
	rm -rf "$dir/r1" "$dir/r2"
	awk -v b="$bytes" -v n="$tn" -v s="$ts" -v mb="$mb" 'BEGIN {
		printf "push of a %d MiB layer to a loopback docker-registry (same run, fresh registries)\n", mb
		printf "  %-22s %8.2f s  %8.1f MB/s\n", "nimfactory push", n, b / n / 1e6
		printf "  %-22s %8.2f s  %8.1f MB/s\n", "skopeo copy", s, b / s / 1e6
		printf "  ratio ours/skopeo (time): %.2f\n", n / s
	}' | tee "$RESULTS/push.txt"
}
