#!/usr/bin/python3
"""The PyTorch peers of the GPU benchmarks (benchmarks/gpu_bench.sh), on GPU 0.

    torch_gpu.py step      [--batch 16] [--seq 1024] [--steps 20] [--warmup 5]
                           [--modes eager,compile] [--dtype bf16]
    torch_gpu.py attention [--seq 1024,2048,4096,8192,16384] [--head 64,128]
                           [--batch-heads 16] [--dtype bf16,f32]

`step` trains GPT-2 124M (12 layers, width 768, 12 heads, vocabulary 50,304: GPT-2's padded to
a multiple of 128, tied head) on random tokens as PyTorch runs it at its best on a GPU: nn.Linear
and F.layer_norm, F.scaled_dot_product_attention (causal; PyTorch picks its flash kernel), the
fused AdamW, TF32 allowed, bf16 through torch.autocast with fp32 master weights; `eager` as is,
`compile` through torch.compile. It prints one JSON line per mode: tokens/s over the steps after
the warm-up, the best and median step, and MFU.

`attention` times F.scaled_dot_product_attention forward and backward, causal, at each sequence
length and head size, and prints one JSON line per point with TFLOP/s counted as
tessel-cuda-rate counts them: forward 4·S·S·D per (batch, head), backward 10·S·S·D, causal half
of each (S·(S+1)/2 score pairs).

MFU is model FLOPs per second over the device's dense 16-bit peak (`peak_flops` below, the
table docs/planning.md and the runner use): model FLOPs per token are 6·N (N the parameters,
the tied embedding counted once) plus 6·L·S·E for attention's two products, forward and
backward, causal ones counted whole as PaLM's appendix B and llm.c count them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Dense 16-bit tensor-core peaks without sparsity, FLOP/s, by a substring of the device name.
PEAKS = [("H200", 989e12), ("H100", 989e12), ("A100", 312e12)]


def peak_flops(name: str) -> float | None:
    for key, value in PEAKS:
        if key in name:
            return value
    return None


class Block(nn.Module):
    def __init__(self, embed: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(embed)
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.ln2 = nn.LayerNorm(embed)
        self.fc = nn.Linear(embed, 4 * embed)
        self.out = nn.Linear(4 * embed, embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(e, dim=2)
        q, k, v = (t.view(b, s, self.heads, e // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, e))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, vocab=50304, seq=1024, embed=768, heads=12, layers=12):
        super().__init__()
        self.wte = nn.Embedding(vocab, embed)
        self.wpe = nn.Embedding(seq, embed)
        self.blocks = nn.ModuleList([Block(embed, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(embed)
        self.layers, self.embed = layers, embed
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def sync_time() -> float:
    torch.cuda.synchronize()
    return time.perf_counter()


def step_benchmark(args) -> None:
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    name = torch.cuda.get_device_name(0)
    peak = peak_flops(name)
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    for mode in args.modes.split(","):
        torch.manual_seed(1337)
        torch.cuda.reset_peak_memory_stats()
        model = Gpt2(seq=args.seq).to(device)
        params = sum(p.numel() for p in model.parameters())
        optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4, betas=(0.9, 0.95),
                                      weight_decay=0.1, fused=True)
        run = torch.compile(model) if mode == "compile" else model
        tokens = torch.randint(0, 50257, (args.batch, args.seq + 1), device=device)
        x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        times = []
        for i in range(args.warmup + args.steps):
            start = sync_time()
            with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
                loss = run(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            end = sync_time()
            if i >= args.warmup:
                times.append(end - start)
        tokens_per_step = args.batch * args.seq
        flops_per_token = 6 * params + 6 * model.layers * args.seq * model.embed
        total = sum(times)
        tps = tokens_per_step * len(times) / total
        print(json.dumps({
            "peer": f"pytorch {mode}", "device": name, "dtype": args.dtype,
            "torch": torch.__version__, "batch": args.batch, "seq": args.seq,
            "parameters": params, "tokens_per_s": round(tps, 1),
            "step_best_ms": round(1e3 * min(times), 3),
            "step_median_ms": round(1e3 * statistics.median(times), 3),
            "mfu": None if peak is None else round(tps * flops_per_token / peak, 4),
            "final_loss": round(loss.item(), 4),
            # The caching allocator's peak of allocated bytes over the run (weights, optimizer
            # state, activations, workspaces), beside Tessel's device_memory_gib.
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3)}), flush=True)
        del model, optimizer, run
        torch.cuda.empty_cache()


def best_ms(fn, repeats: int) -> float:
    fn()
    best = math.inf
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def attention_benchmark(args) -> None:
    name = torch.cuda.get_device_name(0)
    for dtype_name in args.dtype.split(","):
        dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
        for head in (int(h) for h in args.head.split(",")):
            for seq in (int(s) for s in args.seq.split(",")):
                # (batch, head) pairs as one batch of heads: [1, batch-heads, seq, head].
                shape = (1, args.batch_heads, seq, head)
                q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
                           for _ in range(3))
                dout = torch.randn(shape, device="cuda", dtype=dtype)

                def forward():
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                def forward_backward():
                    out = forward()
                    torch.autograd.grad(out, (q, k, v), dout)

                fwd = best_ms(forward, args.repeats)
                both = best_ms(forward_backward, args.repeats)
                pairs = args.batch_heads * seq * (seq + 1) / 2
                fwd_flops, bwd_flops = 4 * pairs * head, 10 * pairs * head
                print(json.dumps({
                    "peer": "pytorch sdpa", "device": name, "dtype": dtype_name,
                    "head": head, "seq": seq, "batch_heads": args.batch_heads,
                    "forward_ms": round(fwd, 4), "forward_backward_ms": round(both, 4),
                    "forward_tflops": round(fwd_flops / fwd / 1e9, 2),
                    "forward_backward_tflops": round((fwd_flops + bwd_flops) / both / 1e9, 2)}),
                    flush=True)
                del q, k, v, dout
                torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    step = sub.add_parser("step", help="GPT-2 124M training steps")
    step.add_argument("--batch", type=int, default=16)
    step.add_argument("--seq", type=int, default=1024)
    step.add_argument("--steps", type=int, default=20)
    step.add_argument("--warmup", type=int, default=5)
    step.add_argument("--modes", default="eager,compile")
    step.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    att = sub.add_parser("attention", help="scaled_dot_product_attention rates")
    att.add_argument("--seq", default="1024,2048,4096,8192,16384")
    att.add_argument("--head", default="64,128")
    att.add_argument("--batch-heads", type=int, default=16)
    att.add_argument("--dtype", default="bf16,f32")
    att.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (torch.cuda.is_available() is false)")
        return 0
    if args.what == "step":
        step_benchmark(args)
    else:
        attention_benchmark(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
