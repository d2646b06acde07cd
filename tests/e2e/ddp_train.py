#!/usr/bin/env python3
"""A DDP job for the e2e tests: real PyTorch, gloo on CPU.

  ddp_train.py MARKS [FAIL_RANK FAIL_STEP]

Joins with init_method="env://" (what torchrun's environment gives), takes a
few SGD steps of a small DistributedDataParallel model on rank-dependent
data, and checks: the world size, unique ranks, an all_reduce, and identical
parameters on every rank after the steps. Then writes MARKS/ok-<rank>. Rank
FAIL_RANK, when given, exits 7 at step FAIL_STEP (after writing
MARKS/failing-<rank>), leaving the others inside a collective.

It exits at once (os._exit), so that its process ends as its sockets close
and its host sees its exit first. After sys.exit(7), Python's teardown
closes gloo's sockets tens of milliseconds before the process ends (more on
a loaded machine), and a peer failing on the closed connection ("Connection
closed by peer", exit 1) could end first and be the cause its host saw.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

marks = sys.argv[1]
fail_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
fail_step = int(sys.argv[3]) if len(sys.argv) > 3 else -1
os.makedirs(marks, exist_ok=True)

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]), (rank, os.environ["RANK"])
assert world == int(os.environ["WORLD_SIZE"]) == 4, world
open(f"{marks}/joined-{rank}", "w").write(str(time.time()))

ranks = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
dist.all_gather(ranks, torch.tensor([rank]))
assert sorted(int(r) for r in ranks) == list(range(world)), ranks

t = torch.full((3,), float(rank + 1))
dist.all_reduce(t)
assert t.tolist() == [world * (world + 1) / 2] * 3, t

torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    if rank == fail_rank and step == fail_step:
        open(f"{marks}/failing-{rank}", "w").write(str(time.time()))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(7)
    gen = torch.Generator().manual_seed(1000 * rank + step)
    x = torch.randn(16, 8, generator=gen)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

flat = torch.cat([p.detach().flatten() for p in model.parameters()])
every = [torch.zeros_like(flat) for _ in range(world)]
dist.all_gather(every, flat)
assert all(torch.equal(every[0], other) for other in every), "parameters differ between ranks"
dist.destroy_process_group()
open(f"{marks}/ok-{rank}", "w").write(" ".join(f"{v:.6f}" for v in flat.tolist()))
# one write(2), so that ranks sharing a pipe (torchrun's) never interleave
os.write(1, f"rank {rank} of {world}: every check passed\n".encode())
