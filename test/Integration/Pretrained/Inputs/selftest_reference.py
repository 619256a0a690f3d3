"""selftest.py's checks of the reference (Inputs/hf_reference.py): its loss against a
loop-by-loop implementation, its gradients against finite differences, the loss of near-zero
weights, its sensitivity to wrong settings, and the equivalences between the architectures.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from selftest_support import check, expect, folder, random_batches, tiny_spec
import hf_reference as ref  # noqa: E402  (on sys.path from selftest_support)
import make_hf_model as mk  # noqa: E402


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
