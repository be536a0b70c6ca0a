# bench_package.sh - packaging one large engine file as an image layer
# (sourced by run.sh; issue 4).
#
# One file of BENCH_PKG_MB (default 2048) MiB of incompressible bytes, as an
# engine's weights are.  In the same run:
#   floor      sha256sum of the file: one read and one hash, the least any
#              layer writer must do (it also has to write the blob)
#   ours       nf_oci_tool layer (images/): tar stream, diff_id, compression,
#              blob digest, atomic write, in one pass; none, zstd and gzip
#   umoci      `umoci insert` of the same file into an image (its layers are
#              gzip), then `umoci repack` of an unpacked copy holding it
# Every layout is fresh, so no blob is found present and skipped.

package_time() { # package_time CMD... : prints the seconds CMD took (fails if CMD fails)
	t0=$(date +%s.%N)
	"$@" >/dev/null 2>>"$RESULTS/package.err" || return 1
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}

bench_package() {
	bench_build_tools nf_oci_tool
	mb=${BENCH_PKG_MB:-2048}
	dir=$BB/package
	src=$dir/weights.bin
	mkdir -p "$dir"
	if [ ! -f "$src" ] || [ "$(stat -c %s "$src")" -ne $((mb * 1048576)) ]; then
		bench_log "package: writing a $mb MiB file"
		head -c $((mb * 1048576)) /dev/urandom >"$src.tmp" && mv "$src.tmp" "$src"
	fi
	: >"$RESULTS/package.err"
	cat "$src" >/dev/null # warm the page cache for everyone alike
	tsv=$RESULTS/package.tsv
	printf 'tool\tseconds\n' >"$tsv"

	bench_log "package: sha256sum (floor)"
	printf 'sha256sum (floor)\t%s\n' "$(package_time sha256sum "$src")" >>"$tsv"
	for comp in none zstd gzip; do
		rm -rf "$dir/ours-$comp"
		bench_log "package: nimfactory layer, $comp"
		printf 'nimfactory layer %s\t%s\n' "$comp" \
			"$(package_time "$TOOLS/nf_oci_tool" layer "$dir/ours-$comp" "$comp" "file=$src:opt/nim/weights/w.safetensors")" >>"$tsv"
	done
	rm -rf "$dir/umoci" "$dir/bundle"
	umoci init --layout "$dir/umoci" && umoci new --image "$dir/umoci:t" || bench_die "umoci init failed"
	bench_log "package: umoci insert (gzip)"
	printf 'umoci insert (gzip)\t%s\n' \
		"$(package_time umoci insert --image "$dir/umoci:t" "$src" /opt/nim/weights/w.safetensors)" >>"$tsv"
	umoci unpack --rootless --image "$dir/umoci:t" "$dir/bundle" >/dev/null ||
		bench_die "umoci unpack failed"
	cp "$src" "$dir/bundle/rootfs/opt/nim/weights/w2.safetensors"
	bench_log "package: umoci repack (gzip)"
	printf 'umoci repack (gzip)\t%s\n' \
		"$(package_time umoci repack --image "$dir/umoci:t2" "$dir/bundle")" >>"$tsv"

	md=$RESULTS/package.md
	awk -F'\t' -v mb="$mb" 'NR == 1 { next }
		NR == 2 { floor = $2 }
		{ rows[NR] = $0; name[NR] = $1; s[NR] = $2 }
		END {
			printf "Packaging one %d MiB file (random bytes) as an image layer, %s.\n\n", mb, "same run"
			printf "| tool | seconds | MiB/s | time vs sha256sum |\n| --- | --- | --- | --- |\n"
			for (i = 2; i <= NR; i++)
				printf "| %s | %s | %.0f | %.2fx |\n", name[i], s[i], mb / s[i], s[i] / floor
		}' "$tsv" >"$md"
	cat "$md"
	python3 - "$md" docs/benchmarks.md <<'PY'
import sys
table = open(sys.argv[1]).read().strip()
doc_path = sys.argv[2]
doc = open(doc_path).read()
begin, end = "<!-- bench:package:begin -->", "<!-- bench:package:end -->"
block = "%s\n%s\n\nCommand: `make bench BENCH=package` (BENCH_PKG_MB sets the size).\n%s" % (begin, table, end)
if begin in doc:
    doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
else:
    doc = doc.rstrip() + "\n\n## Packaging a layer\n\n" + block + "\n"
open(doc_path, "w").write(doc)
PY
}
