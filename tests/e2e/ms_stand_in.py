#!/usr/bin/env python3
"""A stand-in for a MindSpore process under --mode msrun (MindSpore is not a
Debian package): checks the MS_* environment msrun would give it, and meets
the others at the scheduler's port as MindSpore's dynamic networking does.

  ms_stand_in.py MARKS [FAIL_RANK]

MS_ROLE=MS_SCHED listens on MS_SCHED_PORT and takes MS_WORKER_NUM
connections, each sending its RANK_ID; it writes MARKS/sched with the ranks
it saw. MS_ROLE=MS_WORKER checks its variables, connects (retrying for 30 s)
and sends RANK_ID; it writes MARKS/worker-<RANK_ID>. With FAIL_RANK the
scheduler and the workers stay up after meeting (training, for 60 s), but
worker FAIL_RANK, once MARKS/sched is there, writes MARKS/failing-<RANK_ID>
and exits 5.
"""
import ipaddress
import os
import socket
import sys
import time

marks = sys.argv[1]
fail_rank = int(sys.argv[2]) if len(sys.argv) > 2 else None
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
    if fail_rank is not None:
        time.sleep(60)
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
if fail_rank == rank:
    while not os.path.exists(f"{marks}/sched"):  # the scheduler saw every worker
        assert time.time() < deadline, "the scheduler did not see every worker"
        time.sleep(0.05)
    open(f"{marks}/failing-{rank}", "w").write(str(time.time()))
    sys.exit(5)
if fail_rank is not None:
    time.sleep(60)
