#!/usr/bin/env python3
"""A stand-in for a MindSpore process under --mode msrun (MindSpore is not a
Debian package): checks the MS_* environment msrun would give it, and meets
the others at the scheduler's port as MindSpore's dynamic networking does.

  ms_stand_in.py MARKS

MS_ROLE=MS_SCHED listens on MS_SCHED_PORT and takes MS_WORKER_NUM
connections, each sending its RANK_ID; it writes MARKS/sched with the ranks
it saw. MS_ROLE=MS_WORKER checks its variables, connects (retrying for 30 s)
and sends RANK_ID; it writes MARKS/worker-<RANK_ID>.
"""
import ipaddress
import os
import socket
import sys
import time

marks = sys.argv[1]
os.makedirs(marks, exist_ok=True)
env = os.environ
role, n = env["MS_ROLE"], int(env["MS_WORKER_NUM"])
host, port = env["MS_SCHED_HOST"], int(env["MS_SCHED_PORT"])
ipaddress.ip_address(host)  # MindSpore wants the scheduler's address, not a name
if role == "MS_SCHED":
    server = socket.create_server(("0.0.0.0", port))
    server.settimeout(60)
    seen = []
    while len(seen) < n:
        conn, _ = server.accept()
        seen.append(int(conn.recv(16).decode()))
        conn.close()
    assert sorted(seen) == list(range(n)), seen
    open(f"{marks}/sched", "w").write(" ".join(map(str, sorted(seen))))
    sys.exit(0)
assert role == "MS_WORKER", role
rank = int(env["RANK_ID"])
assert env["MS_NODE_ID"] == env["RANK_ID"], (env["MS_NODE_ID"], rank)
assert int(env["RANK_SIZE"]) == n == 4, (env["RANK_SIZE"], n)
assert int(env["DEVICE_ID"]) == int(env["LOCAL_RANK"]) == rank % 2, (env["DEVICE_ID"], env["LOCAL_RANK"], rank)
deadline = time.time() + 30
while True:
    try:
        with socket.create_connection((host, port), timeout=2) as s:
            s.sendall(str(rank).encode())
        break
    except OSError:
        if time.time() > deadline:
            raise
        time.sleep(0.1)
open(f"{marks}/worker-{rank}", "w").write(f"{host}:{port}")
