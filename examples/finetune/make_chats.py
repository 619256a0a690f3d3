#!/usr/bin/python3
"""Chat examples from a fortune file: the user gives a saying's first words, the assistant
finishes it.

    make_chats.py --fortunes FILE --out chats.jsonl [--text corpus.txt] [--max-chars 120]
                  [--limit N]

Reads the fortunes (separated by lines holding "%"), keeps the short sayings (the first N), and
writes one JSON line per saying: {"messages": [system, user: the first words, assistant: the
rest]}. --text also writes the sayings as plain text (what make_model.py learns its tokenizer
from).
"""
import argparse
import json
import sys

SYSTEM = "You finish sayings."


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fortunes", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--text")
    p.add_argument("--max-chars", type=int, default=120)
    p.add_argument("--limit", type=int, default=0, help="at most N sayings (0: all)")
    a = p.parse_args()
    with open(a.fortunes, encoding="utf-8", errors="replace") as f:
        entries = f.read().split("\n%\n")
    sayings = []
    for e in entries:
        e = " ".join(e.split())
        words = e.split(" ")
        if 6 <= len(words) and len(e) <= a.max_chars and e.isascii():
            sayings.append(words)
    if a.limit:
        sayings = sayings[: a.limit]
    with open(a.out, "w") as f:
        for words in sayings:
            cut = max(2, len(words) // 3)
            chat = {"messages": [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": " ".join(words[:cut])},
                                 {"role": "assistant", "content": " ".join(words[cut:])}]}
            f.write(json.dumps(chat) + "\n")
    if a.text:
        with open(a.text, "w") as f:
            f.write("\n".join(" ".join(w) for w in sayings) + "\n")
    print(f"wrote {a.out}: {len(sayings)} chats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
