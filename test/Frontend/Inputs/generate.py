"""Writes hostile or oversized .model input for the front-end tests to stdout.

    python3 generate.py KIND [ARG...] > out.model

Inputs too large or too repetitive to keep in the tree are generated here, deterministically
(random input uses a fixed seed).
"""
import os
import random
import sys

MODEL_HEAD = "model m {\n  dims { vocab = 256, seq = 8, embed = 16 }\n"
FORWARD = """  forward(tokens: i32[batch, seq], targets: i32[batch, seq]) -> loss {
    param wte: [vocab, embed]
    return cross_entropy(%s @ wte, targets)
  }
"""
TAIL = "}\ntrain { batch = 4 }\n"


def out(text):
    sys.stdout.buffer.write(text if isinstance(text, bytes) else text.encode())


def constant(expr):
    """A model whose constant `n` is `expr`."""
    out(MODEL_HEAD + "  n = " + expr + "\n" + FORWARD % "embedding(wte, tokens)" + TAIL)


def main(kind, *args):
    if kind == "parens":  # ((((1))))
        n = int(args[0])
        constant("(" * n + "1" + ")" * n)
    elif kind == "minus":  # ----1
        constant("-" * int(args[0]) + "1")
    elif kind == "chain":  # a + a + ... + a, all on one line
        constant(" + ".join(["a"] * int(args[0])))
    elif kind == "definitions":  # c0 = c1, c1 = c2, ..., each defined by the next
        n = int(args[0])
        consts = "".join("  c%d = c%d\n" % (i, i + 1) for i in range(n)) + "  c%d = 1\n" % n
        out(MODEL_HEAD + consts + FORWARD % "embedding(wte, tokens)" + TAIL)
    elif kind == "blocks":  # b0 calls b1 calls ... calls bN
        n = int(args[0])
        blocks = "".join(
            "block b%d(x: [batch, seq, embed]) -> [batch, seq, embed] { return b%d(x) }\n"
            % (i, i + 1) for i in range(n))
        blocks += "block b%d(x: [batch, seq, embed]) -> [batch, seq, embed] { return x }\n" % n
        out(blocks + MODEL_HEAD + FORWARD % "b0(embedding(wte, tokens))" + TAIL)
    elif kind == "imports":  # DIR/f0.model imports f1.model imports ... fN.model
        directory, n = args[0], int(args[1])
        os.makedirs(directory, exist_ok=True)
        for i in range(n):
            with open(os.path.join(directory, "f%d.model" % i), "w") as f:
                f.write('import "f%d.model"\n' % (i + 1))
        with open(os.path.join(directory, "f%d.model" % n), "w") as f:
            f.write("block last(x: [batch, seq, embed]) -> [batch, seq, embed] { return x }\n")
    elif kind == "statements":  # a block of `name = name` statements, BYTES long in all
        size = int(args[0])
        line = "    hidden_state = residual_stream_of_this_block\n"
        count = size // len(line)
        body = ("  block stack(residual_stream_of_this_block: [batch, seq, embed])"
                " -> [batch, seq, embed] {\n" + line * count +
                "    return undefined_name\n  }\n")
        out(MODEL_HEAD + body + FORWARD % "stack(embedding(wte, tokens))" + TAIL)
    elif kind == "garbage":  # `model m {`, then BYTES of random tokens without brackets
        # Inside the model the parser recovers statement by statement, so the errors pile up
        # (at the top level, ANTLR's recovery skips to the end of the file after the first).
        size, seed = int(args[0]), int(args[1])
        rng = random.Random(seed)
        tokens = ["model", "param", "repeat", "=", "->", "@", "//", ",", ";", "x", "1e5",
                  '"s"', "import", "init", "+", "-", "$", "train", "dims", "0.5", "10K"]
        words, n = [], 0
        while n < size:
            t = rng.choice(tokens)
            words.append(t)
            n += len(t) + 1
        out("model m {\n" + " ".join(words) + "\n")
    elif kind == "random-bytes":
        size, seed = int(args[0]), int(args[1])
        out(random.Random(seed).randbytes(size))
    elif kind == "large":  # a comment line of BYTES bytes
        out(b"#" * int(args[0]))
    elif kind == "bytes":  # a model with one odd byte sequence (given in hex) in a name
        out(b"model m {\n  dims { vocab = 256, seq = 8, embed" + bytes.fromhex(args[0]) +
            b" = 16 }\n}\n")
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main(*sys.argv[1:])
