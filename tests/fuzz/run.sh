#!/bin/sh
# make fuzz: build every tests/fuzz/fuzz_*.c as a libFuzzer target (clang,
# ASan + UBSan) against the project's libraries and run each for a bounded
# time, seeded from tests/fuzz/corpus/<name>/.  FUZZ_SECONDS sets the time
# per target (default 20).  Findings are written under build/fuzz/findings/.
set -eu
cd "$(dirname "$0")/../.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-20}
BUILD=build/fuzz
FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer"

# The libraries, instrumented for coverage.
# The SIMD kernels at -O0 (KERNEL_CFLAGS): clang with the sanitizers takes
# many minutes on their unrolled loops otherwise, and no target fuzzes them.
make -s -j2 CC=clang BUILD=$BUILD EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $FLAGS" \
	EXTRA_LDFLAGS="$FLAGS" KERNEL_CFLAGS=-O0 \
	$BUILD/lib/libnf_util.a $BUILD/lib/libnf_engine.a $BUILD/lib/libnf_images.a \
	$BUILD/lib/libnf_factory.a $BUILD/lib/libnf_serve.a

LIBS="$BUILD/lib/libnf_factory.a $BUILD/lib/libnf_serve.a $BUILD/lib/libnf_images.a $BUILD/lib/libnf_engine.a $BUILD/lib/libnf_util.a"
PKGS="yaml-0.1 jansson libarchive libcurl libgit2 libcrypto libzstd zlib libmicrohttpd libdeflate libpcre2-8"
mkdir -p $BUILD/bin $BUILD/findings
status=0
for src in tests/fuzz/fuzz_*.c; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .c)
	short=${name#fuzz_}
	clang -std=c11 -D_POSIX_C_SOURCE=200809L -D_GNU_SOURCE -g -O1 -I. $(pkg-config --cflags $PKGS) \
		-fsanitize=fuzzer $FLAGS "$src" $LIBS $(pkg-config --libs $PKGS) -lunistring -lm -ldl -pthread \
		-o $BUILD/bin/$name
	corpus=$BUILD/corpus/$short
	mkdir -p "$corpus"
	seeds=""
	[ -d tests/fuzz/corpus/$short ] && seeds=tests/fuzz/corpus/$short
	echo "fuzz: $name for ${SECONDS_PER_TARGET}s"
	if ! $BUILD/bin/$name -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 -rss_limit_mb=2048 \
		-artifact_prefix=$BUILD/findings/$name- -print_final_stats=1 "$corpus" $seeds \
		>$BUILD/$name.log 2>&1; then
		echo "fuzz: $name FAILED; see $BUILD/$name.log and $BUILD/findings/" >&2
		tail -30 $BUILD/$name.log >&2
		status=1
	else
		grep -E '^stat::number_of_executed_units' $BUILD/$name.log || true
	fi
done
exit $status
