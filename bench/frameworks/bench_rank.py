#!/usr/bin/env python3
"""A gloo rank for bench/frameworks/run.sh.

  bench_rank.py MARKS FAIL_RANK

Writes MARKS/start-<rank> (wall clock ms as the interpreter starts, before
torch is imported) and MARKS/init-<rank> (as init_process_group returned);
then rank FAIL_RANK, one second later, writes MARKS/failing and ends at
once with code 3 (os._exit: the figure is the launchers', not the time
Python takes to tear torch down) while
the others wait in a barrier (gloo: until its timeout, or until stopped).
FAIL_RANK -1: every rank leaves the barrier and exits 0.
"""
import os
import sys
import time

start = time.time()
import torch.distributed as dist  # noqa: E402

marks, fail_rank = sys.argv[1], int(sys.argv[2])
os.makedirs(marks, exist_ok=True)
dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
now = time.time()
open(f"{marks}/start-{rank}", "w").write(f"{start * 1000:.1f}")
open(f"{marks}/init-{rank}", "w").write(f"{now * 1000:.1f}")
dist.barrier()
if rank == fail_rank:
    time.sleep(1)
    open(f"{marks}/failing", "w").write(f"{time.time() * 1000:.1f}")
    os._exit(3)  # the failure is the process's end: not Python's and gloo's teardown, which is the rank's
dist.barrier()
