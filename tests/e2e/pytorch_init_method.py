#!/usr/bin/env python3
"""The PyTorch-GPU preset's script, on CPU: takes --init_method, --rank and
--world_size as the platform appends them, joins over gloo, checks an
all_reduce and writes MARKS/ok-<rank>."""
import argparse
import os

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("marks")
parser.add_argument("--init_method", required=True)
parser.add_argument("--rank", type=int, required=True)
parser.add_argument("--world_size", type=int, required=True)
args = parser.parse_args()
dist.init_process_group("gloo", init_method=args.init_method, rank=args.rank, world_size=args.world_size)
t = torch.tensor([float(args.rank + 1)])
dist.all_reduce(t)
assert t.item() == args.world_size * (args.world_size + 1) / 2, t
dist.destroy_process_group()
os.makedirs(args.marks, exist_ok=True)
open(f"{args.marks}/ok-{args.rank}", "w").write(args.init_method)
