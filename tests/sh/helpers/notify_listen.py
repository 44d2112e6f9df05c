#!/usr/bin/env python3
"""notify_listen.py ADDR: plays systemd's side of sd_notify(3) for a test.

Binds a unix datagram socket at ADDR (a path, or @name for the abstract
namespace), prints "listening", then prints each datagram received on one
line (newlines inside it become spaces), flushed. Exits after a datagram
containing STOPPING=1, or after 60 s without one.
"""
import socket
import sys

addr = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
s.settimeout(60)
print("listening", flush=True)
while True:
    try:
        msg = s.recv(4096).decode(errors="replace")
    except socket.timeout:
        sys.exit(1)
    print(msg.replace("\n", " "), flush=True)
    if "STOPPING=1" in msg.split("\n"):
        break
