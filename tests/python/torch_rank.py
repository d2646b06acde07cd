#!/usr/bin/python3
"""A rank of a DDP job on the backend "trainit", as trainit --mode torchrun
starts it (tests/integration/framework_test.cpp): it joins the arena trainit
made for the host's ranks, trains a small model for a few steps, and checks
that every rank holds the same parameters. Prints one line; exit 0 when right."""
import sys

import torch
import torch.distributed as dist

import trainit_coll.torch  # noqa: F401 (registers "trainit")

dist.init_process_group("trainit")
rank, size = dist.get_rank(), dist.get_world_size()
pg = dist.distributed_c10d._get_default_group()
torch.manual_seed(5)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
data = torch.Generator().manual_seed(rank)
for _ in range(5):
    opt.zero_grad()
    ddp(torch.randn(16, 8, generator=data)).sum().backward()
    opt.step()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
every = [torch.empty_like(flat) for _ in range(size)]
dist.all_gather(every, flat)
alike = all(torch.equal(every[0], other) for other in every[1:])
print("rank %d of %d: DDP over %s, parameters %s" % (rank, size, "trainit's arena" if pg.joined_arena else
                                                      "a standalone communicator", "alike" if alike else "DIFFER"),
      flush=True)
dist.destroy_process_group()
sys.exit(0 if alike and pg.joined_arena else 1)
