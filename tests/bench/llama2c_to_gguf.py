#!/usr/bin/env python3
"""llama2c_to_gguf.py - write a llama2.c checkpoint + tokenizer as GGUF for llama.cpp.

    python llama2c_to_gguf.py MODEL.bin TOKENIZER.bin OUT.gguf --type f32|q8_0 [--name NAME]

The same weights as our engine reads, for the llama.cpp peer in `make bench`:
  * architecture "llama"; llama.cpp's llama arch rotates the same interleaved
    pairs (0,1),(2,3),... as llama2.c (it is the Hugging Face export that
    permutes q/k for rotate-half), so q and k are written as they are;
  * tokenizer.ggml.model "llama" (SentencePiece) with the tokens, scores and
    token types of the llama2.c tokenizer: id 0 <unk>, 1 <s>, 2 </s>,
    "<0xXX>" byte tokens, spaces written as U+2581;
  * --type q8_0 stores every 2-D tensor whose rows are a multiple of 32
    as Q8_0 (gguf's quants module), the rest and all norms as F32.
Needs the PyPI packages gguf and numpy (the bench venv has them).
"""
import argparse
import os
import struct
import sys

import numpy as np
import gguf

SPM_SPACE = "\u2581"


def die(msg):
    sys.stderr.write("llama2c_to_gguf: %s\n" % msg)
    sys.exit(2)


def read_checkpoint(path):
    data = np.memmap(path, dtype=np.uint8, mode="r")
    if data.size < 28:
        die("%s: shorter than the 28-byte header" % path)
    dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack_from("<7i", data[:28].tobytes())
    shared = vocab > 0
    vocab = abs(vocab)
    for name, v in (("dim", dim), ("hidden_dim", hidden), ("n_layers", layers),
                    ("n_heads", heads), ("n_kv_heads", kv_heads), ("vocab", vocab),
                    ("max_seq_len", seq)):
        if v <= 0 or v > (1 << 20):
            die("%s: header %s=%d out of range" % (path, name, v))
    if dim % heads or heads % kv_heads:
        die("%s: dim %d, heads %d, kv_heads %d inconsistent" % (path, dim, heads, kv_heads))
    hs = dim // heads
    kv = kv_heads * hs
    cfg = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
               vocab=vocab, seq=seq, shared=shared, head_size=hs)
    shapes = [("token_embedding", (vocab, dim)), ("rms_att", (layers, dim)),
              ("wq", (layers, dim, dim)), ("wk", (layers, kv, dim)), ("wv", (layers, kv, dim)),
              ("wo", (layers, dim, dim)), ("rms_ffn", (layers, dim)),
              ("w1", (layers, hidden, dim)), ("w2", (layers, dim, hidden)),
              ("w3", (layers, hidden, dim)), ("rms_final", (dim,)),
              ("rope_legacy", (2 * seq * hs // 2,))]
    if not shared:
        shapes.append(("wcls", (vocab, dim)))
    need = 28 + 4 * sum(int(np.prod(s)) for _, s in shapes)
    if data.size != need:
        die("%s: %d bytes, the header says %d" % (path, data.size, need))
    floats = np.frombuffer(data, dtype="<f4", offset=28)
    w, off = {}, 0
    for name, shape in shapes:
        n = int(np.prod(shape))
        w[name] = floats[off:off + n].reshape(shape)
        off += n
    if shared:
        w["wcls"] = w["token_embedding"]
    return cfg, w


def read_tokenizer(path, vocab):
    raw = open(path, "rb").read()
    if len(raw) < 4:
        die("%s: too short" % path)
    (max_len,) = struct.unpack_from("<i", raw, 0)
    off = 4
    tokens, scores, types = [], [], []
    for i in range(vocab):
        if off + 8 > len(raw):
            die("%s: token %d at byte %d: truncated" % (path, i, off))
        score, n = struct.unpack_from("<fi", raw, off)
        off += 8
        if n < 0 or n > max(max_len, 64) or off + n > len(raw):
            die("%s: token %d at byte %d: bad length %d" % (path, i, off - 4, n))
        piece = raw[off:off + n]
        off += n
        if i == 0:
            text, ttype = "<unk>", gguf.TokenType.UNKNOWN
        elif i == 1:
            text, ttype = "<s>", gguf.TokenType.CONTROL
        elif i == 2:
            text, ttype = "</s>", gguf.TokenType.CONTROL
        else:
            text = piece.decode("utf-8", errors="replace")
            if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                ttype = gguf.TokenType.BYTE
            else:
                ttype = gguf.TokenType.NORMAL
                text = text.replace(" ", SPM_SPACE)
        tokens.append(text.encode("utf-8"))
        scores.append(float(score))
        types.append(int(ttype))
    return tokens, scores, types


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("tokenizer")
    ap.add_argument("out")
    ap.add_argument("--type", choices=("f32", "q8_0"), default="f32")
    ap.add_argument("--name", default=None)
    a = ap.parse_args()

    cfg, w = read_checkpoint(a.model)
    tokens, scores, types = read_tokenizer(a.tokenizer, cfg["vocab"])
    q8 = a.type == "q8_0"

    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA]
    wr = gguf.GGUFWriter(a.out + ".tmp", arch)
    wr.add_name(a.name or a.model.rsplit("/", 1)[-1])
    wr.add_context_length(cfg["seq"])
    wr.add_embedding_length(cfg["dim"])
    wr.add_block_count(cfg["layers"])
    wr.add_feed_forward_length(cfg["hidden"])
    wr.add_head_count(cfg["heads"])
    wr.add_head_count_kv(cfg["kv_heads"])
    wr.add_rope_dimension_count(cfg["head_size"])
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(cfg["vocab"])
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)

    counts = {"F32": 0, "Q8_0": 0}

    def put(name, t):
        t = np.ascontiguousarray(t, dtype=np.float32)
        if q8 and t.ndim == 2 and t.shape[1] % 32 == 0:
            qt = gguf.GGMLQuantizationType.Q8_0
            wr.add_tensor(name, gguf.quants.quantize(t, qt), raw_dtype=qt)
            counts["Q8_0"] += 1
        else:
            wr.add_tensor(name, t)
            counts["F32"] += 1

    put("token_embd.weight", w["token_embedding"])
    for l in range(cfg["layers"]):
        put("blk.%d.attn_norm.weight" % l, w["rms_att"][l])
        put("blk.%d.attn_q.weight" % l, w["wq"][l])
        put("blk.%d.attn_k.weight" % l, w["wk"][l])
        put("blk.%d.attn_v.weight" % l, w["wv"][l])
        put("blk.%d.attn_output.weight" % l, w["wo"][l])
        put("blk.%d.ffn_norm.weight" % l, w["rms_ffn"][l])
        put("blk.%d.ffn_gate.weight" % l, w["w1"][l])
        put("blk.%d.ffn_down.weight" % l, w["w2"][l])
        put("blk.%d.ffn_up.weight" % l, w["w3"][l])
    put("output_norm.weight", w["rms_final"])
    if not cfg["shared"]:
        put("output.weight", w["wcls"])

    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()

    os.replace(a.out + ".tmp", a.out)
    print("llama2c_to_gguf: wrote %s (%s; %d F32, %d Q8_0 tensors)"
          % (a.out, a.type, counts["F32"], counts["Q8_0"]))


if __name__ == "__main__":
    main()
