"""A few DDP steps on CPU (gloo): the smallest program torchrun mode runs.

init_method="env://" reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE,
which trainit sets for each process exactly as torchrun's agent would.
"""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        torch.manual_seed(100 + dist.get_rank() * 10 + step)
        x = torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {dist.get_rank()}/{dist.get_world_size()} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
