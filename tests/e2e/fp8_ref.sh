#!/bin/bash
# fp8_ref.sh - our fp8 e4m3 format (engine/quant_fp8.c, through
# nf_fp8_tool) against a reference we did not write: ml_dtypes'
# float8_e4m3fn.  The 256 codes decode to the same values; 3 million
# float32s (every code's value, every midpoint between neighbours
# and the floats either side of each, the saturation boundary, random
# floats over the format's range and random bit patterns: NaN, infinities,
# float32 subnormals) encode to the same code bytes as ml_dtypes of the
# value clipped to +-448 (we saturate; ml_dtypes turns what is beyond
# 464 into NaN, so below 464 the unclipped cast must agree too); and every
# kernel family's round_f8 gives the same float32 bits as ml_dtypes' cast
# there and back.
set -u
: "${NF_BUILD:?}" "${NF_SRC:?}"
TOOL="$NF_BUILD/tools/nf_fp8_tool"
if [ ! -x "$TOOL" ]; then
	echo "1..0 # skip $TOOL not built"
	exit 0
fi
. "$NF_SRC/tests/pyref.sh"
pyref_python
if ! "$PY" -c 'import ml_dtypes' 2>/dev/null; then
	echo "1..0 # skip the venv lacks ml_dtypes (tests/requirements.txt)"
	exit 0
fi
W=$(mktemp -d /tmp/nf-e2e-fp8-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$NF_SRC/tests/tap.sh"

cat >"$W/ref.py" <<'EOF'
import sys
import numpy as np
import ml_dtypes

F8 = ml_dtypes.float8_e4m3fn

def sample():
    """float32s that exercise every rounding case, and a random mass."""
    codes = np.arange(256, dtype=np.uint8).view(F8).astype(np.float32)
    codes = codes[~np.isnan(codes)]
    pos = np.unique(np.abs(codes))                       # 0 .. 448, ascending
    mids = ((pos[:-1].astype(np.float64) + pos[1:]) / 2).astype(np.float32)  # exact
    edges = np.array([448, 464, 480, 512, 1e30, np.finfo(np.float32).max, np.inf, np.nan,
                      2.0**-9, 2.0**-10, 2.0**-6, 1e-45, 1e-39], dtype=np.float32)
    exact = np.concatenate([pos, mids, edges])
    with np.errstate(over="ignore"):  # the float after float32's max is inf: wanted
        exact = np.concatenate([exact, np.nextafter(exact, np.float32(0)),
                                np.nextafter(exact, np.float32(np.inf))])
    exact = np.concatenate([exact, -exact])
    rng = np.random.default_rng(20261124)
    n = 1_500_000
    # a random exponent in [-14, 10] and a random mantissa and sign
    in_range = (((rng.integers(-14, 11, n) + 127) << 23) | rng.integers(0, 1 << 23, n)
                | (rng.integers(0, 2, n) << 31)).astype(np.uint32).view(np.float32)
    anything = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([exact, in_range, anything]).astype(np.float32)

def report(name, got, want, x=None):
    bad = np.flatnonzero(got != want)
    for i in bad[:5]:
        print("%s: differ at %d%s: got %r, ml_dtypes %r" % (
            name, i, "" if x is None else " (x=%r)" % float(x[i]), got[i], want[i]), file=sys.stderr)
    print("%s %d compared, %d differ" % (name, got.size, bad.size))
    return bad.size == 0

cmd, path = sys.argv[1], sys.argv[2]
if cmd == "sample":
    sample().tofile(path)
elif cmd == "decode":
    got = np.fromfile(path, dtype=np.float32)
    want = np.arange(256, dtype=np.uint8).view(F8).astype(np.float32)
    nan = np.isnan(want)
    ok = got.size == 256 and np.array_equal(np.isnan(got), nan)
    ok = report("decode", got.view(np.uint32)[~nan], want.view(np.uint32)[~nan]) and ok
    sys.exit(0 if ok else 1)
elif cmd == "encode":
    x = np.fromfile(sys.argv[3], dtype=np.float32)
    got = np.fromfile(path, dtype=np.uint8)
    ok = got.size == x.size
    ok = report("encode-saturating", got, np.clip(x, -448, 448).astype(F8).view(np.uint8), x) and ok
    below = np.abs(x) < 464
    ok = report("encode-below-464", got[below], x[below].astype(F8).view(np.uint8), x[below]) and ok
    sys.exit(0 if ok else 1)
else:  # round
    x = np.fromfile(sys.argv[3], dtype=np.float32)
    got = np.fromfile(path, dtype=np.float32)
    want = np.clip(x, -448, 448).astype(F8).astype(np.float32)
    nan = np.isnan(want)
    ok = got.size == x.size and np.array_equal(np.isnan(got), nan)
    ok = report("round", got.view(np.uint32)[~nan], want.view(np.uint32)[~nan], x[~nan]) and ok
    sys.exit(0 if ok else 1)
EOF

"$PY" "$W/ref.py" sample "$W/x.f32"
t "decode: the 256 codes give ml_dtypes' values (NaN where it has NaN)" \
	sh -c '"$1" decode >"$2" && "$3" "$4" decode "$2"' _ "$TOOL" "$W/dec.f32" "$PY" "$W/ref.py"
t "encode: $(($(stat -c %s "$W/x.f32") / 4)) float32s give ml_dtypes' codes (saturating; unclipped below 464)" \
	sh -c '"$1" encode <"$2" >"$3" && "$4" "$5" encode "$3" "$2"' _ "$TOOL" "$W/x.f32" "$W/codes.u8" \
	"$PY" "$W/ref.py"
for family in scalar avx2 avx512-vnni avx512-bf16; do
	if ! "$TOOL" round "$family" </dev/null 2>/dev/null; then
		skip "round_f8 $family: not on this CPU"
		continue
	fi
	t "round_f8 $family: the same float32 bits as ml_dtypes there and back" \
		sh -c '"$1" round "$2" <"$3" >"$4" && "$5" "$6" round "$4" "$3"' _ "$TOOL" "$family" \
		"$W/x.f32" "$W/r.f32" "$PY" "$W/ref.py"
done
finish
