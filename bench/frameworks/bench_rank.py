#!/usr/bin/env python3
"""A gloo rank for bench/frameworks/run.sh.

  bench_rank.py MARKS FAIL_RANK [barrier|compute]

Writes MARKS/start-<rank> (wall clock ms as the interpreter runs this file's
first line, before torch is imported) and MARKS/init-<rank> (as
init_process_group returned); then rank FAIL_RANK, one second after a
barrier, writes MARKS/failing and dies at once with os._exit(3) (no
interpreter teardown, which with torch loaded takes longer than the launchers
under test), while the others either wait in a second barrier (barrier, the
default: gloo notices the lost peer) or compute for 60 s with no collective
in flight (compute: nothing in the ranks notices; only a launcher can end
them). FAIL_RANK -1: every rank leaves the barrier and exits 0.
"""
import time

start = time.time()
import os  # noqa: E402
import sys  # noqa: E402

import torch.distributed as dist  # noqa: E402

marks, fail_rank = sys.argv[1], int(sys.argv[2])
survivors = sys.argv[3] if len(sys.argv) > 3 else "barrier"
os.makedirs(marks, exist_ok=True)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
now = time.time()
open(f"{marks}/start-{rank}", "w").write(f"{start * 1000:.1f}")
open(f"{marks}/init-{rank}", "w").write(f"{now * 1000:.1f}")
dist.barrier()
if rank == fail_rank:
    time.sleep(1)
    with open(f"{marks}/failing", "w") as f:
        f.write(f"{time.time() * 1000:.1f}")
    os._exit(3)
if survivors == "compute":
    time.sleep(60)
dist.barrier()
