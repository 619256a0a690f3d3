#!/usr/bin/python3
"""Prints each example of a Tessel example file as text, its trained tokens in brackets.

    show_examples.py --tokenizer DIR_OR_JSON --examples FILE [--first N]

The ids are decoded with the byte-level BPE tokenizer.json, independently of Tessel: a
vocabulary entry's characters map back to bytes through GPT-2's byte alphabet, an added token
is its content. Each example prints as one line, `example I: TEXT`, newlines as \\n, the runs of
trained tokens between ⟦ and ⟧. Exits 1 if the file or the tokenizer cannot be read.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import example_file  # noqa: E402


def byte_alphabet():
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    other = [b for b in range(256) if b not in printable]
    return {chr(b) if b in printable else chr(256 + other.index(b)): b for b in range(256)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--first", type=int, default=0, help="only the first N examples")
    a = p.parse_args()
    path = a.tokenizer
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    alphabet = byte_alphabet()
    pieces = {}
    for token, i in tok["model"]["vocab"].items():
        pieces[i] = bytes(alphabet[c] for c in token)
    for t in tok.get("added_tokens", []):
        pieces[t["id"]] = t["content"].encode()
    examples, pad, width = example_file.read(a.examples)
    print(f"{len(examples)} examples, pad {pad}, {width}-byte ids")
    for n, (ids, mask) in enumerate(examples[: a.first or None]):
        out, trained = b"", False
        for i, m in zip(ids, mask):
            if bool(m) != trained:
                out += "⟦".encode() if m else "⟧".encode()
                trained = bool(m)
            out += pieces[int(i)]
        if trained:
            out += "⟧".encode()
        text = out.decode("utf-8", errors="replace").replace("\n", "\\n")
        print(f"example {n}: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
