#!/usr/bin/env python3
"""DDP on the backend "trainit" beside gloo, for the e2e tests.

  ddp_backends.py MARKS

Joins with init_process_group("trainit") (env://, as trainit --mode torchrun
gives it), checks the group is hierarchical over the job's hosts and joined
trainit's arena on this host, then trains a small model from one seed twice:
over "trainit" and over a gloo group. The parameters agree within the
rounding of the sums' other order (1e-5 relative) and are equal on every
rank. Then writes MARKS/ok-<rank> and prints one line.
"""
import os
import sys

import torch
import torch.distributed as dist

import trainit_coll.torch  # noqa: F401 (registers "trainit")

marks = sys.argv[1]
os.makedirs(marks, exist_ok=True)
dist.init_process_group("trainit")
rank, world = dist.get_rank(), dist.get_world_size()
pg = dist.distributed_c10d._get_default_group()
assert "2 host(s)" in repr(pg), repr(pg)
assert pg.joined_arena, "the host's ranks did not join trainit's arena"
gloo = dist.new_group(backend="gloo")


def train(group):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(5):
        gen = torch.Generator().manual_seed(1000 * rank + step)
        opt.zero_grad()
        ddp(torch.randn(16, 8, generator=gen)).pow(2).mean().backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


ours, theirs = train(None), train(gloo)
assert torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6), (ours, theirs)
every = [torch.zeros_like(ours) for _ in range(world)]
dist.all_gather(every, ours)
assert all(torch.equal(every[0], other) for other in every), "parameters differ between ranks"
dist.destroy_process_group()
open(f"{marks}/ok-{rank}", "w").write(" ".join(f"{v:.6f}" for v in ours.tolist()))
os.write(1, f"rank {rank} of {world}: DDP on trainit over 2 hosts agrees with gloo\n".encode())
