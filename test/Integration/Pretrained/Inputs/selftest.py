#!/usr/bin/python3
"""Checks of the pretrained-parity tooling that need no Tessel: the safetensors and token-file
formats, the reference's forward pass against a second, loop-by-loop implementation, its
gradients against finite differences, its equivalences between architectures, and
check_pretrained.py's mapping and comparison on dumps made to look like Tessel's (from
test/Integration/Parity/reference.py, Tessel's own PyTorch reference, where it has the architecture).

    selftest.py [--only NAME]

Prints `ok: ...` per check and `SELFTEST OK` at the end; exits 1 at the first failure.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import tempfile
from dataclasses import replace
from typing import Callable, Dict, List, Tuple

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PRETRAINED = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(PRETRAINED)))
sys.path.insert(0, HERE)
sys.path.insert(0, PRETRAINED)
sys.path.insert(0, os.path.join(ROOT, "test", "Integration", "Parity"))
import check_pretrained as cp  # noqa: E402
import hf_reference as ref  # noqa: E402
import make_hf_model as mk  # noqa: E402
import reference as tessel_ref  # noqa: E402  (test/Integration/Parity/reference.py)

TMP = ""  # the scratch folder, made by main()
CHECKS: List[Tuple[str, Callable[[], str]]] = []


def check(fn):
    CHECKS.append((fn.__name__, fn))
    return fn


class Failure(Exception):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Failure(what)


def tiny_spec(arch: str) -> mk.Spec:
    """Models small enough for finite differences and loops, odd in the same ways."""
    s = mk.default_spec(arch)
    common = dict(vocab=11, hidden=12, layers=2, intermediate=10, max_positions=16)
    if arch == "gpt2":
        return replace(s, heads=3, kv_heads=3, head_dim=4, bos=10, eos=10, **common)
    if arch == "qwen3":
        # head_dim 4 although hidden / heads = 6.
        return replace(s, heads=2, kv_heads=1, head_dim=4, bos=9, eos=10, **common)
    if arch == "llama31":
        # head 8, theta 500000: wavelengths 6.3, 167, 4443, 118000; with original 400 one is
        # kept, one smoothed and two divided.
        return replace(s, heads=3, kv_heads=1, head_dim=8, bos=9, eos=10,
                       rope_scaling=dict(s.rope_scaling, original_max_position_embeddings=400),
                       **common)
    return replace(s, heads=3, kv_heads=1, head_dim=4, bos=9, eos=10, **common)


def folder(arch: str, name: str, **kw) -> ref.Checkpoint:
    path = os.path.join(TMP, name)
    mk.make_model(arch, path, **kw)
    return ref.load_folder(path)


def random_batches(vocab: int, micro: int, batch: int, seq: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(micro):
        ids = torch.randint(0, vocab, (batch, seq + 1), generator=g)
        out.append((ids[:, :-1], ids[:, 1:]))
    return out


# ---------------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------------


@check
def bf16_rounding() -> str:
    """f32 -> bf16 rounds to nearest even, as torch's conversion does, including ties, values
    that round up into the next binade or to infinity, subnormals, signed zeros and NaN."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(100000) * 10.0 ** rng.integers(-44, 38, 100000)).astype(np.float32)
    special = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0x7F7F8000, 0x00000001,
                        0x00018000, 0x80000000, 0x00000000, 0xBF808000, 0x7F800000],
                       dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, special])
    ours = mk.f32_to_bf16_bits(x)
    theirs = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    expect(np.array_equal(ours, theirs),
           f"{int(np.sum(ours != theirs))} values round differently from torch")
    nan = mk.f32_to_bf16_bits(np.array([np.nan], dtype=np.float32))
    expect(np.isnan(mk.bf16_bits_to_f32(nan))[0], "NaN did not stay NaN")
    return f"{x.size} values round as torch.bfloat16 does"


@check
def safetensors_round_trip() -> str:
    """What make_hf_model writes, hf_reference reads back exactly (widened), in each dtype,
    as one file or as shards with an index; the header is 8-aligned and names the format."""
    rng = np.random.default_rng(2)
    tensors = {"a.weight": rng.standard_normal((5, 7)).astype(np.float32),
               "b": rng.standard_normal((3,)).astype(np.float32),
               "c.scalar": np.array(-1e4, dtype=np.float32),
               "d": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    order = list(tensors)
    for dtype in ("f32", "bf16", "f16"):
        for shards in (1, 3):
            out = os.path.join(TMP, f"st-{dtype}-{shards}")
            os.makedirs(out)
            mk.write_weights(out, tensors, order, dtype, shards)
            back = ref.read_folder_tensors(out)
            expect(list(back) == order or set(back) == set(order), "names differ")
            for n, v in tensors.items():
                a, st = back[n]
                expect(st == {"f32": "F32", "bf16": "BF16", "f16": "F16"}[dtype], st)
                expect(a.dtype == np.float32 and a.shape == v.shape, f"{n}: {a.dtype} {a.shape}")
                expect(np.array_equal(a, mk.round_to(v, dtype)), f"{n} ({dtype}) differs")
            files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
            for fname in files:
                with open(os.path.join(out, fname), "rb") as f:
                    n = int.from_bytes(f.read(8), "little")
                    head = json.loads(f.read(n))
                expect(n % 8 == 0, f"header length {n}")
                expect(head["__metadata__"] == {"format": "pt"}, "metadata")
            if shards > 1:
                expect(files == [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)],
                       f"shard names {files}")
                with open(os.path.join(out, "model.safetensors.index.json")) as f:
                    index = json.load(f)
                size = {"f32": 4, "bf16": 2, "f16": 2}[dtype]
                expect(index["metadata"]["total_size"] ==
                       size * sum(v.size for v in tensors.values()), "total_size")
                expect(set(index["weight_map"]) == set(tensors), "weight_map")
    return "f32, bf16 and f16, one file and three shards"


@check
def token_files() -> str:
    """llm.c's headers: 20240520 / 1 / uint16 below 65536 ids, 20240801 / 7 / uint32 above."""
    for vocab, magic, version, width in ((301, 20240520, 1, 2), (70000, 20240801, 7, 4)):
        ids = np.random.default_rng(3).integers(0, vocab, 1000)
        path = os.path.join(TMP, f"tokens-{vocab}.bin")
        mk.write_token_file(path, ids, vocab)
        with open(path, "rb") as f:
            header = np.frombuffer(f.read(1024), dtype="<i4")
        expect(list(header[:3]) == [magic, version, 1000] and not header[3:].any(), "header")
        expect(os.path.getsize(path) == 1024 + width * 1000, "size")
        expect(np.array_equal(cp.read_token_file(path), ids), "ids")
    return "uint16 and uint32 token files"


@check
def config_styles() -> str:
    """config.json in transformers 4's keys (rope_theta, rope_scaling) and 5's
    (rope_parameters) describe the same model; the keys each model_type needs are there."""
    for arch in mk.ARCHS:
        spec = mk.default_spec(arch)
        v4, v5 = mk.make_config(spec, "bf16", "v4"), mk.make_config(spec, "bf16", "v5")
        expect(ref.HFConfig.from_dict(v4) == ref.HFConfig.from_dict(v5), f"{arch}: v4 != v5")
        c = ref.HFConfig.from_dict(v4)
        expect((c.heads, c.kv_heads, c.head_dim, c.intermediate, c.eps, c.tied) ==
               (spec.heads, spec.kv_heads, spec.head_dim,
                mk.gpt2_inner(spec) if arch == "gpt2" else spec.intermediate, spec.eps,
                spec.tied), f"{arch}: {c}")
    gpt2_hub = mk.make_config(replace(mk.default_spec("gpt2"), gpt2_layout="hub"), "f32")
    expect("n_inner" not in gpt2_hub and ref.HFConfig.from_dict(gpt2_hub).intermediate == 192,
           "gpt2 hub: no n_inner means 4 * n_embd")
    q3 = mk.make_config(mk.default_spec("qwen3"), "f32")
    expect(q3["head_dim"] * q3["num_attention_heads"] != q3["hidden_size"], "qwen3 head_dim")
    expect("attention_bias" not in mk.make_config(mk.default_spec("qwen2"), "f32"),
           "Qwen2Config has no attention_bias")
    return "v4 and v5 configs agree for every architecture"


# ---------------------------------------------------------------------------------------------
# The reference against a loop-by-loop implementation, finite differences and itself
# ---------------------------------------------------------------------------------------------


def naive_loss(ck: ref.Checkpoint, tokens: np.ndarray, targets: np.ndarray) -> float:
    """The same models written a second way, in float64 numpy, one sequence, head and position
    at a time, from the descriptions in hf_reference's docstring (frequencies computed in
    float64 by cases, not tensors)."""
    c, w, p = ck.config, {n: a.astype(np.float64) for n, a in ck.tensors.items()}, ck.prefix
    E, H, KV, D = c.hidden, c.heads, c.kv_heads, c.head_dim
    head = w[ck.head]

    def layernorm(x, g, b):
        mu = x.mean()
        return (x - mu) / math.sqrt(((x - mu) ** 2).mean() + c.eps) * g + b

    def rmsnorm(x, g):
        return x / math.sqrt((x ** 2).mean() + c.eps) * g

    def freqs():
        out = []
        for i in range(D // 2):
            f = c.theta ** (-2.0 * i / D)
            s = c.rope_scaling
            if s:
                wl = 2 * math.pi / f
                old = s["original_max_position_embeddings"]
                if wl > old / s["low_freq_factor"]:
                    f = f / s["factor"]
                elif wl >= old / s["high_freq_factor"]:
                    sm = (old / wl - s["low_freq_factor"]) / (s["high_freq_factor"]
                                                              - s["low_freq_factor"])
                    f = (1 - sm) * f / s["factor"] + sm * f
            out.append(f)
        return out

    def rotate(vec, pos, fs):
        out = vec.copy()
        for i, f in enumerate(fs):
            a, b = vec[i], vec[i + D // 2]
            out[i] = a * math.cos(pos * f) - b * math.sin(pos * f)
            out[i + D // 2] = b * math.cos(pos * f) + a * math.sin(pos * f)
        return out

    def attend(qs, ks, vs, t, scale):
        scores = np.array([qs[t] @ ks[j] * scale for j in range(t + 1)])
        e = np.exp(scores - scores.max())
        return sum(e[j] / e.sum() * vs[j] for j in range(t + 1))

    total, count = 0.0, 0
    fs = freqs() if c.model_type != "gpt2" else None
    for seq, tgt in zip(tokens, targets):
        T = len(seq)
        if c.model_type == "gpt2":
            x = [w[p + "wte.weight"][seq[t]] + w[p + "wpe.weight"][t] for t in range(T)]
        else:
            x = [w[p + "embed_tokens.weight"][seq[t]].copy() for t in range(T)]
        for i in range(c.layers):
            if c.model_type == "gpt2":
                b = f"{p}h.{i}."
                h = [layernorm(v, w[b + "ln_1.weight"], w[b + "ln_1.bias"]) for v in x]
                qkv = [v @ w[b + "attn.c_attn.weight"] + w[b + "attn.c_attn.bias"] for v in h]
                out = []
                for t in range(T):
                    heads = []
                    for hh in range(H):
                        sl = slice(hh * D, (hh + 1) * D)
                        qs = [r[:E][sl] for r in qkv]
                        ks = [r[E:2 * E][sl] for r in qkv]
                        vs = [r[2 * E:][sl] for r in qkv]
                        heads.append(attend(qs, ks, vs, t, 1 / math.sqrt(D)))
                    out.append(np.concatenate(heads) @ w[b + "attn.c_proj.weight"]
                               + w[b + "attn.c_proj.bias"])
                x = [x[t] + out[t] for t in range(T)]
                h = [layernorm(v, w[b + "ln_2.weight"], w[b + "ln_2.bias"]) for v in x]
                for t in range(T):
                    u = h[t] @ w[b + "mlp.c_fc.weight"] + w[b + "mlp.c_fc.bias"]
                    u = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
                    x[t] = x[t] + u @ w[b + "mlp.c_proj.weight"] + w[b + "mlp.c_proj.bias"]
            else:
                b = f"{p}layers.{i}.self_attn."

                def proj(name, v, bias):
                    y = w[b + name + ".weight"] @ v
                    return y + w[b + name + ".bias"] if bias else y

                h = [rmsnorm(v, w[f"{p}layers.{i}.input_layernorm.weight"]) for v in x]
                q = [proj("q_proj", v, c.qkv_bias).reshape(H, D) for v in h]
                k = [proj("k_proj", v, c.qkv_bias).reshape(KV, D) for v in h]
                v_ = [proj("v_proj", v, c.qkv_bias).reshape(KV, D) for v in h]
                if c.qk_norm:
                    q = [np.stack([rmsnorm(r, w[b + "q_norm.weight"]) for r in m]) for m in q]
                    k = [np.stack([rmsnorm(r, w[b + "k_norm.weight"]) for r in m]) for m in k]
                q = [np.stack([rotate(r, t, fs) for r in q[t]]) for t in range(T)]
                k = [np.stack([rotate(r, t, fs) for r in k[t]]) for t in range(T)]
                out = []
                for t in range(T):
                    heads = [attend([m[hh] for m in q], [m[hh // (H // KV)] for m in k],
                                    [m[hh // (H // KV)] for m in v_], t, D ** -0.5)
                             for hh in range(H)]
                    out.append(proj("o_proj", np.concatenate(heads), c.o_bias))
                x = [x[t] + out[t] for t in range(T)]
                m = f"{p}layers.{i}.mlp."
                for t in range(T):
                    hn = rmsnorm(x[t], w[f"{p}layers.{i}.post_attention_layernorm.weight"])
                    gate = w[m + "gate_proj.weight"] @ hn
                    up = w[m + "up_proj.weight"] @ hn
                    x[t] = x[t] + w[m + "down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up)
        for t in range(T):
            if c.model_type == "gpt2":
                xf = layernorm(x[t], w[p + "ln_f.weight"], w[p + "ln_f.bias"])
            else:
                xf = rmsnorm(x[t], w[p + "norm.weight"])
            logits = head @ xf
            mx = logits.max()
            total += mx + math.log(np.exp(logits - mx).sum()) - logits[tgt[t]]
            count += 1
    return total / count


@check
def reference_against_loops() -> str:
    """hf_reference (float64) against the loop-by-loop models: every architecture, tied and
    untied, both GPT-2 layouts."""
    worst = 0.0
    cases = [(a, {}) for a in mk.ARCHS] + [("gpt2", {"gpt2_layout": "hub", "tied": False}),
                                           ("llama", {"tied": True}), ("qwen3", {"tied": False})]
    for n, (arch, kw) in enumerate(cases):
        ck = folder(arch, f"loops-{n}", spec=tiny_spec(arch), seed=10 + n, **kw)
        (tokens, targets), = random_batches(ck.config.vocab, 1, 2, 7, n)
        ours = ref.loss_only(ck, [(tokens, targets)], torch.float64)
        theirs = naive_loss(ck, tokens.numpy(), targets.numpy())
        err = abs(ours - theirs) / abs(theirs)
        # The reference computes RoPE's frequencies in f32 as transformers does; the loops in
        # float64: their angles differ by about 1e-7 relative.
        expect(err < 1e-6, f"{arch} {kw}: reference {ours!r}, loops {theirs!r}")
        worst = max(worst, err)
    return f"{len(cases)} models agree with the loops within {worst:.1e}"


@check
def finite_differences() -> str:
    """The gradients the reference returns (float64, two micro-batches) against central
    differences of its loss, for up to 24 elements (all of the small ones) of every tensor of
    every architecture; a stored tied head shares the embedding's gradient."""
    worst, count = 0.0, 0
    cases = [(a, {}) for a in mk.ARCHS] + [("qwen3", {"store_tied_head": True}),
                                           ("gpt2", {"gpt2_layout": "hub", "buffers": True})]
    for n, (arch, kw) in enumerate(cases):
        ck = folder(arch, f"fd-{n}", spec=tiny_spec(arch), seed=20 + n, **kw)
        micro = random_batches(ck.config.vocab, 2, 2, 5, 100 + n)
        _, grads = ref.loss_and_grads(ck, micro, torch.float64)
        expect(set(grads) == set(ck.tensors) - set(ck.buffers),
               f"{arch}: gradients for {sorted(grads)}")
        for alias, target in ck.aliases.items():
            expect(grads[alias] is grads[target], f"{alias} does not share {target}'s gradient")
        w = {k: torch.tensor(ck.tensors[k], dtype=torch.float64) for k in ck.parameter_shapes()}

        def loss() -> float:
            with torch.no_grad():
                return sum(float(ref.model_loss(ck, w, a, b)) for a, b in micro) / len(micro)

        rng = np.random.default_rng(n)
        for name in w:
            flat = w[name].view(-1)
            # A step relative to the tensor's scale: the embeddings are small (0.02), and the
            # first RMSNorm is strongly curved at that scale.
            step = 1e-4 * float(flat.pow(2).mean().sqrt())
            picks = rng.permutation(flat.numel())[:24]
            g = grads[name].reshape(-1)[picks]
            fd = np.zeros(len(picks))
            for j, e in enumerate(picks):
                h = step
                keep = float(flat[e])
                flat[e] = keep + h
                up = loss()
                flat[e] = keep - h
                down = loss()
                flat[e] = keep
                fd[j] = (up - down) / (2 * h)
            scale = np.linalg.norm(grads[name])
            # GPT-2's key bias (c_attn.bias's k part) has a zero gradient: judged against the
            # tensor's norm, which the other parts keep away from zero.
            err = np.linalg.norm(g - fd) / max(scale, 1e-12)
            expect(err < 1e-6, f"{arch} {kw}: {name}: relative error {err:.2e}")
            worst, count = max(worst, err), count + len(picks)
    return f"{len(cases)} models, {count} elements, within {worst:.1e}"


@check
def small_weights_give_log_vocab() -> str:
    """With all weights near zero the logits are near zero and the loss near log(vocab)."""
    out = []
    for arch in mk.ARCHS:
        ck = folder(arch, f"small-{arch}", scale=1e-3)
        micro = random_batches(ck.config.vocab, 1, 2, 24, 7)
        loss = ref.loss_only(ck, micro, torch.float32)
        expect(abs(loss - math.log(ck.config.vocab)) < 1e-2,
               f"{arch}: loss {loss}, log(vocab) {math.log(ck.config.vocab)}")
        out.append(f"{arch} {loss:.4f}")
    return ", ".join(out)


@check
def settings_show_in_gradients() -> str:
    """The test models are sensitive to the settings an importer may get wrong: a tenfold
    epsilon, another RoPE theta, llama3 scaling left out each move some gradient by far more
    than the check's tolerance (1e-5) at the test's sizes, 24 positions."""
    out = []
    for arch in mk.ARCHS:
        ck = folder(arch, f"sens-{arch}")
        c = ck.config
        micro = random_batches(c.vocab, 1, 4, 24, 3)
        _, g = ref.loss_and_grads(ck, micro)
        wrong = {"eps": replace(c, eps=c.eps * 10)}
        if arch != "gpt2":
            wrong["theta"] = replace(c, theta=10000.0 if c.theta != 10000.0 else 500000.0)
        if c.rope_scaling:
            wrong["llama3"] = replace(c, rope_scaling=None)
        for what, cw in wrong.items():
            _, gw = ref.loss_and_grads(ref.Checkpoint(cw, ck.tensors), micro)
            moved = max(np.linalg.norm(g[n] - gw[n]) / np.linalg.norm(g[n]) for n in g)
            expect(moved > 1e-3, f"{arch}: a wrong {what} moves the gradients by {moved:.1e}")
            out.append(f"{arch} {what} {moved:.0e}")
    return ", ".join(out)


def same(a: ref.Checkpoint, b: ref.Checkpoint, micro, tol: float) -> float:
    """The largest relative difference of the two models' losses and gradients (f32)."""
    la, ga = ref.loss_and_grads(a, micro)
    lb, gb = ref.loss_and_grads(b, micro)
    worst = abs(la - lb) / abs(lb)
    for name in ga:
        if name in gb:
            worst = max(worst, np.linalg.norm(ga[name] - gb[name]) / np.linalg.norm(gb[name]))
    expect(worst <= tol, f"differ by {worst:.2e}")
    return worst


@check
def llama31_factor_one_is_llama() -> str:
    """llama3 scaling with factor 1 leaves the frequencies as plain RoPE's; with the test's
    factor 8 the three bands come out as the formula says and the loss moves."""
    spec = mk.default_spec("llama31")
    base = folder("llama31", "l31-none", spec=replace(spec, rope_scaling=None))
    one = folder("llama31", "l31-one", spec=replace(spec, rope_scaling=dict(spec.rope_scaling,
                                                                            factor=1.0)))
    eight = folder("llama31", "l31-eight", spec=spec)
    micro = random_batches(spec.vocab, 1, 2, 24, 8)
    err = same(one, base, micro, 1e-6)
    f = ref.inv_freq(eight.config).double().numpy()
    plain = ref.inv_freq(base.config).double().numpy()
    high, mid, low = mk.llama3_bands(spec)
    expect((high, mid, low) == (1, 1, 6), f"bands {(high, mid, low)}")
    expect(np.allclose(f[:1], plain[:1], rtol=0) and np.allclose(f[2:], plain[2:] / 8, rtol=1e-6),
           "kept and divided bands")
    wl = 2 * math.pi / plain[1]
    s = (64 / wl - 1) / 3
    expect(abs(f[1] - ((1 - s) * plain[1] / 8 + s * plain[1])) < 1e-6 * f[1], "smoothed band")
    moved = abs(ref.loss_only(eight, micro) - ref.loss_only(base, micro))
    expect(moved > 1e-3, f"factor 8 moves the loss by only {moved:.1e}")
    return (f"factor 1 within {err:.1e} of plain RoPE; bands 1/1/6; factor 8 moves the loss "
            f"{moved:.3f}")


@check
def qwen2_without_biases_is_llama() -> str:
    """Qwen2 with its q/k/v biases zeroed computes what Llama does with the same tensors (its
    biases, nonzero, move the loss)."""
    spec = mk.default_spec("qwen2")
    q = folder("qwen2", "q2", spec=spec)
    micro = random_batches(spec.vocab, 1, 2, 24, 9)
    with_bias = ref.loss_only(q, micro)
    zeroed = {n: (np.zeros_like(a) if n.endswith(".bias") else a) for n, a in q.tensors.items()}
    q0 = ref.Checkpoint(q.config, zeroed)
    as_llama = ref.Checkpoint(replace(q.config, model_type="llama", qkv_bias=False),
                              {n: a for n, a in q.tensors.items() if not n.endswith(".bias")})
    err = same(q0, as_llama, micro, 1e-6)
    moved = abs(with_bias - ref.loss_only(q0, micro))
    expect(moved > 1e-3, f"the biases move the loss by only {moved:.1e}")
    return f"equal within {err:.1e}; the biases move the loss by {moved:.3f}"


@check
def qwen3_norms() -> str:
    """Qwen3's q/k RMSNorm: the loss does not change when the q and k projections are scaled
    (the norm removes the scale), and it applies before RoPE: after RoPE the loss differs (the
    gains are not all equal, so the two orders differ). (Qwen3 cannot equal Llama with unit
    gains: the norm still normalises q and k.)"""
    spec = mk.default_spec("qwen3")
    q3 = folder("qwen3", "q3", spec=spec)
    micro = random_batches(spec.vocab, 1, 2, 24, 10)
    base = ref.loss_only(q3, micro)
    scaled = dict(q3.tensors)
    for i in range(spec.layers):
        for proj in ("q_proj", "k_proj"):
            name = f"model.layers.{i}.self_attn.{proj}.weight"
            scaled[name] = scaled[name] * 3.0
    inv = abs(ref.loss_only(ref.Checkpoint(q3.config, scaled), micro) - base) / base
    expect(inv < 1e-5, f"scaling q and k moves the qwen3 loss by {inv:.1e}")
    # The other order: norm after the rotation, a plausible importer mistake.
    w = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
         for n, a in q3.tensors.items()}
    loss = qwen3_with_norm_after_rope(q3.config, w, micro)
    loss.backward()
    _, grads = ref.loss_and_grads(q3, micro, torch.float64)
    name = "model.layers.0.self_attn.q_norm.weight"
    moved = np.linalg.norm(w[name].grad.numpy() - grads[name]) / np.linalg.norm(grads[name])
    expect(moved > 1e-2, f"norm before and after RoPE: {name}'s gradients differ by {moved:.1e}")
    return (f"scale-invariant within {inv:.1e}; the norm after RoPE would move {name}'s "
            f"gradient by {moved:.0%}")


def qwen3_with_norm_after_rope(c, w, micro) -> torch.Tensor:
    """The Qwen3 loss with its q/k norms moved after the rotation."""
    total = 0.0
    for tokens, targets in micro:
        B, T = tokens.shape
        H, KV, D = c.heads, c.kv_heads, c.head_dim
        cos, sin = ref.rope_cos_sin(c, T, torch.float64)
        x = torch.nn.functional.embedding(tokens, w["model.embed_tokens.weight"])
        for i in range(c.layers):
            b = f"model.layers.{i}."
            h = ref.rms_norm(x, w[b + "input_layernorm.weight"], c.eps)
            q = (h @ w[b + "self_attn.q_proj.weight"].T).view(B, T, H, D).transpose(1, 2)
            k = (h @ w[b + "self_attn.k_proj.weight"].T).view(B, T, KV, D).transpose(1, 2)
            v = (h @ w[b + "self_attn.v_proj.weight"].T).view(B, T, KV, D).transpose(1, 2)
            q = ref.rms_norm(q * cos + ref.rotate_half(q) * sin, w[b + "self_attn.q_norm.weight"],
                             c.eps)
            k = ref.rms_norm(k * cos + ref.rotate_half(k) * sin, w[b + "self_attn.k_norm.weight"],
                             c.eps)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            s = q @ k.transpose(2, 3) * D ** -0.5 + ref.causal_mask(T, torch.float64)
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, H * D)
            x = x + a @ w[b + "self_attn.o_proj.weight"].T
            h = ref.rms_norm(x, w[b + "post_attention_layernorm.weight"], c.eps)
            g = h @ w[b + "mlp.gate_proj.weight"].T
            u = h @ w[b + "mlp.up_proj.weight"].T
            x = x + (torch.nn.functional.silu(g) * u) @ w[b + "mlp.down_proj.weight"].T
        x = ref.rms_norm(x, w["model.norm.weight"], c.eps)
        total = total + ref.cross_entropy(x @ w["model.embed_tokens.weight"].T, targets)
    return total / len(micro)


# ---------------------------------------------------------------------------------------------
# check_pretrained's mapping and comparison, on dumps made to look like Tessel's
# ---------------------------------------------------------------------------------------------

SEQ, BATCH = 24, 4


def to_tessel_gpt(ck: ref.Checkpoint, seq: int) -> Dict[str, np.ndarray]:
    """A GPT-2 folder's tensors under test/Integration/Parity/reference.py's names and shapes (the std
    library's: [embed, heads, head] projections, the position table cut to seq rows)."""
    c, w, p = ck.config, ck.tensors, ck.prefix
    E, H, D = c.hidden, c.heads, c.head_dim
    out = {"wte": w[p + "wte.weight"], "wpe": w[p + "wpe.weight"][:seq],
           "lnf_g": w[p + "ln_f.weight"], "lnf_b": w[p + "ln_f.bias"]}
    for i in range(c.layers):
        b, t = f"{p}h.{i}.", f"layers.{i}.gpt_block."
        W, bias = w[b + "attn.c_attn.weight"], w[b + "attn.c_attn.bias"]
        for k, n in enumerate("qkv"):
            out[t + f"causal_self_attention.w{n}"] = W[:, k * E:(k + 1) * E].reshape(E, H, D)
            out[t + f"causal_self_attention.b{n}"] = bias[k * E:(k + 1) * E].reshape(H, D)
        out[t + "causal_self_attention.wo"] = w[b + "attn.c_proj.weight"].reshape(H, D, E)
        out[t + "causal_self_attention.bo"] = w[b + "attn.c_proj.bias"]
        out.update({t + "ln1_g": w[b + "ln_1.weight"], t + "ln1_b": w[b + "ln_1.bias"],
                    t + "ln2_g": w[b + "ln_2.weight"], t + "ln2_b": w[b + "ln_2.bias"],
                    t + "gpt_mlp.c_fc": w[b + "mlp.c_fc.weight"],
                    t + "gpt_mlp.b_fc": w[b + "mlp.c_fc.bias"],
                    t + "gpt_mlp.c_proj": w[b + "mlp.c_proj.weight"],
                    t + "gpt_mlp.b_proj": w[b + "mlp.c_proj.bias"]})
    return {n: np.ascontiguousarray(a, dtype=np.float32) for n, a in out.items()}


def to_tessel_llama(ck: ref.Checkpoint) -> Dict[str, np.ndarray]:
    """A Llama folder's tensors under test/Integration/Parity/reference.py's names and shapes."""
    c, w, p = ck.config, ck.tensors, ck.prefix
    E, H, KV, D = c.hidden, c.heads, c.kv_heads, c.head_dim
    out = {"tok_embeddings": w[p + "embed_tokens.weight"], "norm": w[p + "norm.weight"],
           "w_out": w["lm_head.weight"].T}
    for i in range(c.layers):
        b, t = f"{p}layers.{i}.", f"layers.{i}.llama_block."
        a = t + "grouped_query_attention."
        out.update({
            a + "wq": w[b + "self_attn.q_proj.weight"].T.reshape(E, H, D),
            a + "wk": w[b + "self_attn.k_proj.weight"].T.reshape(E, KV, D),
            a + "wv": w[b + "self_attn.v_proj.weight"].T.reshape(E, KV, D),
            a + "wo": w[b + "self_attn.o_proj.weight"].T.reshape(H, D, E),
            t + "attention_norm": w[b + "input_layernorm.weight"],
            t + "ffn_norm": w[b + "post_attention_layernorm.weight"],
            t + "swiglu_mlp.w_gate": w[b + "mlp.gate_proj.weight"].T,
            t + "swiglu_mlp.w_up": w[b + "mlp.up_proj.weight"].T,
            t + "swiglu_mlp.w_down": w[b + "mlp.down_proj.weight"].T})
    return {n: np.ascontiguousarray(a, dtype=np.float32) for n, a in out.items()}


def tessel_ref_step(kind: str, ck: ref.Checkpoint, init: Dict[str, np.ndarray], micro):
    """Loss and gradients from test/Integration/Parity/reference.py, Tessel's PyTorch reference."""
    c = ck.config
    mc = tessel_ref.ModelConfig(kind=kind, vocab=c.vocab, seq=SEQ, embed=c.hidden,
                                heads=c.heads, head=c.head_dim, ffn=c.intermediate,
                                layers=c.layers, kv_heads=c.kv_heads if kind == "llama" else None,
                                norm_eps=c.eps, rope_theta=c.theta)
    model = tessel_ref.build_model(mc)
    tessel_ref.load_params(model, init)
    total = 0.0
    for tokens, targets in micro:
        loss = model(tokens, targets)
        (loss / len(micro)).backward()
        total += float(loss)
    return total / len(micro), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def write_dump(where: str, init, grads, micro, loss: float) -> Tuple[str, str]:
    dump = os.path.join(where, "dump")
    os.makedirs(dump, exist_ok=True)
    tessel_ref.write_safetensors(os.path.join(dump, "init.safetensors"), init)
    tessel_ref.write_safetensors(os.path.join(dump, "grads.safetensors"),
                                 {n: np.asarray(g, dtype=np.float32) for n, g in grads.items()})
    batches = {}
    for u, (tokens, targets) in enumerate(micro):
        batches[f"tokens.1.{u}"] = tokens.numpy().astype(np.int32)
        batches[f"targets.1.{u}"] = targets.numpy().astype(np.int32)
    tessel_ref.write_safetensors(os.path.join(dump, "batches.safetensors"), batches)
    metrics = os.path.join(where, "metrics.jsonl")
    with open(metrics, "w") as f:
        f.write(json.dumps({"run": {"tessel": "selftest"}}) + "\n")
        f.write(json.dumps({"step": 1, "loss": loss, "lr": 1e-3}) + "\n")
    return dump, metrics


def windows_of(stream: np.ndarray, micro: int, batch: int, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(micro):
        starts = rng.integers(0, stream.size - SEQ - 1, batch)
        rows = np.stack([stream[s:s + SEQ + 1] for s in starts])
        out.append((torch.from_numpy(rows[:, :-1]), torch.from_numpy(rows[:, 1:])))
    return out


def make_case(arch: str, name: str, **kw):
    where = os.path.join(TMP, name)
    hf = os.path.join(where, "hf")
    spec = mk.make_model(arch, hf, **kw)
    tokens = os.path.join(where, "tokens.bin")
    mk.write_token_file(tokens, np.random.default_rng(5).integers(0, spec.vocab, 4096),
                        spec.vocab)
    return where, hf, tokens, ref.load_folder(hf)


def run_compare(hf, dump, metrics, tokens, arch, tol=1e-5) -> Tuple[bool, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            out = cp.compare(hf, dump, metrics, SEQ, BATCH, tol, arch, tokens)
            ok, summary = out.ok, out.summary
        except cp.ParityError as e:
            ok, summary = False, str(e)
    return ok, summary + "\n" + buf.getvalue()


@check
def compare_against_tessel_reference() -> str:
    """check_pretrained.compare on dumps from test/Integration/Parity/reference.py (an implementation of
    the std GPT and Llama written for Tessel, not from transformers): GPT-2 (tied, both
    layouts, position table cut to seq, mask buffers) and Llama (bf16, sharded, untied), in
    fp32, at the check's tolerance; two micro-batches of two."""
    out = []
    for arch, kind, kw in (("gpt2", "gpt", {"gpt2_layout": "hub", "buffers": True}),
                           ("gpt2", "gpt", {"store_tied_head": True}),
                           ("llama", "llama", {"dtype": "bf16", "shards": 3, "buffers": True})):
        where, hf, tokens, ck = make_case(arch, f"tref-{arch}-{len(out)}", **kw)
        init = to_tessel_gpt(ck, SEQ) if kind == "gpt" else to_tessel_llama(ck)
        micro = windows_of(cp.read_token_file(tokens), 2, BATCH // 2, 11)
        loss, grads = tessel_ref_step(kind, ck, init, micro)
        dump, metrics = write_dump(where, init, grads, micro, loss)
        ok, text = run_compare(hf, dump, metrics, tokens, arch)
        expect(ok, f"{arch} {kw}: {text}")
        out.append(text.split("\n")[0].split(" max_rel_err_loss=")[1].split(" params")[0])
    return "gpt2 hub, gpt2 save_pretrained, llama bf16: max_rel_err_loss=" + "; ".join(out)


def generic_tessel(ck: ref.Checkpoint, grads: Dict[str, np.ndarray]):
    """A folder's tensors and gradients in the layouts an importer might choose (projections
    transposed to [embed, heads, head], o as [heads, head, embed], biases [heads, head], names
    of its own), for the architectures test/Integration/Parity/reference.py does not have."""
    c = ck.config
    H, KV, D, E = c.heads, c.kv_heads, c.head_dim, c.hidden
    init, g = {}, {}
    for n, a in ck.tensors.items():
        if n in ck.aliases or n in ck.buffers:
            continue
        short = n.replace("model.", "").replace("self_attn.", "").replace(".weight", "")
        heads = H if ".q_proj" in n else KV
        if n.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")):
            f = lambda x, h=heads: x.T.reshape(E, h, D)  # noqa: E731
        elif n.endswith(("q_proj.bias", "k_proj.bias", "v_proj.bias")):
            f = lambda x, h=heads: x.reshape(h, D)  # noqa: E731
        elif n.endswith("o_proj.weight"):
            f = lambda x: x.T.reshape(H, D, E)  # noqa: E731
        elif a.ndim == 2:
            f = lambda x: x.T  # noqa: E731
        else:
            f = lambda x: x  # noqa: E731
        init[short] = np.ascontiguousarray(f(a), dtype=np.float32)
        g[short] = np.ascontiguousarray(f(grads[n]), dtype=np.float32)
    return init, g


@check
def compare_generic_layouts() -> str:
    """check_pretrained.compare maps llama31, qwen2 and qwen3 (tied, bf16; and with a stored
    copy of the tied head) back by value from transposed, reshaped, renamed parameters."""
    for n, (arch, kw) in enumerate((("llama31", {"dtype": "f16"}), ("qwen2", {"shards": 2}),
                                    ("qwen3", {"dtype": "bf16"}),
                                    ("qwen3", {"store_tied_head": True, "config_style": "v5"}))):
        where, hf, tokens, ck = make_case(arch, f"generic-{n}", **kw)
        micro = windows_of(cp.read_token_file(tokens), 1, BATCH, 12)
        loss, grads = ref.loss_and_grads(ck, micro)
        init, g = generic_tessel(ck, grads)
        dump, metrics = write_dump(where, init, g, micro, loss)
        ok, text = run_compare(hf, dump, metrics, tokens, arch)
        expect(ok, f"{arch} {kw}: {text}")
    return "llama31 f16, qwen2 sharded, qwen3 bf16 and with a stored tied head"


@check
def compare_catches_mistakes() -> str:
    """Each importer mistake fails the check, with a message that names it."""
    where, hf, tokens, ck = make_case("llama", "mistakes", dtype="bf16", buffers=True)
    micro = windows_of(cp.read_token_file(tokens), 1, BATCH, 13)
    loss, grads = ref.loss_and_grads(ck, micro)
    init, g = generic_tessel(ck, grads)
    caught = []

    def expect_fail(label, init_, g_, loss_, needle, tok=tokens):
        sub = os.path.join(where, label)
        dump, metrics = write_dump(sub, init_, g_, micro, loss_)
        ok, text = run_compare(hf, dump, metrics, tok, "llama")
        expect(not ok and needle in text, f"{label}: expected a failure naming {needle!r}:\n"
               f"{text}")
        caught.append(label)

    q = "layers.0.q_proj"
    # A gradient off by 1e-4.
    g2 = dict(g, **{q: g[q] * np.float32(1 + 1e-4)})
    expect_fail("gradient", init, g2, loss, f"{q}")
    # The loss off.
    expect_fail("loss", init, g, loss * (1 + 1e-4), "loss off")
    # gate and up swapped at import: the values map, the gradients do not.
    sw = dict(init)
    sw["layers.0.mlp.gate_proj"], sw["layers.0.mlp.up_proj"] = (init["layers.0.mlp.up_proj"],
                                                                init["layers.0.mlp.gate_proj"])
    expect_fail("swapped", sw, g, loss, "gradient(s) off")
    # A value one ulp away (rounded twice, or widened wrongly).
    off = dict(init)
    off["norm"] = np.nextafter(init["norm"], np.float32(10))
    expect_fail("ulp", off, g, loss, "nearest: model.norm.weight")
    # A tensor left out.
    expect_fail("missing", {k: v for k, v in init.items() if k != "norm"},
                {k: v for k, v in g.items() if k != "norm"}, loss,
                "model.norm.weight initialises no Tessel parameter")
    # The rows of q permuted into Meta's interleaved RoPE order.
    perm = dict(init)
    D = ck.config.head_dim
    order = np.concatenate([np.arange(D)[0::2], np.arange(D)[1::2]])
    perm[q] = init[q][:, :, order]
    expect_fail("interleaved", perm, g, loss, "in an order no reshape")
    # A buffer imported as a parameter.
    buf = "model.layers.1.self_attn.rotary_emb.inv_freq"
    expect_fail("buffer", dict(init, inv_freq=ck.tensors[buf]),
                dict(g, inv_freq=np.zeros_like(ck.tensors[buf])), loss,
                "a buffer, not a parameter")
    # A tied head imported as two parameters.
    where3, hf3, tokens3, ck3 = make_case("qwen3", "mistakes-tied")
    loss3, grads3 = ref.loss_and_grads(ck3, micro)
    init3, g3 = generic_tessel(ck3, grads3)
    init3["lm_head"], g3["lm_head"] = init3["embed_tokens"].copy(), g3["embed_tokens"]
    sub = os.path.join(where3, "two")
    dump, metrics = write_dump(sub, init3, g3, micro, loss3)
    ok, text = run_compare(hf3, dump, metrics, tokens3, "qwen3")
    expect(not ok and "initialises 2 Tessel parameters" in text, text)
    caught.append("untied")
    # Batches that are not windows of the token file.
    other = os.path.join(where, "other.bin")
    mk.write_token_file(other, np.random.default_rng(99).integers(0, ck.config.vocab, 4096),
                        ck.config.vocab)
    expect_fail("data", init, g, loss, "no window of the token file", tok=other)
    return "caught: " + ", ".join(caught)


@check
def missing_import_hf() -> str:
    """Without `import-hf` the check fails, saying so (tessel exits 0 on an unknown
    subcommand, so this must not rely on the exit status)."""
    fake = os.path.join(TMP, "fake-tessel")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'SUBCOMMANDS:'; echo '  compile - Compile'\n"
                "echo \"tessel: Unknown subcommand '$1'.\" >&2\nexit 0\n")
    os.chmod(fake, 0o755)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cp.main(["--arch", "llama", "--tessel", fake, "--work", os.path.join(TMP, "noimp")])
    last = buf.getvalue().strip().splitlines()[-1]
    expect(rc == 1 and last.startswith("PARITY FAIL") and "import-hf" in last, last)
    return last


FAKE_TESSEL = """#!/usr/bin/python3
# A stand-in for tessel: import-hf records its options as the spec, compile writes an
# executable that calls back into selftest.py, which dumps what the reference computes.
import json, os, sys
sys.path.insert(0, {here!r})
args = sys.argv[1:]
def opt(name):
    return args[args.index(name) + 1]
if args[0] == "--help":
    print("SUBCOMMANDS:\\n  import-hf - Write a .model file from a Hugging Face folder")
elif args[0] == "import-hf":
    spec = dict(hf=args[1], seq=int(opt("--seq")), batch=int(opt("--batch")),
                micro=int(opt("--micro-batch")), data=opt("--data"))
    with open(opt("-o"), "w") as f:
        json.dump(spec, f)
elif args[0] == "compile":
    with open(opt("-o"), "w") as f:
        f.write("#!/bin/sh\\nexec {python} {me} run " + os.path.abspath(args[1]) + ' "$@"\\n')
    os.chmod(opt("-o"), 0o755)
elif args[0] == "run":
    import selftest
    assert opt("--steps") == "1" and "--quiet" in args, args
    selftest.fake_step(args[1], opt("--dump-dir"), opt("--metrics"))
"""


def fake_step(spec_path: str, dump_dir: str, metrics: str) -> None:
    """What the fake tessel's executable does: one step of the reference on windows of the
    token file, dumped in the generic layout."""
    with open(spec_path) as f:
        spec = json.load(f)
    ck = ref.load_folder(spec["hf"])
    stream = cp.read_token_file(spec["data"])
    micro = windows_of(stream, spec["batch"] // spec["micro"], spec["micro"], 14)
    loss, grads = ref.loss_and_grads(ck, micro)
    init, g = generic_tessel(ck, grads)
    dump, written = write_dump(os.path.dirname(dump_dir), init, g, micro, loss)
    if os.path.abspath(written) != os.path.abspath(metrics):
        os.replace(written, metrics)


@check
def main_with_fake_tessel() -> str:
    """check_pretrained.main end to end with a stand-in for tessel (import-hf, compile, the
    executable's options and dumps): it passes for qwen3 with two micro-batches."""
    fake = os.path.join(TMP, "tessel")
    with open(fake, "w") as f:
        f.write(FAKE_TESSEL.format(here=HERE, python=sys.executable,
                                   me=os.path.join(TMP, "tessel")))
    os.chmod(fake, 0o755)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cp.main(["--arch", "qwen3", "--tessel", fake, "--dtype", "bf16", "--micro-batch",
                      "2", "--work", os.path.join(TMP, "main")])
    last = buf.getvalue().strip().splitlines()[-1]
    expect(rc == 0 and last.startswith("PARITY OK arch=qwen3"), buf.getvalue()[-3000:])
    return last


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="run only the check of this name")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    global TMP
    TMP = tempfile.mkdtemp(prefix="tessel-pretrained-selftest-")
    try:
        for name, fn in CHECKS:
            if args.only and name != args.only:
                continue
            try:
                print(f"ok: {name}: {fn()}", flush=True)
            except Failure as e:
                print(f"FAIL: {name}: {e}")
                return 1
        print("SELFTEST OK")
        return 0
    finally:
        if args.keep:
            print(f"kept {TMP}")
        else:
            import shutil
            shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
