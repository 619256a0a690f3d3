"""The reference models, nn.Modules named and shaped as Tessel names and shapes the
parameters: GPT (std/gpt.model), Llama (std/llama.model), Mixtral (std/moe.model) and Masks
(masks_parity.model); build_model, load_params (Tessel's values into a model) and
init_like_tessel (the std library's random initialisation, for benchmarks).

reference.py imports every name here; its callers use them from there.
"""

from __future__ import annotations

import math
from typing import Dict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from reference_ops import (_param, attention, cross_entropy, gelu, gelu_erf, layernorm, rmsnorm,
                           rope)
from reference_spec import ModelConfig


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
