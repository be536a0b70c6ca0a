#!/bin/bash
# gguf_ref.sh - the GGUF reader against gguf-py (GGUFReader, quants.dequantize):
# the SmolLM2 file's keys, values and tensor list agree, and its tensors of
# every type it holds (Q8_0, Q4_1, F32) dequantize bit-identically; a file the
# writer makes with random blocks of every supported type (and a key of every
# value type) reads the same on both sides and dequantizes bit-identically.
set -u
TOOL="${NF_BUILD:?}/tools/nf_gguf_tool"
SRC="${NF_SRC:?}"
MODEL="${NF_SHARED:?}/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
W=$(mktemp -d /tmp/nf-e2e-gguf-XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
. "$SRC/tests/tap.sh"
. "$SRC/tests/pyref.sh"
pyref_python

# The Python side prints what nf_gguf_tool prints, in the same format.
cat >"$W/ref.py" <<'EOF'
import subprocess, sys
import numpy as np
import gguf

VNAMES = ["u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"]
V = gguf.GGUFValueType

def esc(b):
    out = bytearray()
    for c in b:
        if c == 0x5C: out += b"\\\\"
        elif c == 10: out += b"\\n"
        elif c == 9: out += b"\\t"
        elif c < 0x20 or c == 0x7F: out += b"\\x%02x" % c
        else: out.append(c)
    return bytes(out)

def value(t, part):
    if t == V.STRING: return esc(bytes(part))
    v = part[0]
    if t in (V.FLOAT32, V.FLOAT64): return b"%.9g" % float(np.float32(v))
    if t == V.BOOL: return b"true" if v else b"false"
    return b"%d" % int(v)

def kv(path):
    out = sys.stdout.buffer
    for name, f in gguf.GGUFReader(path).fields.items():
        if name.startswith("GGUF."):  # the header, not keys
            continue
        t = f.types[0]
        if t != V.ARRAY:
            out.write(b"%s\t%s\t%s\n" % (name.encode(), VNAMES[t].encode(), value(t, f.parts[f.data[0]])))
            continue
        elem = f.types[1]
        out.write(b"%s\tarray[%s]\t%d\n" % (name.encode(), VNAMES[elem].encode(), len(f.data)))
        if elem not in (V.ARRAY, V.BOOL):
            for i in f.data:
                out.write(b"\t%s\n" % value(elem, f.parts[i]))

def tensors(path):
    for t in gguf.GGUFReader(path).tensors:
        print("%s\t%s\t%s\t%d\t%d" % (t.name, t.tensor_type.name, ",".join(str(int(d)) for d in t.shape),
                                      t.data_offset, t.n_bytes))

def dequant(tool, path, names):
    """Compare every named tensor bit for bit; print one line per tensor."""
    bad = 0
    for t in gguf.GGUFReader(path).tensors:
        if names and t.name not in names:
            continue
        want = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        got = np.frombuffer(subprocess.run([tool, "dequant", path, t.name], check=True,
                                           stdout=subprocess.PIPE).stdout, dtype=np.float32)
        same = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
        print("%s %s %s %d" % ("same" if same else "DIFFERENT", t.name, t.tensor_type.name, want.size))
        bad += not same
    sys.exit(1 if bad else 0)

cmd = sys.argv[1]
if cmd == "kv": kv(sys.argv[2])
elif cmd == "tensors": tensors(sys.argv[2])
else: dequant(sys.argv[2], sys.argv[3], set(sys.argv[4:]))
EOF

same_output() { # same_output NAME FILE: the C tool and gguf-py print the same
	"$TOOL" "$1" "$2" >"$W/c.out" && "$PY" "$W/ref.py" "$1" "$2" >"$W/py.out" &&
		diff "$W/c.out" "$W/py.out" >&2 && [ -s "$W/c.out" ]
}

if [ -f "$MODEL" ]; then
	t "SmolLM2: every key and value as GGUFReader reads them" same_output kv "$MODEL"
	t "SmolLM2: the tensor list (names, types, dims, offsets, sizes)" same_output tensors "$MODEL"
	# every type the file holds: Q8_0 (the embedding), Q4_1, F32 (norms)
	t "SmolLM2: tensors of every type dequantize bit-identically" \
		"$PY" "$W/ref.py" dequant "$TOOL" "$MODEL" token_embd.weight output_norm.weight \
		blk.0.attn_norm.weight blk.0.attn_q.weight blk.0.attn_k.weight blk.0.ffn_down.weight \
		blk.29.ffn_up.weight blk.29.attn_v.weight blk.29.ffn_norm.weight
	is "SmolLM2: 9 tensors compared, 3 types" "$(cut -d' ' -f3 "$W/t.out" | sort -u | tr '\n' ' ')" "F32 Q4_1 Q8_0 "
else
	skip "$MODEL is absent"
fi

for seed in 1 2; do
	"$TOOL" random "$W/random$seed.gguf" "$seed"
	t "random file $seed: every key and value as GGUFReader reads them" same_output kv "$W/random$seed.gguf"
	t "random file $seed: the tensor list" same_output tensors "$W/random$seed.gguf"
	t "random file $seed: random blocks of every type dequantize bit-identically" \
		"$PY" "$W/ref.py" dequant "$TOOL" "$W/random$seed.gguf"
	is "random file $seed: all 11 types compared" "$(grep -c '^same' "$W/t.out")" 11
done
finish
