"""Listens on a TCP port for a while, as torchrun's agent holds MASTER_PORT with its store.

  hold_port.py PORT SECONDS"""
import socket
import sys
import time

with socket.socket() as s:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", int(sys.argv[1])))
    s.listen()
    time.sleep(float(sys.argv[2]))
