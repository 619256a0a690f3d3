"""selftest.py's checks of the formats: bf16 rounding, safetensors files (one file and
shards with their index), llm.c token files, and both config.json styles.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import torch

import selftest_support as support  # puts the folders on sys.path
from selftest_support import check, expect
import check_pretrained as cp  # noqa: E402
import hf_reference as ref  # noqa: E402
import make_hf_model as mk  # noqa: E402


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
            out = os.path.join(support.TMP, f"st-{dtype}-{shards}")
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
        path = os.path.join(support.TMP, f"tokens-{vocab}.bin")
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
