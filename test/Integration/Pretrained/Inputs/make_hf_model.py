#!/usr/bin/python3
"""Writes a Hugging Face model folder with random weights, for testing `tessel import-hf`.

    make_hf_model.py --arch {gpt2,llama,llama31,qwen2,qwen3} --out DIR [--dtype f32|bf16|f16]
                     [--shards N] [--seed S] [--tied|--untied] [--tokens N --token-file FILE]

The folder holds what `save_pretrained` (or the hub) holds for that architecture: config.json
with the keys and value types transformers writes for the model_type, and the weights as
model.safetensors, or with --shards N as model-0000k-of-0000N.safetensors plus
model.safetensors.index.json. Tensor names, shapes and layouts are those of transformers'
modeling code: GPT-2's Conv1D matrices are [in, out] with q, k, v fused in c_attn; Llama and
Qwen's nn.Linear matrices are [out, in].

The sizes are small and deliberately odd (a vocabulary of a few hundred, 3 to 5 query heads
over 1 or 2 key/value heads, an intermediate size that is no multiple of the hidden size,
Qwen3's head_dim unlike hidden / heads), so that an importer that assumes a standard shape
fails. Every tensor is distinguishable by its values: matrices are normal(0, 1/sqrt(fan_in)),
norm gains 1 + normal(0, 0.1), biases normal(0, 0.1), embeddings normal(0, 0.02) (small, so
that the RMSNorm epsilon of the first layer matters and a wrong epsilon shows). Values are
drawn in f32 and rounded to the file's dtype (bf16 to nearest even), so a reader that widens
them back gets exactly what the reference computes with.

GPT-2 comes in two layouts (--gpt2-layout): `hub` is how the original checkpoints on the hub
store it (no `transformer.` prefix, no lm_head.weight, config without n_inner, so the MLP is
4 * n_embd wide); `save_pretrained` is what GPT2LMHeadModel.save_pretrained writes
(`transformer.`-prefixed names, lm_head.weight left out when tied, n_inner written out).
--store-tied-head writes lm_head.weight even when the head is tied (a copy of the embedding,
as some checkpoints carry). --buffers adds the non-parameter buffers older conversions saved:
GPT-2's h.{i}.attn.bias (the causal mask) and h.{i}.attn.masked_bias, Llama and Qwen's
model.layers.{i}.self_attn.rotary_emb.inv_freq.

--tokens N --token-file FILE also writes N random ids below the vocabulary size as an llm.c
token file: a 1024-byte header of 256 little-endian int32 (magic 20240520, version 1, count)
then uint16 ids, or magic 20240801, version 7 and uint32 ids when the vocabulary exceeds 65535.

Only numpy is needed. The functions are importable (the self-test builds models in memory).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

# ---------------------------------------------------------------------------------------------
# The architectures: sizes and the values their config.json carries
# ---------------------------------------------------------------------------------------------


@dataclass
class Spec:
    """One model's sizes and settings, in transformers' terms."""

    arch: str  # gpt2, llama, llama31, qwen2, qwen3
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    eps: float
    max_positions: int
    tied: bool
    theta: float = 10000.0
    # llama3 frequency scaling (rope_type "llama3"): factor, low/high_freq_factor and
    # original_max_position_embeddings, or None for plain RoPE.
    rope_scaling: Optional[Dict[str, float]] = None
    bos: int = 1
    eos: int = 2
    # GPT-2 only: `hub` or `save_pretrained` (see the module docstring).
    gpt2_layout: str = "save_pretrained"

    @property
    def model_type(self) -> str:
        return "llama" if self.arch == "llama31" else self.arch


def default_spec(arch: str) -> Spec:
    """The test's sizes for each architecture. Epsilons and thetas are the real models' values
    where those differ from Tessel's std defaults (1e-5, 10000), so that a hard-coded default
    shows."""
    if arch == "gpt2":
        # 3 heads of 16; n_inner 88 is written out in the save_pretrained layout (the hub
        # layout has no n_inner and uses 4 * n_embd).
        return Spec(arch, vocab=301, hidden=48, layers=3, heads=3, kv_heads=3, head_dim=16,
                    intermediate=88, eps=1e-5, max_positions=64, tied=True, bos=300, eos=300)
    if arch == "llama":
        # Llama 2 style: theta 10000, but eps 1e-6 (Llama 1's) so that a hard-coded 1e-5 shows.
        return Spec(arch, vocab=301, hidden=48, layers=2, heads=3, kv_heads=1, head_dim=16,
                    intermediate=88, eps=1e-6, max_positions=128, tied=False, bos=1, eos=2)
    if arch == "llama31":
        # Llama 3.1's frequency scaling with original_max_position_embeddings = 64 instead of
        # 8192, so that at head_dim 16 and theta 500000 the wavelengths 2 pi / inv_freq fall in
        # all three bands: 6.3 below high_freq_wavelen = 64 / 4 = 16 (kept), 32.4 between 16 and
        # low_freq_wavelen = 64 (smoothed), and 167 and up (divided by the factor). The smoothed
        # and divided frequencies turn by a visible angle within the test's 24 positions.
        return Spec(arch, vocab=263, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16,
                    intermediate=72, eps=1e-5, max_positions=512, tied=False, theta=500000.0,
                    rope_scaling={"factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 64},
                    bos=260, eos=261)
    if arch == "qwen2":
        # Qwen2: biases on q, k and v (none on o), theta 1e6, eps 1e-6; 7 heads of 8 over one
        # key/value head.
        return Spec(arch, vocab=317, hidden=56, layers=2, heads=7, kv_heads=1, head_dim=8,
                    intermediate=104, eps=1e-6, max_positions=256, tied=False, theta=1000000.0,
                    bos=316, eos=316)
    if arch == "qwen3":
        # Qwen3: head_dim 20 although hidden / heads = 12 (q_proj is [80, 48]), RMSNorm on q
        # and k over head_dim, no biases, tied head (as Qwen3-0.6B).
        return Spec(arch, vocab=301, hidden=48, layers=2, heads=4, kv_heads=2, head_dim=20,
                    intermediate=88, eps=1e-6, max_positions=256, tied=True, theta=1000000.0,
                    bos=299, eos=300)
    raise ValueError(f"unknown architecture {arch!r}")


ARCHS = ("gpt2", "llama", "llama31", "qwen2", "qwen3")
TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
ARCHITECTURES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


def gpt2_inner(spec: Spec) -> int:
    """The MLP width the config implies: the hub layout leaves n_inner out (4 * n_embd)."""
    return 4 * spec.hidden if spec.gpt2_layout == "hub" else spec.intermediate


def make_config(spec: Spec, dtype: str, style: str = "v4") -> dict:
    """config.json as transformers writes it for the model_type. style `v4` writes rope_theta
    and rope_scaling and torch_dtype (transformers 4.x, what hub checkpoints carry); `v5` writes
    rope_parameters {rope_type, rope_theta, ...} and dtype (transformers 5)."""
    if spec.arch == "gpt2":
        c = {
            "activation_function": "gelu_new",
            "architectures": [ARCHITECTURES["gpt2"]],
            "attn_pdrop": 0.1,
            "bos_token_id": spec.bos,
            "embd_pdrop": 0.1,
            "eos_token_id": spec.eos,
            "initializer_range": 0.02,
            "layer_norm_epsilon": spec.eps,
            "model_type": "gpt2",
            "n_ctx": spec.max_positions,
            "n_embd": spec.hidden,
            "n_head": spec.heads,
            "n_layer": spec.layers,
            "n_positions": spec.max_positions,
            "resid_pdrop": 0.1,
            "summary_activation": None,
            "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True,
            "summary_type": "cls_index",
            "summary_use_proj": True,
            "vocab_size": spec.vocab,
        }
        if spec.gpt2_layout == "save_pretrained":
            c.pop("n_ctx")
            c.update({"n_inner": spec.intermediate, "reorder_and_upcast_attn": False,
                      "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
                      "use_cache": True, "torch_dtype": TORCH_DTYPE[dtype],
                      "transformers_version": "4.44.2"})
        if not spec.tied:
            c["tie_word_embeddings"] = False
        if spec.gpt2_layout == "hub" and dtype != "f32":
            c["torch_dtype"] = TORCH_DTYPE[dtype]
        return dict(sorted(c.items()))

    c = {
        "architectures": [ARCHITECTURES[spec.model_type]],
        "attention_dropout": 0.0,
        "bos_token_id": spec.bos,
        "eos_token_id": spec.eos,
        "hidden_act": "silu",
        "hidden_size": spec.hidden,
        "initializer_range": 0.02,
        "intermediate_size": spec.intermediate,
        "max_position_embeddings": spec.max_positions,
        "model_type": spec.model_type,
        "num_attention_heads": spec.heads,
        "num_hidden_layers": spec.layers,
        "num_key_value_heads": spec.kv_heads,
        "rms_norm_eps": spec.eps,
        "rope_scaling": None,
        "rope_theta": spec.theta,
        "tie_word_embeddings": spec.tied,
        "torch_dtype": TORCH_DTYPE[dtype],
        "transformers_version": "4.51.0",
        "use_cache": True,
        "vocab_size": spec.vocab,
    }
    if spec.model_type == "llama":
        # LlamaConfig writes head_dim (hidden / heads unless set), the bias switches, and
        # pretraining_tp.
        c.update({"attention_bias": False, "head_dim": spec.head_dim, "mlp_bias": False,
                  "pretraining_tp": 1})
        if spec.rope_scaling:
            c["rope_scaling"] = dict(spec.rope_scaling, rope_type="llama3")
    elif spec.model_type == "qwen2":
        # Qwen2Config has no attention_bias: q, k and v always carry biases, o never. It has the
        # sliding-window keys, off.
        c.update({"max_window_layers": spec.layers, "sliding_window": spec.max_positions,
                  "use_mrope": False, "use_sliding_window": False})
    elif spec.model_type == "qwen3":
        c.update({"attention_bias": False, "head_dim": spec.head_dim,
                  "max_window_layers": spec.layers, "sliding_window": None,
                  "use_sliding_window": False})
    if style == "v5":
        rope = {"rope_type": "default", "rope_theta": spec.theta}
        if c["rope_scaling"]:
            rope = dict(c["rope_scaling"], rope_theta=spec.theta)
        del c["rope_scaling"], c["rope_theta"]
        c["rope_parameters"] = rope
        c["dtype"] = c.pop("torch_dtype")
        c["transformers_version"] = "5.0.0"
    return dict(sorted(c.items()))


# ---------------------------------------------------------------------------------------------
# The tensors
# ---------------------------------------------------------------------------------------------

# A tensor's role decides how its values are drawn.
MATRIX, EMBEDDING, POSITIONS, GAIN, BIAS, BUFFER_MASK, BUFFER_SCALAR, BUFFER_FREQ = range(8)


def tensor_list(spec: Spec, store_tied_head: bool = False,
                buffers: bool = False) -> List[Tuple[str, Tuple[int, ...], int]]:
    """(name, shape, role) of every tensor in the order of transformers' state_dict (which is
    also the order the shards follow)."""
    E, V, L = spec.hidden, spec.vocab, spec.layers
    out: List[Tuple[str, Tuple[int, ...], int]] = []
    head = not spec.tied or store_tied_head
    if spec.arch == "gpt2":
        p = "" if spec.gpt2_layout == "hub" else "transformer."
        inner = gpt2_inner(spec)
        out += [(p + "wte.weight", (V, E), EMBEDDING),
                (p + "wpe.weight", (spec.max_positions, E), POSITIONS)]
        for i in range(L):
            b = f"{p}h.{i}."
            out += [(b + "ln_1.weight", (E,), GAIN), (b + "ln_1.bias", (E,), BIAS)]
            if buffers:
                out += [(b + "attn.bias", (1, 1, spec.max_positions, spec.max_positions),
                         BUFFER_MASK), (b + "attn.masked_bias", (), BUFFER_SCALAR)]
            out += [(b + "attn.c_attn.weight", (E, 3 * E), MATRIX),
                    (b + "attn.c_attn.bias", (3 * E,), BIAS),
                    (b + "attn.c_proj.weight", (E, E), MATRIX),
                    (b + "attn.c_proj.bias", (E,), BIAS),
                    (b + "ln_2.weight", (E,), GAIN), (b + "ln_2.bias", (E,), BIAS),
                    (b + "mlp.c_fc.weight", (E, inner), MATRIX),
                    (b + "mlp.c_fc.bias", (inner,), BIAS),
                    (b + "mlp.c_proj.weight", (inner, E), MATRIX),
                    (b + "mlp.c_proj.bias", (E,), BIAS)]
        out += [(p + "ln_f.weight", (E,), GAIN), (p + "ln_f.bias", (E,), BIAS)]
        if head:
            out.append(("lm_head.weight", (V, E), MATRIX))
        return out

    H, KV, D, I = spec.heads, spec.kv_heads, spec.head_dim, spec.intermediate
    qkv_bias = spec.model_type == "qwen2"
    out.append(("model.embed_tokens.weight", (V, E), EMBEDDING))
    for i in range(L):
        b = f"model.layers.{i}."
        for proj, rows in (("q_proj", H * D), ("k_proj", KV * D), ("v_proj", KV * D)):
            out.append((b + f"self_attn.{proj}.weight", (rows, E), MATRIX))
            if qkv_bias:
                out.append((b + f"self_attn.{proj}.bias", (rows,), BIAS))
        out.append((b + "self_attn.o_proj.weight", (E, H * D), MATRIX))
        if buffers:
            out.append((b + "self_attn.rotary_emb.inv_freq", (D // 2,), BUFFER_FREQ))
        if spec.model_type == "qwen3":
            out += [(b + "self_attn.q_norm.weight", (D,), GAIN),
                    (b + "self_attn.k_norm.weight", (D,), GAIN)]
        out += [(b + "mlp.gate_proj.weight", (I, E), MATRIX),
                (b + "mlp.up_proj.weight", (I, E), MATRIX),
                (b + "mlp.down_proj.weight", (E, I), MATRIX),
                (b + "input_layernorm.weight", (E,), GAIN),
                (b + "post_attention_layernorm.weight", (E,), GAIN)]
    out.append(("model.norm.weight", (E,), GAIN))
    if head:
        out.append(("lm_head.weight", (V, E), MATRIX))
    return out


def draw_tensors(spec: Spec, seed: int, store_tied_head: bool = False,
                 buffers: bool = False, scale: float = 1.0) -> Dict[str, np.ndarray]:
    """Random f32 values for every tensor (see the module docstring for the distributions).
    `scale` multiplies every matrix, embedding and position table (the self-test makes a model
    with small weights, whose loss must be near log(vocab))."""
    rng = np.random.default_rng(seed)
    out: Dict[str, np.ndarray] = {}
    embedding = None
    for name, shape, role in tensor_list(spec, store_tied_head, buffers):
        if role == MATRIX:
            # nn.Linear is [out, in], Conv1D [in, out]: fan_in is the dim the input contracts.
            fan_in = shape[0] if spec.arch == "gpt2" and name != "lm_head.weight" else shape[1]
            v = rng.standard_normal(shape) * (scale / math.sqrt(fan_in))
        elif role == EMBEDDING:
            v = rng.standard_normal(shape) * (0.02 * scale)
        elif role == POSITIONS:
            v = rng.standard_normal(shape) * (0.01 * scale)
        elif role == GAIN:
            v = 1.0 + 0.1 * rng.standard_normal(shape)
        elif role == BIAS:
            v = 0.1 * rng.standard_normal(shape)
        elif role == BUFFER_MASK:
            n = shape[-1]
            v = np.tril(np.ones((n, n))).reshape(shape)
        elif role == BUFFER_FREQ:
            v = 1.0 / spec.theta ** (np.arange(0, spec.head_dim, 2) / spec.head_dim)
        else:
            v = np.array(-1e4)
        v = v.astype(np.float32)
        if name == "lm_head.weight" and spec.tied:
            v = embedding.copy()  # a stored copy of the tied head
        if role == EMBEDDING:
            embedding = v
        out[name] = v
    return out


# ---------------------------------------------------------------------------------------------
# Rounding and safetensors
# ---------------------------------------------------------------------------------------------


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """The bf16 bit patterns of f32 values, rounded to nearest, ties to even (NaN stays a quiet
    NaN): the upper 16 bits after adding 0x7FFF plus the lowest kept bit."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    rounded = np.where(nan, (bits >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """f32 values rounded to `dtype` and widened back to f32 (what a reader will see)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "bf16":
        return bf16_bits_to_f32(f32_to_bf16_bits(x)).reshape(x.shape)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    raise ValueError(f"unknown dtype {dtype!r}")


def encode(x: np.ndarray, dtype: str) -> Tuple[str, bytes]:
    """(safetensors dtype, little-endian bytes) of f32 values stored as `dtype`."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if dtype == "f32":
        return "F32", x.astype("<f4").tobytes()
    if dtype == "bf16":
        return "BF16", f32_to_bf16_bits(x).astype("<u2").tobytes()
    if dtype == "f16":
        return "F16", x.astype("<f2").tobytes()
    raise ValueError(f"unknown dtype {dtype!r}")


def write_safetensors(path: str, tensors: List[Tuple[str, np.ndarray]], dtype: str) -> int:
    """Writes the (name, f32 array) list as one .safetensors file in `dtype`: an 8-byte
    little-endian header length, the JSON header {name: {dtype, shape, data_offsets}} with
    __metadata__ {"format": "pt"}, padded with spaces to a multiple of 8, then the tensors
    back to back in the list's order. Returns the bytes of tensor data."""
    header: dict = {"__metadata__": {"format": "pt"}}
    chunks, offset = [], 0
    for name, arr in tensors:
        st_dtype, raw = encode(arr, dtype)
        header[name] = {"dtype": st_dtype, "shape": [int(s) for s in np.shape(arr)],
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in chunks:
            f.write(raw)
    return offset


def write_weights(out_dir: str, tensors: Dict[str, np.ndarray], order: List[str], dtype: str,
                  shards: int) -> List[str]:
    """model.safetensors, or `shards` files of consecutive tensors (nearly equal counts) with
    model.safetensors.index.json {metadata: {total_size}, weight_map: {name: file}}; total_size
    is the bytes of tensor data, as transformers counts it. Returns the files written."""
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"),
                          [(n, tensors[n]) for n in order], dtype)
        return ["model.safetensors"]
    if shards > len(order):
        raise ValueError(f"{shards} shards for {len(order)} tensors")
    groups = np.array_split(np.arange(len(order)), shards)
    weight_map, total, files = {}, 0, []
    for k, idx in enumerate(groups, 1):
        fname = f"model-{k:05d}-of-{shards:05d}.safetensors"
        names = [order[j] for j in idx]
        total += write_safetensors(os.path.join(out_dir, fname),
                                   [(n, tensors[n]) for n in names], dtype)
        weight_map.update({n: fname for n in names})
        files.append(fname)
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return files


def write_token_file(path: str, ids: np.ndarray, vocab: int) -> None:
    """llm.c's token file: 256 int32 of header (magic, version, count), then the ids."""
    ids = np.asarray(ids)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError("token ids outside the vocabulary")
    wide = vocab > 65535
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240801, 7, ids.size) if wide else (20240520, 1, ids.size)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(ids.astype("<u4" if wide else "<u2").tobytes())


def llama3_bands(spec: Spec) -> Tuple[int, int, int]:
    """How many of the head's frequencies llama3 scaling keeps, smooths and divides."""
    s = spec.rope_scaling
    d = spec.head_dim
    inv = 1.0 / (spec.theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    wavelen = 2 * math.pi / inv
    old = s["original_max_position_embeddings"]
    high_wl, low_wl = old / s["high_freq_factor"], old / s["low_freq_factor"]
    high = int(np.sum(wavelen < high_wl))
    low = int(np.sum(wavelen > low_wl))
    return high, d // 2 - high - low, low


def make_model(arch: str, out_dir: str, dtype: str = "f32", shards: int = 1, seed: int = 0,
               tied: Optional[bool] = None, gpt2_layout: str = "save_pretrained",
               store_tied_head: bool = False, buffers: bool = False,
               config_style: str = "v4", scale: float = 1.0,
               spec: Optional[Spec] = None) -> Spec:
    """Writes the folder; returns the spec it was made from."""
    spec = spec or default_spec(arch)
    if tied is not None:
        spec = replace(spec, tied=tied)
    if arch == "gpt2":
        spec = replace(spec, gpt2_layout=gpt2_layout)
    elif gpt2_layout != "save_pretrained":
        raise ValueError("--gpt2-layout is for --arch gpt2")
    if spec.rope_scaling and spec.rope_scaling.get("factor", 1.0) != 1.0:
        high, mid, low = llama3_bands(spec)
        if not (high and mid and low):
            raise ValueError(f"llama3 scaling at head_dim {spec.head_dim}: {high} kept, {mid} "
                             f"smoothed, {low} divided frequencies; the test wants all three")
    os.makedirs(out_dir, exist_ok=True)
    tensors = draw_tensors(spec, seed, store_tied_head, buffers, scale)
    tensors = {n: round_to(v, dtype) for n, v in tensors.items()}
    order = [n for n, _, _ in tensor_list(spec, store_tied_head, buffers)]
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(make_config(spec, dtype, config_style), f, indent=2)
        f.write("\n")
    write_weights(out_dir, tensors, order, dtype, shards)
    return spec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, choices=ARCHS)
    p.add_argument("--out", required=True, help="the folder to write (created if missing)")
    p.add_argument("--dtype", choices=sorted(TORCH_DTYPE), default="f32")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    tie = p.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=None,
                     help="output head tied to the embedding (default: per architecture)")
    tie.add_argument("--untied", dest="tied", action="store_false")
    p.add_argument("--gpt2-layout", choices=["hub", "save_pretrained"],
                   default="save_pretrained")
    p.add_argument("--store-tied-head", action="store_true",
                   help="write lm_head.weight even when it is tied (a copy of the embedding)")
    p.add_argument("--buffers", action="store_true",
                   help="write the buffers older conversions saved (GPT-2's attn.bias and "
                        "attn.masked_bias, Llama and Qwen's rotary_emb.inv_freq)")
    p.add_argument("--config-style", choices=["v4", "v5"], default="v4",
                   help="v4: rope_theta, rope_scaling, torch_dtype; v5: rope_parameters, dtype")
    p.add_argument("--tokens", type=int, default=0, help="random token ids to write")
    p.add_argument("--token-file", help="where to write them (llm.c format)")
    args = p.parse_args()
    if bool(args.tokens) != bool(args.token_file):
        p.error("--tokens and --token-file go together")
    if args.shards < 1:
        p.error("--shards must be at least 1")
    try:
        spec = make_model(args.arch, args.out, args.dtype, args.shards, args.seed, args.tied,
                          args.gpt2_layout, args.store_tied_head, args.buffers,
                          args.config_style)
    except ValueError as e:
        print(f"make_hf_model.py: {e}", file=sys.stderr)
        return 1
    if args.token_file:
        rng = np.random.default_rng(args.seed + 1)
        write_token_file(args.token_file, rng.integers(0, spec.vocab, args.tokens), spec.vocab)
    return 0


if __name__ == "__main__":
    sys.exit(main())
