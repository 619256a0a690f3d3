"""The operations of the reference, one function each, as docs/language.md defines them
(layernorm, rmsnorm, gelu, gelu_erf, rope, attention, cross_entropy), and _param, the
zero-filled parameter every module of reference_models.py starts from.

reference.py imports every name here; its callers use them from there.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


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
