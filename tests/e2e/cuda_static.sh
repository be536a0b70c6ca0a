#!/bin/bash
# cuda_static.sh - the static checks of the CUDA kernels, which need nvcc
# but no GPU: every architecture of the Makefile's CUDA_ARCHS has its cubin
# (an ELF for that very architecture, and in the fat binary) and every SKU
# of engine/sku.c one it runs; the PTX of the lowest architecture holds every kernel; ptxas's
# report of every kernel on every architecture has no spill and no stack
# frame, fits the architecture's shared memory and registers, and holds
# every kernel that belongs there (nf_cuda_occupancy); and the table of
# registers, shared memory and occupancy in docs/cuda-kernels.md is what
# ptxas says now.  After changing a kernel: `make cuda` then
#   NF_BUILD=build NF_SRC=. NF_CUDA=build/cuda tests/e2e/cuda_static.sh --update
set -u
: "${NF_BUILD:?}" "${NF_SRC:?}"
CUDA=${NF_CUDA:-$NF_BUILD/cuda}
TOOL="$NF_BUILD/tools/nf_cuda_occupancy"
DOC="$NF_SRC/docs/cuda-kernels.md"
ARCHS=$(sed -n 's/^CUDA_ARCHS := //p' "$NF_SRC/Makefile")
PTX_ARCH=$(sed -n 's/^CUDA_PTX_ARCH := //p' "$NF_SRC/Makefile")
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1 && [ ! -d "$CUDA" ]; then
	echo "1..0 # skip no nvcc here: the CUDA kernels are not built"
	exit 0
fi
if [ ! -x "$TOOL" ]; then
	echo "1..0 # skip $TOOL not built"
	exit 0
fi
W=$(mktemp -d /tmp/nf-e2e-cuda-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$NF_SRC/tests/tap.sh"

# The architecture number an ELF cubin was built for: the second byte of
# its ELF header's e_flags.
cubin_sm() {
	flags=$(readelf -h "$1" | awk '/Flags:/ { print $2 }')
	[ -n "$flags" ] && echo $(((flags >> 8) & 255))
}

logs=
for a in $ARCHS; do
	cubin="$CUDA/$a/nf_kernels.cubin"
	want=$(echo "$a" | tr -dc 0-9)
	is "$a: the cubin is an ELF for sm_$want" "$( [ -f "$cubin" ] && cubin_sm "$cubin")" "$want"
	logs="$logs $CUDA/$a/ptxas.log"
done

# The fat binary holds them all ("ELF file 1: nf_kernels.1.sm_75.cubin").
fatbin="$CUDA/nf_kernels.fatbin"
t "the fat binary is built" test -s "$fatbin"
if command -v cuobjdump >/dev/null 2>&1; then
	is "cuobjdump --list-elf lists a cubin per architecture in the fat binary" \
		"$(cuobjdump --list-elf "$fatbin" 2>&1 | sed -n 's/.*\.\(sm_[0-9a-z]*\)\.cubin.*/\1/p' | sort | tr '\n' ' ')" \
		"$(printf '%s\n' $ARCHS | sort | tr '\n' ' ')"
else
	skip "no cuobjdump here to list the fat binary's cubins"
fi

# Every SKU's architecture is built (sm_90 runs sm_90a's cubin).
missing=
for sm in $(grep -o '"sm_[0-9]*"' "$NF_SRC/engine/sku.c" | tr -d '"' | sort -u); do
	case " $ARCHS " in *" $sm "* | *" ${sm}a "*) ;; *) missing="$missing $sm" ;; esac
done
is "every architecture of engine/sku.c's devices has a cubin" "$missing" ""

ptx="$CUDA/$PTX_ARCH/nf_kernels.ptx"
ptx_sm=$(echo "$PTX_ARCH" | tr -dc 0-9)
is "the $PTX_ARCH PTX targets sm_$ptx_sm" "$(sed -n 's/^\.target //p' "$ptx" 2>/dev/null)" "sm_$ptx_sm"
is "the PTX holds every kernel of sm_$ptx_sm (NF_CU_KERNELS), no other" \
	"$(sed -n 's/^\.visible \.entry \([a-z0-9_]*\)(.*/\1/p' "$ptx" 2>/dev/null | sort | tr '\n' ' ')" \
	"$("$TOOL" --names "$ptx_sm" | sort | tr '\n' ' ')"

# shellcheck disable=SC2086
t "no kernel spills or outgrows its architecture; each is where it belongs" \
	sh -c "'$TOOL' $logs > '$W/table.md'"

release=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
header="Made by ptxas of CUDA $release (\`nvcc --version\`) from build/cuda/<arch>/ptxas.log."
if [ "${1:-}" = "--update" ]; then
	awk -v h="$header" -v t="$W/table.md" '
		/<!-- BEGIN ptxas -->/ { print; print ""; print h; while ((getline l < t) > 0) print l; skip = 1; next }
		/<!-- END ptxas -->/ { print ""; skip = 0 }
		!skip' "$DOC" > "$W/doc.md" && cp "$W/doc.md" "$DOC"
fi
committed=$(sed -n '/<!-- BEGIN ptxas -->/,/<!-- END ptxas -->/p' "$DOC")
made=$(sed -n 's/^Made by ptxas of CUDA \([0-9.]*\) .*/\1/p' "$DOC")
if [ -n "$made" ] && [ "$made" != "$release" ]; then
	skip "docs/cuda-kernels.md was made by CUDA $made, this is $release: registers differ between releases (--update)"
else
	printf '%s\n' "$committed" > "$W/committed.md"
	printf '<!-- BEGIN ptxas -->\n\n%s\n%s\n\n<!-- END ptxas -->\n' "$header" "$(cat "$W/table.md")" > "$W/now.md"
	t "docs/cuda-kernels.md's table is what ptxas says now" \
		sh -c 'diff -u "$1" "$2" >&2' sh "$W/committed.md" "$W/now.md"
fi
finish
