"""Byte surgery for the runtime tests (test/Integration/Runtime/*.test): writes token files and damages
plans, executables and checkpoints in precise ways.

  edit_bytes.py xor FILE OFFSET [MASK]     XOR the byte at OFFSET (negative: from the end)
                                           with MASK (default 0xff)
  edit_bytes.py u32 FILE OFFSET VALUE      write VALUE as a little-endian u32 at OFFSET
  edit_bytes.py truncate FILE N            keep the first N bytes (negative: drop the last -N)
  edit_bytes.py middle FILE                print the offset of the file's middle byte
  edit_bytes.py st-data FILE               print the offset of the middle byte of a safetensors
                                           file's tensor data (past its JSON header)
  edit_bytes.py tokens FILE COUNT VOCAB [--set POS=ID] [--odd] [--llmc[=COUNT]]
                                           write COUNT uint16 tokens (a fixed pseudo-random
                                           sequence below VOCAB); --set overwrites one, --odd
                                           appends a stray byte, --llmc prepends llm.c's 1024-byte
                                           header, claiming COUNT tokens unless given another
  edit_bytes.py plan-dims FILE A,B C,D     in a plan, replace the first state tensor shape
                                           [A, B] (two i64 after the u64 count 2) with [C, D] and
                                           write the header's checksum anew, so only the
                                           reader's bounds can refuse it
  edit_bytes.py plan-text FILE OLD NEW     in a plan, replace the first occurrence of the text
                                           OLD by NEW (as long) and write the checksum anew

Every command fails loudly (exit 1) when the file is shorter than the edit needs, so a test
cannot pass by editing nothing.
"""
import struct
import sys

import xxhash  # Debian's python3-xxhash: the plans' checksum


def die(message):
    sys.stderr.write("edit_bytes.py: error: " + message + "\n")
    sys.exit(1)


def read(path):
    with open(path, "rb") as f:
        return bytearray(f.read())


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def offset_in(data, text, width=1):
    offset = int(text, 0)
    if offset < 0:
        offset += len(data)
    if offset < 0 or offset + width > len(data):
        die("offset %s lies outside the %d-byte file" % (text, len(data)))
    return offset


def rechecksum(data):
    """Makes an edited plan whole again: its payload's XXH3 64 (seed 0) in the header, as the
    plan's own version (8 and later) has it."""
    data[24:32] = struct.pack("<Q", xxhash.xxh3_64(bytes(data[32:])).intdigest())


def main(argv):
    if len(argv) < 3:
        die(__doc__)
    command, path = argv[1], argv[2]
    if command == "xor":
        data = read(path)
        offset = offset_in(data, argv[3])
        mask = int(argv[4], 0) if len(argv) > 4 else 0xFF
        if mask & 0xFF == 0:
            die("a mask of 0 changes nothing")
        data[offset] ^= mask & 0xFF
        write(path, data)
    elif command == "u32":
        data = read(path)
        offset = offset_in(data, argv[3], 4)
        data[offset:offset + 4] = struct.pack("<I", int(argv[4], 0))
        write(path, data)
    elif command == "truncate":
        data = read(path)
        n = int(argv[3], 0)
        keep = n if n >= 0 else len(data) + n
        if keep < 0 or keep >= len(data):
            die("cannot truncate the %d-byte file to %d bytes" % (len(data), keep))
        write(path, data[:keep])
    elif command == "middle":
        data = read(path)
        if len(data) < 2:
            die("the file is too short to have a middle")
        print(len(data) // 2)
    elif command == "st-data":
        data = read(path)
        if len(data) < 8:
            die("not a safetensors file")
        header = struct.unpack("<Q", bytes(data[:8]))[0]
        start = 8 + header
        if start >= len(data):
            die("the safetensors file has no tensor data")
        print(start + (len(data) - start) // 2)
    elif command == "tokens":
        count, vocab = int(argv[3]), int(argv[4])
        ids, trailer, llmc = [], b"", None
        state = 12345
        for _ in range(count):
            state = (state * 1103515245 + 12345) % (1 << 31)
            ids.append((state >> 8) % vocab)
        for option in argv[5:]:
            if option.startswith("--set"):
                position, value = option.split("=", 1)[1].split("=")
                ids[int(position)] = int(value)
            elif option == "--odd":
                trailer = b"\x01"
            elif option.startswith("--llmc"):
                llmc = int(option.split("=", 1)[1]) if "=" in option else count
            else:
                die("unknown option " + option)
        out = struct.pack("<%dH" % len(ids), *ids) + trailer
        if llmc is not None:
            out = struct.pack("<256i", *([20240520, 1, llmc] + [0] * 253)) + out
        write(path, out)
    elif command == "plan-dims":
        data = read(path)
        old = [int(x) for x in argv[3].split(",")]
        new = [int(x) for x in argv[4].split(",")]
        if len(old) != 2 or len(new) != 2:
            die("plan-dims takes two dims, old and new")
        pattern = struct.pack("<Qqq", 2, *old)
        at = bytes(data).find(pattern, 32)
        if at < 0:
            die("no shape [%d, %d] in the plan" % tuple(old))
        data[at:at + len(pattern)] = struct.pack("<Qqq", 2, *new)
        rechecksum(data)
        write(path, data)
    elif command == "plan-text":
        data = read(path)
        old, new = argv[3].encode(), argv[4].encode()
        if len(old) != len(new):
            die("plan-text replaces a text by one as long")
        at = bytes(data).find(old, 32)
        if at < 0:
            die("no text '%s' in the plan" % argv[3])
        data[at:at + len(old)] = new
        rechecksum(data)
        write(path, data)
    else:
        die("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
