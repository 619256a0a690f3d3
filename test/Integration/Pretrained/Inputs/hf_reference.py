#!/usr/bin/python3
"""The forward and backward pass of a Hugging Face checkpoint, as transformers computes it.

An independent PyTorch implementation (no transformers, no safetensors package) of the causal
language models GPT2LMHeadModel, LlamaForCausalLM (with Llama 3.1's "llama3" frequency
scaling), Qwen2ForCausalLM and Qwen3ForCausalLM, in the order of operations of transformers'
eager code path, reading the folder's config.json and safetensors (one file or sharded with
model.safetensors.index.json; F32, BF16 and F16 widened to f32). It is the yardstick for
`tessel import-hf` (check_pretrained.py): the loss of given token/target batches and the
gradient of every tensor of the folder, keyed by its name in the folder.

What each model computes (B batch, T positions, E hidden, H heads, KV key/value heads,
D head size):

  GPT-2   x = wte[tokens] + wpe[0..T-1]; per layer, pre-LayerNorm (eps layer_norm_epsilon,
          biased variance) attention and MLP added to the residual; Conv1D is x @ W + b with W
          [in, out]; c_attn's output splits into q, k, v of E each; scores q k^T / sqrt(D)
          (divided), causal mask, softmax; the MLP is gelu_new (the tanh approximation,
          0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))) between c_fc and c_proj, of width
          n_inner (4 E when null or absent); final LayerNorm ln_f; logits x @ wte^T (tied) or
          x @ lm_head^T.
  Llama   x = embed_tokens[tokens]; per layer, RMSNorm (x * rsqrt(mean(x^2) + eps), then times
          the gain) before attention and MLP; q, k, v = x W^T (+ b), viewed [B, T, heads, D]
          with D = head_dim from the config or E / H; RoPE "rotate half": q cos + rot(q) sin,
          rot(q) = cat(-q[D/2:], q[:D/2]), angle p * inv_freq with inv_freq = 1 / theta^(2i/D)
          computed in f32 (llama3 scaling divides the low frequencies by `factor` and smooths
          the middle band); key/value head j serves query heads j * H/KV .. (j+1) * H/KV - 1;
          scores q k^T * D^-0.5 (multiplied), causal mask, softmax in f32; o_proj; the MLP is
          down(silu(gate(x)) * up(x)); final RMSNorm; logits x @ lm_head^T or, tied,
          x @ embed_tokens^T.
  Qwen2   Llama with biases on q, k and v (never on o), whatever the config says.
  Qwen3   Llama with no biases (attention_bias), and RMSNorm over D of each head of q and of k
          (q_norm, k_norm, eps rms_norm_eps) after the projection and before RoPE.

The loss is the mean cross entropy of logits[b, t] against targets[b, t] over all positions
(targets are given already shifted; nothing is shifted here). Over several micro-batches the
loss is the mean of their losses and the gradient its gradient, as a training step
accumulates them. Where some target is -1 (ignored: a prompt or padding under a loss mask),
the loss is the sum over the step's other targets divided by their count, the whole step's
(transformers' num_items_in_batch), and an ignored target adds nothing.

Usable as a module (load_folder, loss_and_grads) and from the command line:

    hf_reference.py DIR --batches batches.safetensors [--step 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# safetensors, read with numpy
# ---------------------------------------------------------------------------------------------

_NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U8": "u1", "U16": "<u2", "U32": "<u4", "U64": "<u8", "BOOL": "?"}
_SIZE = {"BF16": 2, **{k: np.dtype(v).itemsize for k, v in _NUMPY.items()}}


def read_safetensors(path: str) -> Dict[str, Tuple[np.ndarray, str]]:
    """{name: (array, safetensors dtype)} of every tensor in the file. Floating-point tensors
    (F64, F32, F16, BF16) come back as f32 (BF16 by placing its 16 bits above 16 zero bits,
    which is exact; F64 rounded), integer and BOOL tensors as they are. The file is an 8-byte
    little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}} (and
    __metadata__), then the data, offsets relative to its start."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: {len(blob)} bytes, too short for a safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _SIZE:
            raise ValueError(f"{path}: {name}: unsupported dtype {dtype}")
        shape = tuple(int(s) for s in info["shape"])
        begin, end = (int(o) for o in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64))
        if begin < 0 or end > len(data) or end - begin != count * _SIZE[dtype]:
            raise ValueError(f"{path}: {name}: data_offsets [{begin}, {end}] do not hold "
                             f"{dtype} {list(shape)} ({len(data)} data bytes)")
        raw = data[begin:end]
        if dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2", count=count).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=_NUMPY[dtype], count=count)
            if dtype in ("F64", "F32", "F16"):
                arr = arr.astype(np.float32)
            else:
                arr = arr.astype(arr.dtype.newbyteorder("="))
        out[name] = (np.array(arr).reshape(shape), dtype)
    return out


def read_folder_tensors(folder: str) -> Dict[str, Tuple[np.ndarray, str]]:
    """Every tensor of a checkpoint folder: model.safetensors, or the shards that
    model.safetensors.index.json names (each name must be in the shard the index gives, and
    every shard's tensors in the index)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    single = os.path.join(folder, "model.safetensors")
    if os.path.isfile(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out: Dict[str, Tuple[np.ndarray, str]] = {}
        for shard in sorted(set(weight_map.values())):
            tensors = read_safetensors(os.path.join(folder, shard))
            for name in tensors:
                if weight_map.get(name) != shard:
                    raise ValueError(f"{shard} holds {name}, which the index places in "
                                     f"{weight_map.get(name)}")
            out.update(tensors)
        missing = sorted(set(weight_map) - set(out))
        if missing:
            raise ValueError(f"the index names tensors no shard holds: {missing}")
        return out
    if os.path.isfile(single):
        return read_safetensors(single)
    raise ValueError(f"{folder} has neither model.safetensors nor "
                     "model.safetensors.index.json")


# ---------------------------------------------------------------------------------------------
# config.json
# ---------------------------------------------------------------------------------------------


@dataclass
class HFConfig:
    """What the forward pass needs from config.json, with transformers' defaults filled in."""

    model_type: str  # gpt2, llama, qwen2, qwen3
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    tied: bool
    max_positions: int
    theta: float = 10000.0
    rope_scaling: Optional[dict] = None  # llama3 parameters, or None
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False

    @staticmethod
    def from_dict(c: dict) -> "HFConfig":
        mt = c.get("model_type")
        if mt == "gpt2":
            E, H = int(c["n_embd"]), int(c["n_head"])
            if E % H:
                raise ValueError(f"n_embd {E} is not a multiple of n_head {H}")
            act = c.get("activation_function", "gelu_new")
            if act != "gelu_new":
                raise ValueError(f"activation_function {act!r}: only gelu_new is modelled")
            for key, ok in (("scale_attn_weights", True),
                            ("scale_attn_by_inverse_layer_idx", False),
                            ("add_cross_attention", False)):
                if c.get(key, ok) != ok:
                    raise ValueError(f"{key} = {c[key]} is not modelled")
            inner = c.get("n_inner")
            return HFConfig("gpt2", vocab=int(c["vocab_size"]), hidden=E,
                            layers=int(c["n_layer"]), heads=H, kv_heads=H, head_dim=E // H,
                            intermediate=int(inner) if inner is not None else 4 * E,
                            eps=float(c.get("layer_norm_epsilon", 1e-5)),
                            tied=bool(c.get("tie_word_embeddings", True)),
                            max_positions=int(c.get("n_positions", 1024)))
        if mt not in ("llama", "qwen2", "qwen3"):
            raise ValueError(f"model_type {mt!r} is not modelled (gpt2, llama, qwen2, qwen3)")
        E, H = int(c["hidden_size"]), int(c["num_attention_heads"])
        KV = int(c.get("num_key_value_heads") or H)
        D = int(c.get("head_dim") or E // H)
        if H % KV:
            raise ValueError(f"num_key_value_heads {KV} does not divide num_attention_heads {H}")
        act = c.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"hidden_act {act!r}: only silu is modelled")
        if c.get("use_sliding_window", False):
            raise ValueError("use_sliding_window is not modelled")
        # transformers 4.x writes rope_theta and rope_scaling; 5.x one rope_parameters dict.
        rope = dict(c.get("rope_parameters") or c.get("rope_scaling") or {})
        theta = float(rope.get("rope_theta", c.get("rope_theta", 10000.0)))
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type not in ("default", "llama3"):
            raise ValueError(f"rope_type {rope_type!r} is not modelled (default, llama3)")
        if rope.get("partial_rotary_factor", c.get("partial_rotary_factor", 1.0)) != 1.0:
            raise ValueError("partial_rotary_factor is not modelled")
        scaling = None
        if rope_type == "llama3":
            scaling = {k: float(rope[k]) for k in ("factor", "low_freq_factor",
                                                   "high_freq_factor")}
            scaling["original_max_position_embeddings"] = float(
                rope.get("original_max_position_embeddings", c["max_position_embeddings"]))
        attention_bias = bool(c.get("attention_bias", False))
        return HFConfig(
            mt, vocab=int(c["vocab_size"]), hidden=E, layers=int(c["num_hidden_layers"]),
            heads=H, kv_heads=KV, head_dim=D, intermediate=int(c["intermediate_size"]),
            eps=float(c.get("rms_norm_eps", 1e-6)),
            tied=bool(c.get("tie_word_embeddings", False)),
            max_positions=int(c.get("max_position_embeddings", 2048)), theta=theta,
            rope_scaling=scaling,
            # Qwen2's q, k and v always have biases; Llama's attention_bias covers o too.
            qkv_bias=True if mt == "qwen2" else attention_bias,
            o_bias=attention_bias if mt == "llama" else False,
            mlp_bias=bool(c.get("mlp_bias", False)) if mt == "llama" else False,
            qk_norm=mt == "qwen3")


# ---------------------------------------------------------------------------------------------
# The checkpoint: config and tensors, with the names the forward pass looks up
# ---------------------------------------------------------------------------------------------


class Checkpoint:
    """A folder's config and tensors (f32), and the parameter each role reads."""

    def __init__(self, config: HFConfig, tensors: Dict[str, np.ndarray],
                 dtypes: Optional[Dict[str, str]] = None):
        self.config = config
        self.tensors = tensors
        self.dtypes = dtypes or {n: "F32" for n in tensors}
        c = config
        if c.model_type == "gpt2":
            # Hub checkpoints name the base model's tensors bare; save_pretrained of
            # GPT2LMHeadModel prefixes them with `transformer.`.
            self.prefix = "transformer." if "transformer.wte.weight" in tensors else ""
            embed = self.prefix + "wte.weight"
        else:
            self.prefix = "model." if "model.embed_tokens.weight" in tensors else ""
            embed = self.prefix + "embed_tokens.weight"
        self.embed = embed
        # The tied head reads the embedding; a stored lm_head.weight is then a copy, not a
        # parameter of its own (transformers ties it to the embedding after loading).
        self.head = embed if c.tied else "lm_head.weight"
        self.aliases = {"lm_head.weight": embed} if c.tied and "lm_head.weight" in tensors else {}
        # Buffers older conversions saved beside the parameters: GPT-2's causal mask and its
        # fill value, Llama's rotary frequencies. transformers recomputes them; so does this.
        suffixes = ((".attn.bias", ".attn.masked_bias") if c.model_type == "gpt2"
                    else (".rotary_emb.inv_freq",))
        self.buffers = sorted(n for n in tensors if n.endswith(suffixes))
        expected = set(self.parameter_shapes())
        have = set(tensors) - set(self.buffers) - set(self.aliases)
        problems = []
        if expected - have:
            problems.append(f"missing {sorted(expected - have)}")
        if have - expected:
            problems.append(f"not part of a {c.model_type} model: {sorted(have - expected)}")
        for name, shape in self.parameter_shapes().items():
            if name in tensors and tuple(tensors[name].shape) != shape:
                problems.append(f"{name} has shape {list(tensors[name].shape)}, the config "
                                f"implies {list(shape)}")
        for alias, target in self.aliases.items():
            if alias in tensors and tuple(tensors[alias].shape) != tuple(tensors[target].shape):
                problems.append(f"{alias} has shape {list(tensors[alias].shape)}")
        if problems:
            raise ValueError("the tensors do not fit the config: " + "; ".join(problems))

    def parameter_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Every parameter the forward pass reads, with the shape the config implies."""
        c, p = self.config, self.prefix
        E, V, I = c.hidden, c.vocab, c.intermediate
        out: Dict[str, Tuple[int, ...]] = {}
        if c.model_type == "gpt2":
            out[p + "wte.weight"] = (V, E)
            out[p + "wpe.weight"] = (c.max_positions, E)
            for i in range(c.layers):
                b = f"{p}h.{i}."
                out.update({b + "ln_1.weight": (E,), b + "ln_1.bias": (E,),
                            b + "attn.c_attn.weight": (E, 3 * E),
                            b + "attn.c_attn.bias": (3 * E,),
                            b + "attn.c_proj.weight": (E, E), b + "attn.c_proj.bias": (E,),
                            b + "ln_2.weight": (E,), b + "ln_2.bias": (E,),
                            b + "mlp.c_fc.weight": (E, I), b + "mlp.c_fc.bias": (I,),
                            b + "mlp.c_proj.weight": (I, E), b + "mlp.c_proj.bias": (E,)})
            out[p + "ln_f.weight"] = (E,)
            out[p + "ln_f.bias"] = (E,)
        else:
            H, KV, D = c.heads, c.kv_heads, c.head_dim
            out[p + "embed_tokens.weight"] = (V, E)
            for i in range(c.layers):
                b = f"{p}layers.{i}."
                for proj, rows in (("q_proj", H * D), ("k_proj", KV * D), ("v_proj", KV * D)):
                    out[b + f"self_attn.{proj}.weight"] = (rows, E)
                    if c.qkv_bias:
                        out[b + f"self_attn.{proj}.bias"] = (rows,)
                out[b + "self_attn.o_proj.weight"] = (E, H * D)
                if c.o_bias:
                    out[b + "self_attn.o_proj.bias"] = (E,)
                if c.qk_norm:
                    out[b + "self_attn.q_norm.weight"] = (D,)
                    out[b + "self_attn.k_norm.weight"] = (D,)
                for proj, shape in (("gate_proj", (I, E)), ("up_proj", (I, E)),
                                    ("down_proj", (E, I))):
                    out[b + f"mlp.{proj}.weight"] = shape
                    if c.mlp_bias:
                        out[b + f"mlp.{proj}.bias"] = shape[:1]
                out[b + "input_layernorm.weight"] = (E,)
                out[b + "post_attention_layernorm.weight"] = (E,)
            out[p + "norm.weight"] = (E,)
        if not c.tied:
            out["lm_head.weight"] = (V, E)
        return out


def load_folder(folder: str) -> Checkpoint:
    with open(os.path.join(folder, "config.json")) as f:
        config = HFConfig.from_dict(json.load(f))
    raw = read_folder_tensors(folder)
    return Checkpoint(config, {n: a for n, (a, _) in raw.items()},
                      {n: d for n, (_, d) in raw.items()})


# ---------------------------------------------------------------------------------------------
# The operations, each as transformers writes it
# ---------------------------------------------------------------------------------------------


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's activation (transformers' NewGELUActivation): the tanh approximation."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                       * (x + 0.044715 * torch.pow(x, 3.0))))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """LlamaRMSNorm / Qwen2RMSNorm / Qwen3RMSNorm: x * rsqrt(mean(x^2) + eps), then the gain."""
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def inv_freq(c: HFConfig) -> torch.Tensor:
    """RoPE's inverse frequencies, computed in f32 as transformers does:
    1 / theta^(arange(0, D, 2) / D), then llama3's rescaling: wavelengths 2 pi / f below
    original / high_freq_factor are kept, those above original / low_freq_factor divided by
    `factor`, and those between interpolated with s = (original / wavelength - low) / (high -
    low) as (1 - s) f / factor + s f."""
    D = c.head_dim
    exps = torch.arange(0, D, 2, dtype=torch.int64).to(torch.float32) / D
    f = 1.0 / (c.theta ** exps)
    s = c.rope_scaling
    if s is None:
        return f
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / f
    scaled = torch.where(wavelen > low_wavelen, f / factor, f)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(c: HFConfig, T: int, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [T, D] of the angles p * inv_freq, the half-size table repeated twice, in
    f32 (then cast, as the rotary embedding returns them in the activations' dtype)."""
    freqs = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq(c)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def causal_mask(T: int, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask of the eager attention: 0 on and below the diagonal, the dtype's
    most negative finite value above it."""
    m = torch.full((T, T), torch.finfo(dtype).min, dtype=dtype)
    return torch.triu(m, diagonal=1)


def widened(dtype: torch.dtype) -> torch.dtype:
    """f32 for 16-bit types, as transformers upcasts softmax and the loss; f64 stays."""
    return torch.promote_types(dtype, torch.float32)


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor,
                  reduction: str = "mean") -> torch.Tensor:
    """Mean (or sum) over the positions whose target is not -1; the logits upcast as
    transformers' loss does."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).to(widened(logits.dtype)),
                           targets.reshape(-1).long(), ignore_index=-1, reduction=reduction)


# ---------------------------------------------------------------------------------------------
# The models
# ---------------------------------------------------------------------------------------------


def gpt2_loss(c: HFConfig, w: Dict[str, torch.Tensor], prefix: str, head: str,
              tokens: torch.Tensor, targets: torch.Tensor,
              reduction: str = "mean") -> torch.Tensor:
    B, T = tokens.shape
    E, H, D = c.hidden, c.heads, c.head_dim
    p = prefix
    if T > c.max_positions:
        raise ValueError(f"{T} positions, n_positions is {c.max_positions}")

    def conv1d(x, name):  # transformers' Conv1D: x @ W + b with W [in, out]
        out = torch.addmm(w[name + ".bias"], x.reshape(-1, x.shape[-1]), w[name + ".weight"])
        return out.view(*x.shape[:-1], -1)

    def ln(x, name):
        return F.layer_norm(x, (E,), w[name + ".weight"], w[name + ".bias"], c.eps)

    x = F.embedding(tokens, w[p + "wte.weight"]) + F.embedding(
        torch.arange(T)[None, :], w[p + "wpe.weight"])
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(c.layers):
        b = f"{p}h.{i}."
        h = ln(x, b + "ln_1")
        q, k, v = conv1d(h, b + "attn.c_attn").split(E, dim=2)
        q, k, v = (t.view(B, T, H, D).permute(0, 2, 1, 3) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / torch.full([], v.size(-1) ** 0.5, dtype=scores.dtype)
        scores = torch.where(keep, scores, torch.full([], torch.finfo(scores.dtype).min,
                                                      dtype=scores.dtype))
        a = torch.matmul(F.softmax(scores, dim=-1), v)
        a = a.permute(0, 2, 1, 3).contiguous().view(B, T, E)
        x = x + conv1d(a, b + "attn.c_proj")
        h = ln(x, b + "ln_2")
        x = x + conv1d(gelu_new(conv1d(h, b + "mlp.c_fc")), b + "mlp.c_proj")
    x = ln(x, p + "ln_f")
    return cross_entropy(F.linear(x, w[head]), targets, reduction)


def llama_loss(c: HFConfig, w: Dict[str, torch.Tensor], prefix: str, head: str,
               tokens: torch.Tensor, targets: torch.Tensor,
               reduction: str = "mean") -> torch.Tensor:
    """Llama, Qwen2 and Qwen3 (the switches are in the config)."""
    B, T = tokens.shape
    H, KV, D = c.heads, c.kv_heads, c.head_dim
    p = prefix
    dtype = w[p + "embed_tokens.weight"].dtype
    cos, sin = rope_cos_sin(c, T, dtype)  # [T, D], broadcast over batch and heads
    mask = causal_mask(T, dtype)
    scaling = D ** -0.5

    def linear(x, name, bias):
        return F.linear(x, w[name + ".weight"], w[name + ".bias"] if bias else None)

    x = F.embedding(tokens, w[p + "embed_tokens.weight"])
    for i in range(c.layers):
        b = f"{p}layers.{i}."
        h = rms_norm(x, w[b + "input_layernorm.weight"], c.eps)
        q = linear(h, b + "self_attn.q_proj", c.qkv_bias).view(B, T, H, D)
        k = linear(h, b + "self_attn.k_proj", c.qkv_bias).view(B, T, KV, D)
        v = linear(h, b + "self_attn.v_proj", c.qkv_bias).view(B, T, KV, D)
        if c.qk_norm:  # per head, over D, before the rotation
            q = rms_norm(q, w[b + "self_attn.q_norm.weight"], c.eps)
            k = rms_norm(k, w[b + "self_attn.k_norm.weight"], c.eps)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # repeat_kv: key/value head j is repeated for query heads j * H/KV .. (j+1) * H/KV - 1.
        rep = H // KV
        k = k[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
        v = v[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
        scores = torch.matmul(q, k.transpose(2, 3)) * scaling + mask
        # Softmax in f32 at least (float64 stays float64 for the self-test's finite
        # differences).
        probs = F.softmax(scores, dim=-1, dtype=widened(q.dtype)).to(q.dtype)
        a = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, H * D)
        x = x + linear(a, b + "self_attn.o_proj", c.o_bias)
        h = rms_norm(x, w[b + "post_attention_layernorm.weight"], c.eps)
        gate = linear(h, b + "mlp.gate_proj", c.mlp_bias)
        up = linear(h, b + "mlp.up_proj", c.mlp_bias)
        x = x + linear(F.silu(gate) * up, b + "mlp.down_proj", c.mlp_bias)
    x = rms_norm(x, w[p + "norm.weight"], c.eps)
    return cross_entropy(F.linear(x, w[head]), targets, reduction)


def model_loss(ck: Checkpoint, w: Dict[str, torch.Tensor], tokens: torch.Tensor,
               targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    fn = gpt2_loss if ck.config.model_type == "gpt2" else llama_loss
    return fn(ck.config, w, ck.prefix, ck.head, tokens.long(), targets.long(), reduction)


def loss_and_grads(ck: Checkpoint, micro_batches: Sequence[Tuple[torch.Tensor, torch.Tensor]],
                   dtype: torch.dtype = torch.float32) -> Tuple[float, Dict[str, np.ndarray]]:
    """The mean of the micro-batches' losses and its gradient with respect to every tensor of
    the folder, keyed by its name there, as f64 arrays. A stored copy of a tied head gets the
    embedding's gradient (it is the same parameter); buffers get none."""
    if not micro_batches:
        raise ValueError("no micro-batches")
    w = {n: torch.tensor(ck.tensors[n], dtype=dtype, requires_grad=True)
         for n in ck.parameter_shapes()}
    n = len(micro_batches)
    total = 0.0
    counted = sum(int((t != -1).sum()) for _, t in micro_batches)
    masked = counted < sum(t.numel() for _, t in micro_batches)
    for tokens, targets in micro_batches:
        if masked:  # the sum over the step's counted targets, over their count
            loss = model_loss(ck, w, tokens, targets, "sum") / max(counted, 1)
            loss.backward()
        else:
            loss = model_loss(ck, w, tokens, targets)
            (loss / n).backward()
        total += float(loss.detach())
    grads = {name: t.grad.detach().double().numpy().copy() for name, t in w.items()}
    for alias, target in ck.aliases.items():
        grads[alias] = grads[target]
    return (total if masked else total / n), grads


def loss_only(ck: Checkpoint, micro_batches, dtype=torch.float64) -> float:
    """The same mean loss without gradients (finite differences in the self-test)."""
    w = {n: torch.tensor(ck.tensors[n], dtype=dtype) for n in ck.parameter_shapes()}
    with torch.no_grad():
        return sum(float(model_loss(ck, w, a, b)) for a, b in micro_batches) / len(micro_batches)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--batches", required=True,
                   help="safetensors with tokens.S.U / targets.S.U (a Tessel --dump-dir file)")
    p.add_argument("--step", type=int, default=1)
    p.add_argument("--float64", action="store_true")
    args = p.parse_args()
    ck = load_folder(args.folder)
    raw = {n: a for n, (a, _) in read_safetensors(args.batches).items()}
    micro = []
    u = 0
    while f"tokens.{args.step}.{u}" in raw:
        micro.append((torch.from_numpy(raw[f"tokens.{args.step}.{u}"].astype(np.int64)),
                      torch.from_numpy(raw[f"targets.{args.step}.{u}"].astype(np.int64))))
        u += 1
    loss, grads = loss_and_grads(ck, micro, torch.float64 if args.float64 else torch.float32)
    print(f"loss {loss:.8f} over {len(micro)} micro-batch(es)")
    for name, g in grads.items():
        print(f"  {name:<50} {str(list(g.shape)):<14} |g| {np.linalg.norm(g):.6e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
