"""Prints a TCP port that nothing on this machine listens on now (for MASTER_PORT)."""
import socket

with socket.socket() as s:
    s.bind(("", 0))
    print(s.getsockname()[1])
