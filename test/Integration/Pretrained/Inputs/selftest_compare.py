"""selftest.py's checks of check_pretrained.py: its mapping and comparison on dumps made to
look like Tessel's (from test/Integration/Parity/reference.py where it has the architecture,
else in layouts an importer might choose), the importer mistakes it must catch, and main()
end to end with a stand-in for tessel (whose executable calls back into fake_step).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from typing import Dict, Tuple

import numpy as np
import torch

import selftest_support as support  # puts the folders on sys.path
from selftest_support import HERE, check, expect
import check_pretrained as cp  # noqa: E402
import hf_reference as ref  # noqa: E402
import make_hf_model as mk  # noqa: E402
import reference as tessel_ref  # noqa: E402  (test/Integration/Parity/reference.py)


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
    where = os.path.join(support.TMP, name)
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
    fake = os.path.join(support.TMP, "fake-tessel")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho 'SUBCOMMANDS:'; echo '  compile - Compile'\n"
                "echo \"tessel: Unknown subcommand '$1'.\" >&2\nexit 0\n")
    os.chmod(fake, 0o755)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cp.main(["--arch", "llama", "--tessel", fake, "--work",
                      os.path.join(support.TMP, "noimp")])
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
    fake = os.path.join(support.TMP, "tessel")
    with open(fake, "w") as f:
        f.write(FAKE_TESSEL.format(here=HERE, python=sys.executable,
                                   me=os.path.join(support.TMP, "tessel")))
    os.chmod(fake, 0o755)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cp.main(["--arch", "qwen3", "--tessel", fake, "--dtype", "bf16", "--micro-batch",
                      "2", "--work", os.path.join(support.TMP, "main")])
    last = buf.getvalue().strip().splitlines()[-1]
    expect(rc == 0 and last.startswith("PARITY OK arch=qwen3"), buf.getvalue()[-3000:])
    return last
