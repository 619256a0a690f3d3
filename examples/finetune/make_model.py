#!/usr/bin/python3
"""Writes a small Qwen3-architecture model folder, as the hub would hold one, from local text.

    make_model.py --out DIR --text FILE [--merges 384] [--layers 4] [--hidden 128] [--seed 0]

No model can be downloaded here, so this writes one: a byte-level BPE tokenizer learned from
FILE (the 256 bytes, then --merges merges of the most frequent adjacent pair within words, as
GPT-2's tokenizer was made), with <|endoftext|>, <|im_start|> and <|im_end|> as special tokens
and ChatML as its chat template (as Qwen2.5 ships it: no generation marks); and a Qwen3 model
(RMSNorm, SwiGLU, grouped-query attention with q and k normalised per head, rotary positions,
tied head) with random weights, in config.json and model.safetensors, plus
generation_config.json naming <|im_end|> and <|endoftext|> as the ids that end a reply.
"""
import argparse
import collections
import json
import os
import re
import struct
import sys

import numpy as np

CHATML = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_alphabet():
    """GPT-2's printable spelling of the 256 bytes (bytes_to_unicode)."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    other = [b for b in range(256) if b not in printable]
    return {b: chr(b) if b in printable else chr(256 + other.index(b)) for b in range(256)}


def learn_merges(text, count):
    """The `count` most frequent pair merges over the text's words, greedily."""
    spell = byte_alphabet()
    words = collections.Counter(re.findall(r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+", text))
    pieces = {w: [spell[b] for b in w.encode()] for w in words}
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for w, n in words.items():
            p = pieces[w]
            for a, b in zip(p, p[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        for w in words:
            p, out, i = pieces[w], [], 0
            while i < len(p):
                if i + 1 < len(p) and p[i] == a and p[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(p[i])
                    i += 1
            pieces[w] = out
    return merges


def write_tokenizer(out, merges):
    spell = byte_alphabet()
    vocab = {spell[b]: b for b in range(256)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = []
    for content in SPECIALS:
        added.append({"id": len(vocab) + len(added), "content": content, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": True}
    tokenizer = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
                 "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
                 "decoder": byte_level,
                 "model": {"type": "BPE", "dropout": None, "unk_token": None,
                           "continuing_subword_prefix": "", "end_of_word_suffix": "",
                           "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                           "vocab": vocab, "merges": [[a, b] for a, b in merges]}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    config = {"tokenizer_class": "Qwen2Tokenizer", "bos_token": None, "eos_token": "<|im_end|>",
              "pad_token": "<|endoftext|>", "model_max_length": 512, "chat_template": CHATML}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    ids = {t["content"]: t["id"] for t in added}
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                   "pad_token_id": ids["<|endoftext|>"]}, f, indent=2)
    return len(vocab) + len(added), ids


def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, a in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--text", required=True, help="the text the tokenizer learns from")
    p.add_argument("--merges", type=int, default=384)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with open(a.text, encoding="utf-8", errors="replace") as f:
        text = f.read()
    vocab, ids = write_tokenizer(a.out, learn_merges(text, a.merges))
    heads, kv_heads, head_dim, ffn = 4, 2, a.hidden // 4, 3 * a.hidden
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
              "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": None,
              "eos_token_id": ids["<|im_end|>"], "head_dim": head_dim, "hidden_act": "silu",
              "hidden_size": a.hidden, "initializer_range": 0.02, "intermediate_size": ffn,
              "max_position_embeddings": 512, "max_window_layers": a.layers,
              "num_attention_heads": heads, "num_hidden_layers": a.layers,
              "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-6, "rope_scaling": None,
              "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": True,
              "torch_dtype": "float32", "transformers_version": "4.51.0", "use_cache": True,
              "use_sliding_window": False, "vocab_size": vocab}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    rng = np.random.default_rng(a.seed)
    normal = lambda *shape: rng.normal(0, 0.02, size=shape).astype(np.float32)
    t = {"model.embed_tokens.weight": normal(vocab, a.hidden)}
    for i in range(a.layers):
        L = f"model.layers.{i}."
        t[L + "input_layernorm.weight"] = np.ones(a.hidden, np.float32)
        t[L + "self_attn.q_proj.weight"] = normal(heads * head_dim, a.hidden)
        t[L + "self_attn.k_proj.weight"] = normal(kv_heads * head_dim, a.hidden)
        t[L + "self_attn.v_proj.weight"] = normal(kv_heads * head_dim, a.hidden)
        t[L + "self_attn.o_proj.weight"] = normal(a.hidden, heads * head_dim)
        t[L + "self_attn.q_norm.weight"] = np.ones(head_dim, np.float32)
        t[L + "self_attn.k_norm.weight"] = np.ones(head_dim, np.float32)
        t[L + "post_attention_layernorm.weight"] = np.ones(a.hidden, np.float32)
        t[L + "mlp.gate_proj.weight"] = normal(ffn, a.hidden)
        t[L + "mlp.up_proj.weight"] = normal(ffn, a.hidden)
        t[L + "mlp.down_proj.weight"] = normal(a.hidden, ffn)
    t["model.norm.weight"] = np.ones(a.hidden, np.float32)
    write_safetensors(os.path.join(a.out, "model.safetensors"), t)
    params = sum(v.size for v in t.values())
    print(f"wrote {a.out}: qwen3, {a.layers} layers, hidden {a.hidden}, vocabulary {vocab} "
          f"({len(SPECIALS)} special), {params / 1e6:.2f}M parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
