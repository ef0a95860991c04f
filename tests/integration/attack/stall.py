#!/usr/bin/python3
"""In-container load for test_monitor_attacks.py (issue 14 §3): N processes holding FDS fds each,
then (from a process forked after them) pipelined DNS-over-TCP queries for unlisted names (each one a held approval question whose
sender the monitor looks for), then sleep. argv: N FDS CONNS QUERIES. Prints "ready" when the
processes hold their fds; never exits by itself."""
import os
import resource
import socket
import struct
import sys
import time

n, fds, conns, queries = map(int, sys.argv[1:5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fds = min(fds, hard - 30)
r, w = os.pipe()
for i in range(n):
    if os.fork() == 0:
        os.close(r)
        for j in range(fds):
            os.dup2(w, 20 + j)
        os.write(w, b"x")
        while True:
            time.sleep(3600)
os.close(w)
got = 0
while got < n:
    got += len(os.read(r, 4096))
print("ready", flush=True)


def query(name, qid):
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack("!HH", 1, 1)
    return struct.pack("!H", len(q)) + q


# the sender is forked last: a walk of /proc in pid order meets every fd holder before it
if os.fork() == 0:
    held = []
    for c in range(conns):
        s = socket.create_connection(("127.0.0.1", 53), timeout=5)
        s.sendall(b"".join(query(f"h{c}-{k}.unlisted.test", k + 1) for k in range(queries)))
        held.append(s)
    print("sent", flush=True)
    while True:
        time.sleep(3600)
while True:
    time.sleep(3600)
