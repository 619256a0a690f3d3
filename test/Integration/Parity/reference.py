"""PyTorch reference implementations of the models Tessel compiles, for parity tests.

Everything here is written by hand, nanoGPT style, so that it can be read next to
std/attention.model, std/gpt.model and std/llama.model and checked line by line:

  GPT    (std/gpt.model, examples/tiny_gpt.model):   learned positions, pre-LayerNorm blocks,
         multi-head attention with biases, GELU (tanh) MLP, output head tied to the embedding.
  Llama  (std/llama.model, examples/llama_small.model): RMSNorm blocks, grouped-query attention
         with rotary positions, SwiGLU MLP, no biases, separate output matrix w_out.
  Mixtral (std/moe.model, examples/mixtral_small.model): the Llama layer with a routed mixture
         of SwiGLU experts, written with token indices (torch.topk, nonzero, index_add) rather
         than the dispatch tensors the .model file builds, plus the load-balancing and z-losses.

Parameters are named and shaped exactly as Tessel names and shapes them (the dotted path of
the spec, e.g. `layers.0.gpt_block.causal_self_attention.wq` with shape [embed, heads, head]),
so a `{name: tensor}` dict dumped by a Tessel executable loads with `load_state_dict`. The
math is written against those shapes with einsum, the way the .model files write it with `@`:
`x @ wq` over [batch, seq, embed] x [embed, heads, head] is `einsum("bse,ehd->bshd")`.
Nothing is reshaped in place.

Also here: a safetensors reader/writer (numpy only), Tessel's learning-rate schedule, and one
optimizer step with gradient accumulation and clipping, as the Tessel runtime defines them.

Only torch and numpy are needed (Debian's /usr/bin/python3 has both).
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    """The sizes a model needs; the names are the dim names of the .model file."""

    kind: str  # "gpt", "llama" or "masks"
    vocab: int
    seq: int
    embed: int
    heads: int
    head: int
    ffn: int
    layers: int
    kv_heads: Optional[int] = None  # Llama only; GPT uses `heads` for keys and values too
    norm_eps: float = 1e-5  # layernorm / rmsnorm epsilon (std blocks use 1e-5)
    rope_theta: float = 10000.0
    window: Optional[int] = None  # masks only: the sliding window of its attention
    experts: Optional[int] = None  # mixtral only: experts, the tokens of a sequence each
    capacity: Optional[int] = None  # takes, the experts each token uses and the weights of
    top_k: Optional[int] = None  # the auxiliary losses (the model's constants)
    aux_loss_weight: float = 0.0
    z_loss_weight: float = 0.0

    def __post_init__(self):
        if self.kind not in ("gpt", "llama", "masks", "mixtral"):
            raise ValueError(f"unknown model kind {self.kind!r} "
                             "(expected gpt, llama, masks or mixtral)")
        if self.kind == "mixtral" and None in (self.experts, self.capacity, self.top_k):
            raise ValueError("a mixtral model needs experts, capacity and top_k")
        if self.kind == "masks" and self.window is None:
            raise ValueError("a masks model needs window")
        if self.kind in ("llama", "mixtral"):
            if self.kv_heads is None:
                raise ValueError("a llama model needs kv_heads")
            if self.heads % self.kv_heads:
                raise ValueError(f"kv_heads={self.kv_heads} must divide heads={self.heads}")
            if self.head % 2:
                raise ValueError(f"rope needs an even head size, got head={self.head}")

    @staticmethod
    def from_dims(kind: str, dims: Dict[str, int], layers: int,
                  constants: Optional[Dict[str, float]] = None) -> "ModelConfig":
        """Builds a config from the module attribute `tessel.dims` and `tessel.layers`, and
        for a mixture of experts the model's constants top_k, aux_loss_weight and
        z_loss_weight."""
        constants = constants or {}
        top_k = constants.get("top_k")
        return ModelConfig(kind=kind, vocab=dims["vocab"], seq=dims["seq"], embed=dims["embed"],
                           heads=dims["heads"], head=dims["head"], ffn=dims["ffn"],
                           layers=layers, kv_heads=dims.get("kv_heads"),
                           window=dims.get("window"), experts=dims.get("experts"),
                           capacity=dims.get("capacity"),
                           top_k=None if top_k is None else int(top_k),
                           aux_loss_weight=float(constants.get("aux_loss_weight", 0.0)),
                           z_loss_weight=float(constants.get("z_loss_weight", 0.0)))


@dataclass
class TrainConfig:
    """The `train` section, as far as one optimizer step needs it."""

    batch: int  # sequences per optimizer step
    micro_batch: int  # sequences per forward/backward pass
    steps: int  # the spec's total steps: the schedule's horizon even if a run is cut short
    lr: float
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip: float = 0.0  # 0 = off
    schedule: str = "constant"  # "constant", "cosine" or "linear"
    warmup: int = 0
    min_lr: float = 0.0
    optimizer: str = "adamw"
    momentum: float = 0.0  # sgd only
    seed: int = 1337
    # The parameter classes weight decay falls on (the recipe's `decay`): by default the
    # matrices, as nanoGPT (`p.dim() >= 2`) and llm.c decay them.
    decay: Tuple[str, ...] = ("weights", "embeddings")

    @property
    def accumulation(self) -> int:
        return self.batch // self.micro_batch

    @staticmethod
    def from_attr(train: dict) -> "TrainConfig":
        """Builds a config from the module attribute `tessel.train` (parsed into a dict)."""
        opt = train.get("optimizer", {})
        sched = train.get("lr_schedule", {"kind": "constant"})
        # `batch` is over all dp ranks and micro_batch per rank; one process here runs all of
        # them, so the reference's micro-batch is the global one: batch / accumulation.
        accumulation = int(train.get("accumulation", train["batch"] // train["micro_batch"]))
        return TrainConfig(
            batch=int(train["batch"]), micro_batch=int(train["batch"]) // accumulation,
            steps=int(train["steps"]), lr=float(opt.get("lr", 1e-3)),
            betas=(float(opt.get("beta1", 0.9)), float(opt.get("beta2", 0.999))),
            eps=float(opt.get("eps", 1e-8)), weight_decay=float(opt.get("weight_decay", 0.0)),
            clip=float(train.get("clip", 0.0)), schedule=str(sched.get("kind", "constant")),
            warmup=int(sched.get("warmup", 0)), min_lr=float(sched.get("min_lr", 0.0)),
            optimizer=str(opt.get("kind", "adamw")), momentum=float(opt.get("momentum", 0.0)),
            seed=int(train.get("seed", 1337)),
            decay=tuple(w for w in str(opt.get("decay", "weights,embeddings")).split(",") if w))


# ---------------------------------------------------------------------------------------------
# The operations, one function each, as docs/language.md defines them
# ---------------------------------------------------------------------------------------------


def layernorm(x: torch.Tensor, g: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Normalises over the last dim (embed) with the biased variance, then scales and shifts:
    (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * g + b, which is what F.layer_norm
    computes (in one fused kernel)."""
    return F.layer_norm(x, (x.shape[-1],), g, b, eps)


def rmsnorm(x: torch.Tensor, g: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * g over the last dim (embed); no centring, no bias."""
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * g


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh approximation (GPT-2's)."""
    return F.gelu(x, approximate="tanh")


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """GELU, exact: x * Phi(x) = x (1 + erf(x / sqrt 2)) / 2."""
    return F.gelu(x)


def rope(x: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding on x: [batch, seq, heads, head], "rotate half" pairing.

    Feature i < head/2 pairs with feature i + head/2 and the pair is rotated by the angle
    pos * theta^(-2i/head), where pos is the position along seq:
        y[i]          = x[i] cos - x[i + head/2] sin
        y[i + head/2] = x[i + head/2] cos + x[i] sin
    """
    seq, head = x.shape[1], x.shape[3]
    half = head // 2
    # Angles in float64, then rounded once to the compute dtype.
    pos = torch.arange(seq, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / head)
    angle = pos[:, None] * inv_freq[None, :]  # [seq, half]
    cos = torch.cos(angle).to(x.dtype)[None, :, None, :]  # broadcast over batch and heads
    sin = torch.sin(angle).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """softmax(q.k * scale) v with scale = 1/sqrt(head), summed over key positions.

    q: [batch, seq, heads, head]; k, v: [batch, seq, kv_heads, head]. Query head h reads key
    and value head h // (heads // kv_heads) (grouped-query attention; kv_heads = heads is plain
    multi-head attention). Returns [batch, seq, heads, head].
    """
    heads, kv_heads, head = q.shape[2], k.shape[2], q.shape[3]
    group = heads // kv_heads
    if group > 1:
        # repeat_interleave maps query head h to kv head h // group.
        k = k.repeat_interleave(group, dim=2)
        v = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (1.0 / math.sqrt(head))
    if causal:
        seq_q, seq_k = scores.shape[-2], scores.shape[-1]
        mask = torch.ones(seq_q, seq_k, dtype=torch.bool).triu(1)  # True above the diagonal
        scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", probs, v)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean over every position of -log softmax(logits)[target]; logits [batch, seq, vocab]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1).long())


def _param(*shape: int) -> nn.Parameter:
    # Values come from load_state_dict or init_like_tessel; start from zeros, not garbage.
    return nn.Parameter(torch.zeros(*shape))


# ---------------------------------------------------------------------------------------------
# GPT (std/gpt.model)
# ---------------------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """std/attention.model: causal_self_attention. Separate q, k, v projections with biases."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.wq = _param(c.embed, c.heads, c.head)
        self.wk = _param(c.embed, c.heads, c.head)
        self.wv = _param(c.embed, c.heads, c.head)
        self.bq = _param(c.heads, c.head)
        self.bk = _param(c.heads, c.head)
        self.bv = _param(c.heads, c.head)
        self.wo = _param(c.heads, c.head, c.embed)
        self.bo = _param(c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [batch, seq, embed]
        q = torch.einsum("bse,ehd->bshd", x, self.wq) + self.bq  # [batch, seq, heads, head]
        k = torch.einsum("bse,ehd->bshd", x, self.wk) + self.bk
        v = torch.einsum("bse,ehd->bshd", x, self.wv) + self.bv
        a = attention(q, k, v, causal=True)
        return torch.einsum("bshd,hde->bse", a, self.wo) + self.bo  # sums over heads and head


class GptMlp(nn.Module):
    """std/gpt.model: gpt_mlp. embed -> ffn, GELU, ffn -> embed, with biases."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c_fc = _param(c.embed, c.ffn)
        self.b_fc = _param(c.ffn)
        self.c_proj = _param(c.ffn, c.embed)
        self.b_proj = _param(c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = gelu(x @ self.c_fc + self.b_fc)  # [batch, seq, ffn]
        return h @ self.c_proj + self.b_proj  # [batch, seq, embed]


class GptBlock(nn.Module):
    """std/gpt.model: gpt_block. Pre-LayerNorm attention and MLP, each added to the residual."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.eps = c.norm_eps
        self.ln1_g = _param(c.embed)
        self.ln1_b = _param(c.embed)
        self.ln2_g = _param(c.embed)
        self.ln2_b = _param(c.embed)
        self.causal_self_attention = CausalSelfAttention(c)
        self.gpt_mlp = GptMlp(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.causal_self_attention(layernorm(x, self.ln1_g, self.ln1_b, self.eps))
        return h + self.gpt_mlp(layernorm(h, self.ln2_g, self.ln2_b, self.eps))


class Gpt(nn.Module):
    """examples/tiny_gpt.model's forward: wte + wpe, `layers` gpt_blocks, final LayerNorm,
    logits = x @ wte (tied head), mean cross entropy."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.wte = _param(c.vocab, c.embed)
        self.wpe = _param(c.seq, c.embed)
        # `repeat layers { x = gpt_block(x) }` names the parameters layers.<i>.gpt_block.<...>:
        # each list entry is a dict holding the one block the repeat body calls.
        self.layers = nn.ModuleList(
            [nn.ModuleDict({"gpt_block": GptBlock(c)}) for _ in range(c.layers)])
        self.lnf_g = _param(c.embed)
        self.lnf_b = _param(c.embed)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = F.embedding(tokens.long(), self.wte) + self.wpe  # wpe broadcasts over batch
        for layer in self.layers:
            x = layer["gpt_block"](x)
        x = layernorm(x, self.lnf_g, self.lnf_b, self.config.norm_eps)
        logits = torch.einsum("bse,ve->bsv", x, self.wte)  # `x @ wte` sums over embed
        return cross_entropy(logits, targets)


# ---------------------------------------------------------------------------------------------
# Llama (std/llama.model)
# ---------------------------------------------------------------------------------------------


class GroupedQueryAttention(nn.Module):
    """std/attention.model: grouped_query_attention. RoPE on q and k, kv_heads key/value heads,
    no biases."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.theta = c.rope_theta
        self.wq = _param(c.embed, c.heads, c.head)
        self.wk = _param(c.embed, c.kv_heads, c.head)
        self.wv = _param(c.embed, c.kv_heads, c.head)
        self.wo = _param(c.heads, c.head, c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = rope(torch.einsum("bse,ehd->bshd", x, self.wq), self.theta)  # [b, s, heads, head]
        k = rope(torch.einsum("bse,ehd->bshd", x, self.wk), self.theta)  # [b, s, kv_heads, head]
        v = torch.einsum("bse,ehd->bshd", x, self.wv)  # [b, s, kv_heads, head]
        a = attention(q, k, v, causal=True)  # [b, s, heads, head]
        return torch.einsum("bshd,hde->bse", a, self.wo)


class SwigluMlp(nn.Module):
    """std/llama.model: swiglu_mlp. (silu(x @ w_gate) * (x @ w_up)) @ w_down."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.w_gate = _param(c.embed, c.ffn)
        self.w_up = _param(c.embed, c.ffn)
        self.w_down = _param(c.ffn, c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(x @ self.w_gate) * (x @ self.w_up)  # [batch, seq, ffn]
        return h @ self.w_down


class LlamaBlock(nn.Module):
    """std/llama.model: llama_block. RMSNorm pre-norm, grouped-query attention, SwiGLU."""

    mlp_name, mlp_class = "swiglu_mlp", SwigluMlp  # the feed-forward, as std names it

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.eps = c.norm_eps
        self.attention_norm = _param(c.embed)
        self.ffn_norm = _param(c.embed)
        self.grouped_query_attention = GroupedQueryAttention(c)
        setattr(self, self.mlp_name, self.mlp_class(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.grouped_query_attention(rmsnorm(x, self.attention_norm, self.eps))
        return h + getattr(self, self.mlp_name)(rmsnorm(h, self.ffn_norm, self.eps))


class Llama(nn.Module):
    """examples/llama_small.model's forward: token embedding (no position table), `layers`
    llama_blocks, final RMSNorm, logits = x @ w_out, mean cross entropy."""

    block_name, block_class = "llama_block", LlamaBlock  # the layer, as std names it

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.tok_embeddings = _param(c.vocab, c.embed)
        self.layers = nn.ModuleList(
            [nn.ModuleDict({self.block_name: self.block_class(c)}) for _ in range(c.layers)])
        self.norm = _param(c.embed)
        self.w_out = _param(c.embed, c.vocab)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = F.embedding(tokens.long(), self.tok_embeddings)  # [batch, seq, embed]
        for layer in self.layers:
            x = layer[self.block_name](x)
        x = rmsnorm(x, self.norm, self.config.norm_eps)
        logits = x @ self.w_out  # [batch, seq, vocab]
        return cross_entropy(logits, targets)


# ---------------------------------------------------------------------------------------------
# Mixtral (std/moe.model): a routed mixture of SwiGLU experts
# ---------------------------------------------------------------------------------------------


class MoeMlp(nn.Module):
    """std/moe.model: moe_mlp. Each token goes to the top_k experts of softmax(x @ router), with
    the chosen probabilities renormalised to sum to one. An expert takes the first `capacity`
    tokens of each sequence routed to it, in sequence order, and drops the rest. Written with
    token indices, independently of the dispatch and combine tensors of the .model file.
    The layer's auxiliary loss (load balancing and router z-loss) is left in `self.aux`."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.router = _param(c.embed, c.experts)
        self.w_gate = _param(c.experts, c.embed, c.ffn)
        self.w_up = _param(c.experts, c.embed, c.ffn)
        self.w_down = _param(c.experts, c.ffn, c.embed)
        self.aux = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.c
        b, s, e = x.shape
        logits = x @ self.router  # [b, s, experts]
        probs = logits.softmax(-1)
        top = probs.topk(c.top_k, dim=-1).indices
        chosen = torch.zeros_like(probs).scatter(-1, top, 1.0)
        gates = probs * chosen
        gates = gates / gates.sum(-1, keepdim=True)
        flat = x.reshape(b * s, e)
        y = torch.zeros_like(flat)
        for bi in range(b):
            for ex in range(c.experts):
                toks = chosen[bi, :, ex].nonzero().flatten()[:c.capacity]
                if toks.numel() == 0:
                    continue
                rows = bi * s + toks
                xin = flat[rows]
                h = F.silu(xin @ self.w_gate[ex]) * (xin @ self.w_up[ex])
                y = y.index_add(0, rows, gates[bi, toks, ex, None] * (h @ self.w_down[ex]))
        routed = chosen.mean((0, 1)) / c.top_k
        balance = c.experts * (routed * probs.mean((0, 1))).sum()
        z = torch.logsumexp(logits, -1).square().mean()
        self.aux = (c.aux_loss_weight * balance, c.z_loss_weight * z)
        return y.reshape(b, s, e)


class MixtralBlock(LlamaBlock):
    """std/moe.model: mixtral_block. The Llama layer with moe_mlp as its feed-forward."""

    mlp_name, mlp_class = "moe_mlp", MoeMlp


class Mixtral(Llama):
    """examples/mixtral_small.model's forward: the Llama forward with mixtral_blocks; the loss
    is the cross-entropy plus each layer's auxiliary terms, added in layer order."""

    block_name, block_class = "mixtral_block", MixtralBlock

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss = super().forward(tokens, targets)
        for layer in self.layers:
            for term in layer["mixtral_block"].moe_mlp.aux:
                loss = loss + term
        return loss


# ---------------------------------------------------------------------------------------------
# Masks (test/Integration/Parity/masks_parity.model): attention, GELU and norms written from primitives
# ---------------------------------------------------------------------------------------------


class MaskedAttention(nn.Module):
    """Attention by hand: scores scaled by head^-0.5, an ALiBi bias (head h's slope
    2^(-8 (h + 1) / heads) times key position minus query position), and a causal sliding
    window (a query sees keys k with q - window < k <= q)."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.heads, self.window = c.heads, c.window
        self.wq = _param(c.embed, c.heads, c.head)
        self.wk = _param(c.embed, c.heads, c.head)
        self.wv = _param(c.embed, c.heads, c.head)
        self.wo = _param(c.heads, c.head, c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [batch, seq, embed]
        q = torch.einsum("bse,ehd->bshd", x, self.wq)
        k = torch.einsum("bse,ehd->bshd", x, self.wk)
        v = torch.einsum("bse,ehd->bshd", x, self.wv)
        s = torch.einsum("bqhd,bkhd->bqhk", q, k) * q.shape[-1] ** -0.5
        pos = torch.arange(x.shape[1], dtype=x.dtype)
        slope = torch.exp((torch.arange(self.heads, dtype=x.dtype) + 1)
                          * (-8 * 0.6931471805599453 / self.heads))
        alibi = slope[None, :, None] * (pos[None, None, :] - pos[:, None, None])  # [q, h, k]
        seen = (pos[:, None] >= pos[None, :]) & (pos[:, None] - pos[None, :] < self.window)
        s = torch.where(seen[:, None, :], s + alibi, torch.tensor(-1e30, dtype=x.dtype))
        p = torch.softmax(s, dim=-1)
        a = torch.einsum("bqhk,bkhd->bqhd", p, v)
        return torch.einsum("bshd,hde->bse", a, self.wo)


class MaskedMlp(nn.Module):
    """A square mixing matrix embed -> embed, then embed -> ffn, exact GELU, ffn -> embed; no
    biases."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c_mix = _param(c.embed, c.embed)
        self.c_fc = _param(c.embed, c.ffn)
        self.c_proj = _param(c.ffn, c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_erf((x @ self.c_mix) @ self.c_fc) @ self.c_proj


class HandRmsNorm(nn.Module):
    """x * (mean(x^2) + eps)^-0.5 * g, written with pow and square."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.eps = c.norm_eps
        self.g = _param(c.embed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.pow(torch.square(x).mean(dim=-1, keepdim=True) + self.eps, -0.5) * self.g


class MaskedBlock(nn.Module):
    """Pre-norm masked attention and MLP; the block's second rms_norm call is `rms_norm_1`."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.rms_norm = HandRmsNorm(c)
        self.masked_attention = MaskedAttention(c)
        self.rms_norm_1 = HandRmsNorm(c)
        self.masked_mlp = MaskedMlp(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.masked_attention(self.rms_norm(x))
        return h + self.masked_mlp(self.rms_norm_1(h))


class Masks(nn.Module):
    """masks_parity.model's forward: token embedding (ALiBi gives positions), `layers`
    masked_blocks, a final rms_norm, logits = x @ wte (tied head), mean cross entropy."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.config = c
        self.wte = _param(c.vocab, c.embed)
        self.layers = nn.ModuleList(
            [nn.ModuleDict({"masked_block": MaskedBlock(c)}) for _ in range(c.layers)])
        self.rms_norm = HandRmsNorm(c)

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = F.embedding(tokens.long(), self.wte)
        for layer in self.layers:
            x = layer["masked_block"](x)
        logits = torch.einsum("bse,ve->bsv", self.rms_norm(x), self.wte)
        return cross_entropy(logits, targets)


def build_model(c: ModelConfig) -> nn.Module:
    return {"gpt": Gpt, "llama": Llama, "masks": Masks, "mixtral": Mixtral}[c.kind](c)


def load_params(model: nn.Module, params: Dict[str, np.ndarray], dtype=torch.float32) -> None:
    """Copies a {name: array} dict with Tessel's names and shapes into the model; every
    parameter must be present with its exact shape, and nothing else."""
    own = dict(model.named_parameters())
    missing = sorted(set(own) - set(params))
    extra = sorted(set(params) - set(own))
    if missing or extra:
        raise ValueError(f"parameter names differ: missing {missing}, unexpected {extra}")
    with torch.no_grad():
        for name, p in own.items():
            value = torch.as_tensor(np.asarray(params[name]))
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(f"{name}: shape {tuple(value.shape)}, expected {tuple(p.shape)}")
            p.copy_(value.to(p.dtype))
    model.to(dtype)


def init_like_tessel(model: nn.Module, seed: int = 1337) -> None:
    """Random initialisation following the std library's rules (for benchmarks; parity tests
    load Tessel's own initial values instead): norm gains one, biases zero, residual output
    projections (wo, c_proj, w_down) normal(0.02 / sqrt(2 * layers)), other matrices
    normal(0.02)."""
    gen = torch.Generator().manual_seed(seed)
    layers = model.config.layers
    gains = ("ln1_g", "ln2_g", "lnf_g", "attention_norm", "ffn_norm", "norm", "g")
    biases = ("ln1_b", "ln2_b", "lnf_b", "bq", "bk", "bv", "bo", "b_fc", "b_proj")
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf in gains:
                p.fill_(1.0)
            elif leaf in biases:
                p.zero_()
            else:
                std = 0.02 / math.sqrt(2 * layers) if leaf in ("wo", "c_proj", "w_down") else 0.02
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64) * std)


# ---------------------------------------------------------------------------------------------
# Training: schedule, optimizer, one step with accumulation and clipping
# ---------------------------------------------------------------------------------------------


def lr_at(step: int, t: TrainConfig) -> float:
    """The learning rate of step `step` (counted from 1). The horizon is the spec's
    train.steps even when a run is cut short with --steps."""
    if t.schedule == "constant":
        return t.lr
    if t.warmup > 0 and step <= t.warmup:
        return t.lr * step / t.warmup
    span = t.steps - t.warmup
    p = (step - t.warmup) / span if span > 0 else 1.0
    p = min(max(p, 0.0), 1.0)
    if t.schedule == "cosine":
        return t.min_lr + 0.5 * (t.lr - t.min_lr) * (1.0 + math.cos(math.pi * p))
    if t.schedule == "linear":
        return t.lr + (t.min_lr - t.lr) * p
    raise ValueError(f"unknown schedule {t.schedule!r}")


# What each parameter of the models above is, by its name, as a reader of the models sees it:
# the token and position tables are embeddings; the norms' scales (and the hand-written RMS
# norm's g) are gains; the rest of the one-dim-per-feature vectors are biases; everything
# else is a weight matrix.
EMBEDDINGS = {"wte", "wpe", "tok_embeddings"}
GAINS = {"ln1_g", "ln2_g", "lnf_g", "attention_norm", "ffn_norm", "norm", "g"}
BIASES = {"ln1_b", "ln2_b", "lnf_b", "bq", "bk", "bv", "bo", "b_fc", "b_proj"}


def parameter_class(name: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    if leaf in EMBEDDINGS:
        return "embeddings"
    if leaf in GAINS:
        return "gains"
    if leaf in BIASES:
        return "biases"
    return "weights"


def make_optimizer(model: nn.Module, t: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer over every parameter, in two groups as nanoGPT makes them: weight decay
    on the classes the recipe names, none on the others."""
    decayed, kept = [], []
    for name, p in model.named_parameters():
        (decayed if parameter_class(name) in t.decay else kept).append(p)
    groups = [{"params": decayed, "weight_decay": t.weight_decay},
              {"params": kept, "weight_decay": 0.0}]
    if t.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=t.lr, betas=t.betas, eps=t.eps)
    if t.optimizer == "adam":
        return torch.optim.Adam(groups, lr=t.lr, betas=t.betas, eps=t.eps)
    if t.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=t.lr, momentum=t.momentum)
    raise ValueError(f"unknown optimizer {t.optimizer!r}")


@dataclass
class StepResult:
    loss: float  # mean of the micro-batch losses, before the update
    lr: float
    grad_norm: float  # global L2 norm of the accumulated gradient, before clipping
    grads: Dict[str, torch.Tensor] = field(default_factory=dict)  # before clipping, if kept


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int, t: TrainConfig,
               micro_batches: Sequence[Tuple[torch.Tensor, torch.Tensor]],
               keep_grads: bool = False, autocast: bool = False) -> StepResult:
    """One optimizer step: forward/backward over each micro-batch with its loss scaled by
    1/accumulation (so the gradients sum to the gradient of the step's mean loss), global-norm
    clipping, then the optimizer update at the scheduled learning rate. With `autocast` the
    forward pass runs under torch.autocast("cpu", bfloat16): PyTorch's bf16 mixed precision
    (products in bf16, fp32 parameters, gradients and optimizer state)."""
    lr = lr_at(step, t)
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=False)
    n = len(micro_batches)
    losses = []
    for tokens, targets in micro_batches:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(tokens, targets).float()
        (loss / n).backward()
        losses.append(loss.item())
    grads = {}
    if keep_grads:
        grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    params = list(model.parameters())
    if t.clip > 0:
        # coefficient clip / (norm + 1e-6), clamped at 1
        norm = torch.nn.utils.clip_grad_norm_(params, t.clip)
    else:
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad)
                                                     for p in params]))
    opt.step()
    return StepResult(loss=float(sum(losses) / n), lr=lr, grad_norm=float(norm), grads=grads)


# ---------------------------------------------------------------------------------------------
# safetensors, read and written with numpy
# ---------------------------------------------------------------------------------------------

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Reads every tensor of a .safetensors file: an 8-byte little-endian header length, a
    JSON header {name: {dtype, shape, data_offsets: [begin, end]}} (and an optional
    __metadata__), then the data, offsets relative to its start."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors file ({len(blob)} bytes)")
    (header_len,) = struct.unpack("<Q", blob[:8])
    if 8 + header_len > len(blob):
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    data = memoryview(blob)[8 + header_len:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: {name}: unsupported dtype {dtype}")
        np_dtype = np.dtype(_DTYPES[dtype]).newbyteorder("<")
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * np_dtype.itemsize or end > len(data) or begin < 0:
            raise ValueError(f"{path}: {name}: data_offsets {begin}..{end} do not fit "
                             f"{dtype} {list(shape)} in {len(data)} data bytes")
        arr = np.frombuffer(data[begin:end], dtype=np_dtype, count=count).reshape(shape)
        out[name] = arr.astype(np_dtype.newbyteorder("="), copy=True)
    return out


def write_safetensors(path: str, tensors: Dict[str, np.ndarray],
                      metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes {name: array} as .safetensors (tensors laid out in name order, 8-byte aligned
    header)."""
    rev = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: dict = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks, offset = [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(np.asarray(tensors[name]))
        arr = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
        raw = arr.tobytes()
        header[name] = {"dtype": rev[np.dtype(arr.dtype.newbyteorder("="))],
                        "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in chunks:
            f.write(raw)


# ---------------------------------------------------------------------------------------------
# The graph IR's module attributes: the config without duplicating numbers by hand
# ---------------------------------------------------------------------------------------------


class _AttrParser:
    """A small parser for MLIR attribute dictionaries as `tessel compile --emit=graph` prints
    them: {key = value, ...} with integers and floats typed (`16 : i64`, `1.0e+00 : f64`),
    strings, true/false, nested dictionaries and arrays; a key without `=` is a unit
    attribute (true). The module's settings (`#tessel.train<key = value, ...>`, nested
    sections as `<...>`) read as dictionaries too; the fields they leave out are at their
    defaults (SETTINGS_DEFAULTS)."""

    _TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)'
                         r'|([A-Za-z_][\w.$-]*)|([{}\[\]=,:<>()]))')

    def __init__(self, text: str, pos: int = 0):
        self.text, self.pos = text, pos

    def _peek(self):
        m = self._TOKEN.match(self.text, self.pos)
        if not m:
            raise ValueError(f"cannot parse attributes at: {self.text[self.pos:self.pos + 40]!r}")
        return m

    def _next(self):
        m = self._peek()
        self.pos = m.end()
        return m

    def _expect(self, punct: str):
        m = self._next()
        if m.group(4) != punct:
            raise ValueError(f"expected {punct!r} at: {self.text[m.start():m.start() + 40]!r}")

    def _is(self, punct: str) -> bool:
        m = self._TOKEN.match(self.text, self.pos)
        return bool(m) and m.group(4) == punct

    def parse_dict(self, close: str = "}") -> dict:
        self._expect("{" if close == "}" else "<")
        out = {}
        if self._is(close):
            self._next()
            return out
        while True:
            m = self._next()
            key = json.loads(m.group(1)) if m.group(1) else m.group(3)
            if key is None:
                raise ValueError(f"expected a key at: {self.text[m.start():m.start() + 40]!r}")
            if self._is("="):
                self._next()
                out[key] = self.parse_value()
            else:
                out[key] = True
            m = self._next()
            if m.group(4) == close:
                return out
            if m.group(4) != ",":
                raise ValueError(f"expected ',' or {close!r} at: "
                                 f"{self.text[m.start():m.start() + 40]!r}")

    def parse_value(self):
        if self._is("{"):
            return self.parse_dict()
        settings = re.compile(r"\s*#tessel\.\w+(?=<)").match(self.text, self.pos)
        if settings:
            self.pos = settings.end()
        if self._is("<"):
            return self.parse_dict(close=">")
        if self._is("["):
            self._next()
            items = []
            if self._is("]"):
                self._next()
                return items
            while True:
                items.append(self.parse_value())
                m = self._next()
                if m.group(4) == "]":
                    return items
                if m.group(4) != ",":
                    raise ValueError("expected ',' or ']' in an array")
        m = self._next()
        if m.group(1):
            value = json.loads(m.group(1))
        elif m.group(2):
            s = m.group(2)
            value = float(s) if any(ch in s for ch in ".eE") else int(s)
        elif m.group(3) in ("true", "false"):
            value = m.group(3) == "true"
        elif m.group(3):
            value = m.group(3)
        else:
            raise ValueError(f"unexpected {m.group(0)!r} in attributes")
        if self._is(":"):  # a type: `16 : i64`, `1.0 : f64`
            self._next()
            ty = self._next().group(3)
            if isinstance(value, (int, float)) and ty and ty.startswith("f"):
                value = float(value)
        return value


# The defaults of the settings' fields that the checks read without a default of their own:
# tessel/Dialect/Settings/IR/SettingsAttrs.td states them, and the IR leaves out a field at
# its default.
SETTINGS_DEFAULTS = {"tessel.train": {"batch": 1, "micro_batch": 1, "accumulation": 1,
                                      "steps": 1000, "seed": 1337, "tokenizer": "byte"}}


@dataclass
class GraphInfo:
    """What check_parity and the benchmark need from `tessel compile --emit=graph`."""

    name: str
    dims: Dict[str, int]
    layers: int
    train: dict
    parallel: dict
    # every graph.param in order: (name, shape, dim names)
    params: List[Tuple[str, Tuple[int, ...], Tuple[str, ...]]]

    def kind(self) -> str:
        """gpt, llama, masks or mixtral, from the parameter names their blocks give."""
        names = {p[0] for p in self.params}
        if any(".mixtral_block." in n for n in names):
            return "mixtral"
        if any(".llama_block." in n for n in names):
            return "llama"
        if any(".gpt_block." in n for n in names):
            return "gpt"
        if any(".masked_block." in n for n in names):
            return "masks"
        return "unknown"


def parse_graph(text: str) -> GraphInfo:
    m = re.search(r"module\s+@([\w$.-]+)\s+attributes\s*(?=\{)", text)
    if not m:
        raise ValueError("no `module @name attributes {...}` in the graph IR")
    attrs = _AttrParser(text, m.end()).parse_dict()
    for key in ("tessel.dims", "tessel.layers", "tessel.train"):
        if key not in attrs:
            raise ValueError(f"the graph IR's module has no {key} attribute")
    for key, defaults in SETTINGS_DEFAULTS.items():
        attrs[key] = {**defaults, **attrs[key]}
    params = []
    param_re = re.compile(r'graph\.param\s+"([^"]+)".*:\s*tensor<((?:\d+x)*)f32,\s*'
                          r'#graph\.dims<([^>]*)>>\s*$')
    for line in text.splitlines():
        if "graph.param" not in line:
            continue
        pm = param_re.search(line)
        if not pm:
            raise ValueError(f"cannot read a graph.param line: {line.strip()}")
        shape = tuple(int(s) for s in pm.group(2).split("x") if s)
        dims = tuple(d.strip() for d in pm.group(3).split(",") if d.strip())
        params.append((pm.group(1), shape, dims))
    return GraphInfo(name=m.group(1), dims={k: int(v) for k, v in attrs["tessel.dims"].items()},
                     layers=int(attrs["tessel.layers"]), train=attrs["tessel.train"],
                     parallel=attrs.get("tessel.parallel", {}), params=params)


def graph_of(tessel: str, model_path: str) -> GraphInfo:
    """Runs `tessel compile MODEL --emit=graph` and parses its output."""
    import subprocess
    proc = subprocess.run([tessel, "compile", model_path, "--emit=graph"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"`{tessel} compile {model_path} --emit=graph` failed "
                           f"(exit {proc.returncode}):\n{proc.stderr}")
    return parse_graph(proc.stdout)
