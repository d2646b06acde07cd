#!/usr/bin/env python3
"""A rank of the e2e jobs: what it does is its argument.

  rank.py MARKS fail-if RANK CODE   marks MARKS/started-<RANK_ID>, then the rank
                                    RANK exits CODE after 0.3 s; every other
                                    rank waits for a signal
  rank.py MARKS rendezvous SECONDS  every rank connects to rank 0's listener
                                    on host 0 within SECONDS (a rendezvous
                                    that times out), then all exit 0
  rank.py MARKS wait                marks, then waits for a signal
  rank.py MARKS until FILE          marks, then exits 0 once FILE exists
  rank.py MARKS fail-when FILE RANK CODE
                                    marks, then the rank RANK exits CODE once
                                    FILE exists; every other rank waits for a
                                    signal
"""
import os
import signal
import socket
import sys
import time

marks, action = sys.argv[1], sys.argv[2]
rank = int(os.environ["RANK_ID"])
size = int(os.environ["RANK_SIZE"])
os.makedirs(marks, exist_ok=True)
open(f"{marks}/started-{rank}", "w").write(str(time.time()))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

if action == "fail-if":
    if rank == int(sys.argv[3]):
        time.sleep(0.3)
        open(f"{marks}/failing-{rank}", "w").write(str(time.time()))
        sys.exit(int(sys.argv[4]))
    while True:
        signal.pause()
elif action == "rendezvous":
    timeout = float(sys.argv[3])
    vj, task = os.environ["MA_VJ_NAME"], os.environ["MA_TASK_NAME"]
    if rank == 0:
        server = socket.create_server(("0.0.0.0", 47100))
        server.settimeout(timeout)
        for _ in range(size - 1):
            conn, _ = server.accept()  # socket.timeout: the rendezvous failed
            conn.sendall(b"ok")
            conn.close()
    else:
        deadline = time.monotonic() + timeout
        while True:
            try:
                conn = socket.create_connection((f"{vj}-{task}-0.{vj}", 47100), timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit(f"rank {rank}: no rendezvous within {timeout} s")
                time.sleep(0.05)
        assert conn.recv(2) == b"ok"
    print(f"rank {rank}: rendezvous done", flush=True)
elif action == "until":
    while not os.path.exists(sys.argv[3]):
        time.sleep(0.05)
elif action == "fail-when":
    if rank == int(sys.argv[4]):
        while not os.path.exists(sys.argv[3]):
            time.sleep(0.05)
        sys.exit(int(sys.argv[5]))
    while True:
        signal.pause()
elif action == "wait":
    while True:
        signal.pause()
