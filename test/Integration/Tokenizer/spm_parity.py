"""Tessel's SentencePiece tokenizers against Python's sentencepiece on held-out text.

    spm_parity.py --tool TESSEL_TOKENIZE_TEXTS --work DIR --root TESSEL_ROOT

Trains a BPE model with byte fallback (Llama 2's kind) and a unigram model with spm_train on
fortunes, then for each held-out text (read as bytes, decoded with invalid UTF-8 replaced, as
Tessel reads it) compares the ids, the ids with BOS (tokenizer_config.json's add_bos_token, on by
default), and their decodings with the BOS skipped and kept. Prints what it compared and every
difference; exits 1 on any.
"""
import argparse
import json
import os
import subprocess
import sys

import sentencepiece

TEXTS = [
    "", " ", "Hello world", "Hello, world!  How are you?", "  leading and trailing  ",
    "tabs\tand\nnewlines\n\n", "12345 3.14159 1,000,000", "I'm sure they'll say it's fine",
    "中文文本：你好，世界！", "日本語のテキスト、ひらがな。", "한국어 텍스트", "e\u0301 cafe\u0301 Å",
    "👍🏽 👨\u200d👩\u200d👧 🇫🇷", "Привет, мир!", "العربية", "ﬁ ligature ｆｕｌｌｗｉｄｔｈ",
    "<s> inside </s> text <unk>", "a" * 500, " " * 100 + "x",
]
INVALID = [b"abc\xff\xfedef", b"\xc3\x28 \xa0\xa1", b"\xe2\x82", b"\xed\xa0\x80x", b"\xf4\x90\x80\x80"]


def train(work, prefix, model_type, corpus):
    args = ["spm_train", "--input=" + corpus, "--model_prefix=" + prefix, "--model_type=" + model_type,
            "--vocab_size=2000", "--character_coverage=0.9995", "--num_threads=1", "--minloglevel=2"]
    if model_type == "bpe":
        args += ["--byte_fallback=true", "--split_digits=true", "--normalization_rule_name=identity",
                 "--remove_extra_whitespaces=false", "--allow_whitespace_only_pieces=true"]
    subprocess.run(args, check=True)
    return prefix + ".model"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    fortunes = "/usr/share/games/fortunes"
    corpus = os.path.join(args.work, "corpus.txt")
    with open(corpus, "w") as out:
        for name in ("fortunes", "wisdom", "people", "literature"):
            path = os.path.join(fortunes, name)
            if os.path.exists(path):
                out.write(open(path, encoding="utf-8", errors="replace").read())
        out.write("\n中文文本 日本語 한국어 Привет 👍🏽 café\n")
    texts = [t.encode("utf-8") for t in TEXTS] + INVALID
    texts.append(open(os.path.join(args.root, "test", "Integration", "Parity", "Inputs", "text.txt"), "rb").read())
    for name in ("computers", "science"):
        path = os.path.join(fortunes, name)
        if os.path.exists(path):
            texts += [f.encode("utf-8") for f in open(path, encoding="utf-8").read().split("\n%\n")[:300]]
    files = []
    for i, t in enumerate(texts):
        files.append(os.path.join(args.work, "text%05d.txt" % i))
        with open(files[-1], "wb") as f:
            f.write(t)

    failures = 0
    for model_type in ("bpe", "unigram"):
        folder = os.path.join(args.work, model_type)
        os.makedirs(folder, exist_ok=True)
        model = train(args.work, os.path.join(folder, "tokenizer"), model_type, corpus)
        sp = sentencepiece.SentencePieceProcessor(model_file=model)
        run = subprocess.run([args.tool, "--tokenizer", folder] + files, capture_output=True, text=True)
        if run.returncode != 0:
            print("FAILED: %s: %s" % (args.tool, run.stderr))
            return 1
        ours = [json.loads(line) for line in run.stdout.splitlines()]
        tokens = 0
        for i, raw in enumerate(texts):
            text = raw.decode("utf-8", errors="replace")
            ids = sp.encode(text)
            special = [sp.bos_id()] + ids
            expected = {"ids": ids, "ids_special": special,
                        "decoded": sp.id_to_piece(sp.bos_id()) + sp.decode(ids),
                        "decoded_skip": sp.decode(special)}
            for key, value in expected.items():
                if ours[i][key] != value:
                    failures += 1
                    if failures <= 20:
                        print("MISMATCH %s text %d %r: %s\n  reference %r\n  tessel    %r"
                              % (model_type, i, text[:60], key, value, ours[i][key]))
            tokens += len(special)
        print("sentencepiece %s: %d texts, %d tokens" % (model_type, len(texts), tokens))
    print("compared with sentencepiece %s (Python)" % sentencepiece.__version__)
    if failures:
        print("FAILED: %d mismatches" % failures)
        return 1
    print("parity: identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
