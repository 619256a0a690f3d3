"""Writes a small byte-level tokenizer.json (GPT-2's pattern and alphabet) into a folder, for
the `tessel tokenize` tests.

    make_tokenizer.py DIR [--wide] [--no-eos] [--unigram]

The 256 bytes are ids 0-255, then each merge's token in order: "he" 256, "ll" 257, "hell" 258,
"hello" 259, " w" 260, "or" 261, " wor" 262, "ld" 263, " world" 264, " t" 265, "here" 266,
"re" 267, " there" 268; <|endoftext|> is 270. --wide gives " world" id 70000 (a vocabulary past
16 bits); --no-eos leaves <|endoftext|> out; --unigram names a model type Tessel does not read.
"""
import json
import os
import sys


def spell(data):
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    other = [b for b in range(256) if b not in printable]
    return "".join(chr(b) if b in printable else chr(256 + other.index(b)) for b in data)


def main():
    out, flags = sys.argv[1], set(sys.argv[2:])
    vocab = {spell(bytes([b])): b for b in range(256)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (" ", "w"), ("o", "r"),
              (" w", "or"), ("l", "d"), (" wor", "ld"), (" ", "t"), ("he", "re"), ("r", "e"),
              (" t", "here")]
    ids = {}
    for a, b in merges:
        token = a + b
        if token not in ids:
            ids[token] = 256 + len(ids)
    # " world" is 264; --wide moves it past 16 bits.
    if "--wide" in flags:
        ids[" world"] = 70000
    for token, i in ids.items():
        vocab[spell(token.encode())] = i
    added = []
    if "--no-eos" not in flags:
        added.append({"id": 270, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab["<|endoftext|>"] = 270
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "Unigram" if "--unigram" in flags else "BPE", "dropout": None,
                  "unk_token": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": [spell(a.encode()) + " " + spell(b.encode()) for a, b in merges]},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f)


if __name__ == "__main__":
    main()
