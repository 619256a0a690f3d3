"""Prints an llm.c token file's header and ids: "magic M version V count N", then "ids ..."
(the first 40). Checks that the file's size agrees with its header.

    read_tokens.py FILE
"""
import struct
import sys

data = open(sys.argv[1], "rb").read()
header = struct.unpack("<256i", data[:1024])
magic, version, count = header[:3]
width = {1: 2, 7: 4}[version]
assert len(data) == 1024 + width * count, "size %d, header says %d tokens" % (len(data), count)
assert all(h == 0 for h in header[3:]), "header words after the count are not zero"
ids = struct.unpack("<%d%s" % (count, "H" if width == 2 else "I"), data[1024:])
print("magic %d version %d count %d" % (magic, version, count))
print("ids " + " ".join(str(i) for i in ids[:40]))
