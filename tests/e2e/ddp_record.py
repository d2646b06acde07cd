#!/usr/bin/env python3
"""A DDP job whose failing rank raises, for the e2e tests: real PyTorch, gloo on CPU.

  ddp_record.py MARKS FAIL_RANK FAIL_STEP [GO_FILE]

main() is decorated with torch.distributed.elastic's @record, as a torchrun
script's entry point should be: an exception it does not catch is written,
with its traceback, to the rank's TORCHELASTIC_ERROR_FILE before the rank
exits 1. Every rank joins with init_method="env://" (writing
MARKS/joined-<rank>) and takes FAIL_STEP all_reduce steps. Then rank
FAIL_RANK waits for GO_FILE, when one is given, and raises ValueError from
train_step(); the others wait outside any collective until they are
stopped. (Inside one, a peer's exit fails them too, with gloo's "Connection
closed by peer", and which failure a host sees first is then a race.)
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


def train_step(rank, step, fail_rank, fail_step):
    if rank == fail_rank and step == fail_step:
        raise ValueError(f"bad batch at step {step}")
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    return t


@record
def main():
    marks, fail_rank, fail_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    go = sys.argv[4] if len(sys.argv) > 4 else None
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    open(f"{marks}/joined-{rank}", "w").close()
    for step in range(fail_step):
        train_step(rank, step, fail_rank, fail_step)
    if rank != fail_rank:
        while True:  # until trainit stops the job
            time.sleep(0.05)
    while go and not os.path.exists(go):
        time.sleep(0.05)
    train_step(rank, fail_step, fail_rank, fail_step)


if __name__ == "__main__":
    main()
