"""Prints a TCP port that nothing on this machine listens on now (for MASTER_PORT).

With --pair, a port p such that p + 1 is free too (torchrun's store on p, the rendezvous on
p + 1)."""
import socket
import sys


def free(port=0):
    with socket.socket() as s:
        try:
            s.bind(("", port))
        except OSError:
            return None
        return s.getsockname()[1]


while True:
    p = free()
    if "--pair" not in sys.argv or (p < 65535 and free(p + 1)):
        print(p)
        break
