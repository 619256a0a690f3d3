#!/usr/bin/python3
"""The PyTorch peer of benchmarks/decode_bench.py: greedy generation with a KV cache.

A GPT-2 or a Llama (grouped-query attention, RoPE, SwiGLU) of the benchmark's sizes, random
weights, fp32, under torch.inference_mode: the prompts (all of one length) prefilled in one
batched forward pass that fills a preallocated cache, then one token per sequence per step,
each step's attention reading the cache up to its length. This is the decode loop of a
hand-tuned PyTorch inference script (as gpt-fast writes it, without torch.compile, which this
PyTorch lacks): no padding, no masks beyond the prefill's causal one, no reallocation.

Prints one JSON line: time to first token (the prefill and the first token drawn), decode
tokens/s (the steps after it), the cache bytes.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arch", choices=["gpt", "llama"], required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--embed", type=int, required=True)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--ffn", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--context", type=int, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--prompt", type=int, default=256)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=0)
    return p.parse_args()


class Model:
    def __init__(self, a):
        g = torch.Generator().manual_seed(0)
        r = lambda *s: torch.randn(*s, generator=g) * 0.02
        self.a = a
        self.kv = a.kv_heads or a.heads
        self.hd = a.embed // a.heads
        e, h, kv, hd, f = a.embed, a.heads, self.kv, self.hd, a.ffn
        self.wte = r(a.vocab, e)
        self.wpe = r(a.context, e) if a.arch == "gpt" else None
        self.head = self.wte if a.arch == "gpt" else r(a.vocab, e)
        self.layers = []
        for _ in range(a.layers):
            L = {"wqkv": r(e, (h + 2 * kv) * hd), "wo": r(h * hd, e)}
            if a.arch == "gpt":
                L.update(bqkv=torch.zeros((h + 2 * kv) * hd), bo=torch.zeros(e),
                         ln1=(torch.ones(e), torch.zeros(e)), ln2=(torch.ones(e), torch.zeros(e)),
                         fc=r(e, f), bfc=torch.zeros(f), proj=r(f, e), bproj=torch.zeros(e))
            else:
                L.update(n1=torch.ones(e), n2=torch.ones(e), gate=r(e, f), up=r(e, f),
                         down=r(f, e))
            self.layers.append(L)
        self.norm = (torch.ones(e), torch.zeros(e))
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(a.context).float(), inv)
        self.cos, self.sin = ang.cos(), ang.sin()

    def rope(self, x, pos):  # x [B, H, T, hd]; pairs i and i + hd/2, as Tessel's rope
        c, s = self.cos[pos], self.sin[pos]
        x1, x2 = x[..., : self.hd // 2], x[..., self.hd // 2:]
        return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)

    def rms(self, x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g

    def forward(self, tokens, start, kc, vc):
        a, B, T = self.a, tokens.shape[0], tokens.shape[1]
        h, kv, hd = a.heads, self.kv, self.hd
        pos = torch.arange(start, start + T)
        x = F.embedding(tokens, self.wte)
        if self.wpe is not None:
            x = x + self.wpe[pos]
        for i, L in enumerate(self.layers):
            y = (F.layer_norm(x, (a.embed,), *L["ln1"]) if a.arch == "gpt"
                 else self.rms(x, L["n1"]))
            qkv = y @ L["wqkv"]
            if a.arch == "gpt":
                qkv = qkv + L["bqkv"]
            q, k, v = qkv.split([h * hd, kv * hd, kv * hd], dim=-1)
            q = q.view(B, T, h, hd).transpose(1, 2)
            k = k.view(B, T, kv, hd).transpose(1, 2)
            v = v.view(B, T, kv, hd).transpose(1, 2)
            if a.arch == "llama":
                q, k = self.rope(q, pos), self.rope(k, pos)
            kc[i][:, :, start:start + T] = k
            vc[i][:, :, start:start + T] = v
            K, V = kc[i][:, :, : start + T], vc[i][:, :, : start + T]
            if kv != h:  # each kv head serves h / kv query heads
                K = K.repeat_interleave(h // kv, dim=1)
                V = V.repeat_interleave(h // kv, dim=1)
            s = (q @ K.transpose(-1, -2)) / math.sqrt(hd)
            if T > 1:
                mask = torch.ones(T, start + T, dtype=torch.bool).tril(start)
                s = s.masked_fill(~mask, float("-inf"))
            o = (s.softmax(-1) @ V).transpose(1, 2).reshape(B, T, h * hd) @ L["wo"]
            if a.arch == "gpt":
                o = o + L["bo"]
            x = x + o
            if a.arch == "gpt":
                y = F.layer_norm(x, (a.embed,), *L["ln2"])
                x = x + F.gelu(y @ L["fc"] + L["bfc"], approximate="tanh") @ L["proj"] + L["bproj"]
            else:
                y = self.rms(x, L["n2"])
                x = x + (F.silu(y @ L["gate"]) * (y @ L["up"])) @ L["down"]
        x = F.layer_norm(x, (a.embed,), *self.norm) if a.arch == "gpt" else self.rms(x, self.norm[0])
        return x[:, -1] @ self.head.t()


def main():
    a = parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    m = Model(a)
    g = torch.Generator().manual_seed(1)
    prompts = torch.randint(0, a.vocab, (a.batch, a.prompt), generator=g)
    kv, hd = m.kv, m.hd
    with torch.inference_mode():
        kc = [torch.zeros(a.batch, kv, a.prompt + a.tokens, hd) for _ in range(a.layers)]
        vc = [torch.zeros(a.batch, kv, a.prompt + a.tokens, hd) for _ in range(a.layers)]
        t0 = time.perf_counter()
        nxt = m.forward(prompts, 0, kc, vc).argmax(-1, keepdim=True)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        for n in range(1, a.tokens):
            nxt = m.forward(nxt, a.prompt + n - 1, kc, vc).argmax(-1, keepdim=True)
        decode = time.perf_counter() - t1
    cache = sum(t.numel() * 4 for t in kc + vc)
    print(json.dumps({"first_token_s": first, "decode_tokens_per_s": a.batch * (a.tokens - 1) / decode,
                      "cache_bytes": cache, "threads": torch.get_num_threads(),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    sys.exit(main())
