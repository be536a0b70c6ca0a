"""torch_eager.py - PyTorch eager beside the CUDA backend (tests/gpu/run.sh):
a Llama forward pass in plain torch ops on the same llama2.c checkpoint, in
fp16 or bf16 on the GPU, with a KV cache; prints decode and prefill
tokens/s as TAP comments.  No transformers needed.

    python3 torch_eager.py CHECKPOINT.bin DTYPE BATCH DECODE_STEPS PREFILL_TOKENS
"""
import struct
import sys
import time

import numpy as np
import torch


def load_llama2c(path, dtype):
    with open(path, "rb") as f:
        dim, hidden, layers, heads, kv_heads, vocab, seq = struct.unpack("7i", f.read(28))
        shared = vocab > 0
        vocab = abs(vocab)
        data = np.frombuffer(f.read(), dtype=np.float32)
    hs = dim // heads
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        t = torch.from_numpy(data[at:at + n].copy()).reshape(shape)
        at += n
        return t.to("cuda", dtype)

    w = {"emb": take(vocab, dim), "rms_att": take(layers, dim), "wq": take(layers, dim, dim),
         "wk": take(layers, kv_heads * hs, dim), "wv": take(layers, kv_heads * hs, dim),
         "wo": take(layers, dim, dim), "rms_ffn": take(layers, dim), "w1": take(layers, hidden, dim),
         "w2": take(layers, dim, hidden), "w3": take(layers, hidden, dim), "rms_final": take(dim)}
    at += seq * hs  # the two legacy RoPE tables
    w["cls"] = w["emb"] if shared else take(vocab, dim)
    cfg = dict(dim=dim, layers=layers, heads=heads, kv_heads=kv_heads, vocab=vocab, seq=seq, hs=hs)
    return cfg, w


def rmsnorm(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * w


def rope(x, pos, hs):
    # interleaved pairs, theta 10000 (llama2.c)
    freq = 1.0 / (10000.0 ** (torch.arange(0, hs, 2, device=x.device).float() / hs))
    ang = pos[:, None].float() * freq[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x = x.view(*x.shape[:-1], hs // 2, 2)
    a, b = x[..., 0], x[..., 1]
    cos = cos[:, None, :]
    sin = sin[:, None, :]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


def forward(cfg, w, kc, vc, tokens, pos0):
    """tokens (B, T) at positions pos0..; kc, vc (L, B, kv_heads, seq, hs)."""
    B, T = tokens.shape
    hs, H, KV = cfg["hs"], cfg["heads"], cfg["kv_heads"]
    pos = torch.arange(pos0, pos0 + T, device="cuda")
    x = w["emb"][tokens]
    for l in range(cfg["layers"]):
        h = rmsnorm(x, w["rms_att"][l])
        q = (h @ w["wq"][l].T).view(B, T, H, hs)
        k = (h @ w["wk"][l].T).view(B, T, KV, hs)
        v = (h @ w["wv"][l].T).view(B, T, KV, hs)
        q = rope(q.reshape(B * T, H, hs), pos.repeat(B), hs).view(B, T, H, hs)
        k = rope(k.reshape(B * T, KV, hs), pos.repeat(B), hs).view(B, T, KV, hs)
        kc[l, :, :, pos0:pos0 + T] = k.transpose(1, 2)
        vc[l, :, :, pos0:pos0 + T] = v.transpose(1, 2)
        keys = kc[l, :, :, :pos0 + T].repeat_interleave(H // KV, 1)
        vals = vc[l, :, :, :pos0 + T].repeat_interleave(H // KV, 1)
        att = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), keys, vals, is_causal=(T > 1 and pos0 == 0))
        x = x + att.transpose(1, 2).reshape(B, T, -1) @ w["wo"][l].T
        h = rmsnorm(x, w["rms_ffn"][l])
        x = x + (torch.nn.functional.silu(h @ w["w1"][l].T) * (h @ w["w3"][l].T)) @ w["w2"][l].T
    return rmsnorm(x[:, -1], w["rms_final"]) @ w["cls"].T


def main():
    path, dtype_name, batch, steps, prefill = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
    cfg, w = load_llama2c(path, dtype)
    prefill = min(prefill, cfg["seq"] - steps)
    shape = (cfg["layers"], batch, cfg["kv_heads"], cfg["seq"], cfg["hs"])
    kc = torch.zeros(shape, device="cuda", dtype=dtype)
    vc = torch.zeros(shape, device="cuda", dtype=dtype)
    prompt = (torch.arange(prefill, device="cuda") % (cfg["vocab"] - 1) + 1).repeat(batch, 1)
    with torch.no_grad():
        forward(cfg, w, kc, vc, prompt[:, :8], 0)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits = forward(cfg, w, kc, vc, prompt, 0)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"# torch eager {dtype_name} prefill: {batch} x {prefill} tokens: {batch * prefill / dt:.0f} tokens/s")
        tok = logits.argmax(-1)[:, None]
        t0 = time.perf_counter()
        for s in range(steps):
            tok = forward(cfg, w, kc, vc, tok, prefill + s).argmax(-1)[:, None]
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"# torch eager {dtype_name} decode: batch {batch}: {batch * steps / dt:.0f} tokens/s")


if __name__ == "__main__":
    main()
