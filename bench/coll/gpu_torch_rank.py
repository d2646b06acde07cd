#!/usr/bin/env python3
"""gpu_torch_rank.py: one rank of a trainit job that checks the device
collectives from Python, the way a training script calls them.

gpu_check.sh runs it as

    trainit --mode torchrun --nproc-per-node N --preflight devices -- \
        python3 bench/coll/gpu_torch_rank.py

with TRAINIT_COLL_BACKEND naming the backend and TRAINIT_COLL_LIBRARY
libtrainit_coll.so. Each rank joins the communicator trainit handed it
(Comm.from_env), then:

  1. with torch on a GPU: CUDA tensors of float32, bfloat16, float16 and
     int32 through allreduce (in place and into a new tensor),
     reduce_scatter, allgather and broadcast, each result equal to the one
     computed on the host, element for element;
  2. device addresses (device_alloc, device_copy): a float32 allreduce in
     place, read back and compared the same way;
  3. rank 0 prints the mean time of a float32 allreduce in place of 8 B,
     1 MiB and 64 MiB of CUDA tensors, from Python, beside the same call
     on the tensor's address (no torch attribute read) and a torch
     device-to-device copy of the same bytes, and whether the module's C
     part (_fast) is in: without it every call goes through ctypes.

Rank r contributes (r + 1) * (1 + j mod 7) at element j: every sum is
exact in every type checked. `--addresses-only` skips torch (a backend
whose memory torch does not know, such as the fake device). Exit 0: every
result was right; 1: one was wrong (the line names the call and type).
"""
import array
import sys
import time

import trainit_coll


def fail(rank, what):
    print("rank %d: %s" % (rank, what), flush=True)
    sys.exit(1)


def pattern(count):
    return [1 + j % 7 for j in range(count)]


def check_addresses(comm, count):
    """A float32 allreduce in place on device_alloc memory."""
    rank, size = comm.rank, comm.size
    mine = array.array("f", [(rank + 1) * v for v in pattern(count)])
    ptr = comm.device_alloc(4 * count)
    try:
        comm.device_copy(ptr, mine)
        comm.allreduce(ptr, count=count, dtype="float32", out=ptr)
        back = array.array("f", bytes(4 * count))
        comm.device_copy(back, ptr)
    finally:
        comm.device_free(ptr)
    scale = size * (size + 1) // 2
    want = [scale * v for v in pattern(count)]
    for j, (got, exp) in enumerate(zip(back, want)):
        if got != exp:
            fail(rank, "address allreduce float32: element %d is %r, not %r" % (j, got, exp))


def check_tensors(comm, torch, count):
    rank, size = comm.rank, comm.size
    scale = size * (size + 1) // 2
    base = torch.arange(count, dtype=torch.int64) % 7 + 1
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        name = str(dtype).replace("torch.", "")
        mine = (base * (rank + 1)).to(dtype).cuda()
        want = (base * scale).to(dtype)
        total = comm.allreduce(mine)
        if not torch.equal(total.cpu(), want):
            fail(rank, "allreduce %s into a new tensor: wrong" % name)
        comm.allreduce(mine, out=mine)
        if not torch.equal(mine.cpu(), want):
            fail(rank, "allreduce %s in place: wrong" % name)
        if count % size == 0:
            mine = (base * (rank + 1)).to(dtype).cuda()
            part = comm.reduce_scatter(mine)
            n = count // size
            if not torch.equal(part.cpu(), want[rank * n:(rank + 1) * n]):
                fail(rank, "reduce_scatter %s: wrong" % name)
        mine = (base * (rank + 1)).to(dtype).cuda()
        every = comm.allgather(mine)
        for r in range(size):
            if not torch.equal(every[r].cpu(), (base * (r + 1)).to(dtype)):
                fail(rank, "allgather %s: rank %d's part is wrong" % (name, r))
        root = size - 1
        comm.broadcast(mine, root=root)
        if not torch.equal(mine.cpu(), (base * (root + 1)).to(dtype)):
            fail(rank, "broadcast %s from rank %d: wrong" % (name, root))


def mean_us(comm, call, iters):
    """The mean time of call() over iters calls, the ranks started together."""
    for _ in range(5):
        call()
    comm.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - start) / iters * 1e6


def time_tensors(comm, torch):
    rows = []
    for nbytes, iters in ((8, 2000), (1 << 20, 500), (64 << 20, 20)):
        count = nbytes // 4
        x = torch.ones(count, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        reduce_us = mean_us(comm, lambda: comm.allreduce(x, out=x), iters)
        # The same memory by its address: what the module costs without
        # torch's attribute reads (the tensor path's share of the time).
        ptr = x.data_ptr()
        address_us = mean_us(comm, lambda: comm.allreduce(ptr, out=ptr, count=count, dtype="float32"), iters)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            y.copy_(x)
        torch.cuda.synchronize()
        copy_us = (time.perf_counter() - start) / iters * 1e6
        rows.append((nbytes, reduce_us, address_us, copy_us))
    return rows


def main():
    addresses_only = "--addresses-only" in sys.argv[1:]
    with trainit_coll.Comm.from_env() as comm:
        rank = comm.rank
        if comm.backend == "host":
            fail(rank, "the communicator's backend is host: set TRAINIT_COLL_BACKEND")
        for count in (1, 1000, 3 << 20):
            check_addresses(comm, count)
        torch = None
        if not addresses_only:
            import torch
            if not torch.cuda.is_available():
                fail(rank, "torch sees no GPU (pass --addresses-only for another backend)")
            for count in (8, 1000, 4 << 20):
                check_tensors(comm, torch, count)
        print("rank %d of %d: every result right (backend %s%s)" %
              (rank, comm.size, comm.backend, "" if torch is None else ", torch " + torch.__version__), flush=True)
        if torch is not None:
            rows = time_tensors(comm, torch)
            if rank == 0:
                print("the module's C part (_fast): %s" % ("in" if trainit_coll._fast is not None else
                                                           "absent: calls go through ctypes"))
                print("| bytes | allreduce from Python, a tensor (µs) | the same by address (µs) | torch copy_ (µs) |")
                print("|---:|---:|---:|---:|")
                for nbytes, reduce_us, address_us, copy_us in rows:
                    print("| %d | %.1f | %.1f | %.1f |" % (nbytes, reduce_us, address_us, copy_us), flush=True)


if __name__ == "__main__":
    main()
