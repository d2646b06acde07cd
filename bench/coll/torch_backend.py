#!/usr/bin/python3
"""torch.distributed with backend "trainit" beside "gloo", in one run.

    TRAINIT_COLL_LIBRARY=build/release/src/coll/libtrainit_coll.so \\
    PYTHONPATH=build/release/python bench/coll/torch_backend.py [--quick]

For 2 and 4 ranks forked on this machine (met through env://), each backend
in turn, CPU float32 tensors: dist.all_reduce latency (median of the calls,
timed back to back on rank 0 after a barrier) and bus bandwidth
(2 (n-1)/n x bytes / time) from 8 B to 256 MiB, and one DDP step of a small
model (a 3-layer MLP, 1.2 M parameters: forward, backward with its
gradient all_reduce, SGD step). Prints a Markdown table and the targets'
verdicts: from 1 MiB up at least 2x gloo's busbw, at 8 B at most half its
latency.
"""
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist

import trainit_coll.torch  # noqa: F401 (registers "trainit")

QUICK = "--quick" in sys.argv
SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20]
if QUICK:
    SIZES = [8, 1 << 20, 16 << 20]


def calls_for(nbytes):
    return 2000 if nbytes <= 1024 else 500 if nbytes <= (64 << 10) else 50 if nbytes <= (1 << 20) else 10 if nbytes <= (16 << 20) else 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(backend, rank, n, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    torch.set_num_threads(1)
    dist.init_process_group(backend)
    results = {}
    for nbytes in SIZES:
        t = torch.ones(nbytes // 4)
        calls = calls_for(nbytes)
        for _ in range(min(calls, 20)):
            dist.all_reduce(t)
        dist.barrier()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - start)
        results[nbytes] = statistics.median(times)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 256))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(32, 512)
    steps = []
    for i in range(13):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
        if i >= 3:
            steps.append(time.perf_counter() - start)
    results["ddp"] = statistics.median(steps)
    dist.destroy_process_group()
    if rank == 0:
        os.write(out, repr(results).encode())


def run(backend, n):
    port = free_port()
    read_end, write_end = os.pipe()
    pids = []
    for r in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            code = 1
            try:
                rank_main(backend, r, n, port, write_end)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 65536):
        data += chunk
    os.close(read_end)
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if st != 0:
            sys.exit("%s with %d ranks: a rank failed (status %d)" % (backend, n, st))
    return eval(data.decode())  # noqa: S307 (our own repr of floats)


def size_text(nbytes):
    return "%d B" % nbytes if nbytes < 1024 else "%d KiB" % (nbytes >> 10) if nbytes < (1 << 20) else "%d MiB" % (nbytes >> 20)


def main():
    print("machine: %d CPUs, torch %s" % (os.cpu_count(), torch.__version__))
    print()
    print("| ranks | size | trainit µs | gloo µs | trainit busbw GB/s | gloo busbw GB/s | busbw ratio |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    verdicts = []
    ddp_rows = []
    for n in (2, 4):
        ours, theirs = run("trainit", n), run("gloo", n)
        for nbytes in SIZES:
            bus = 2 * (n - 1) / n * nbytes
            a, b = ours[nbytes], theirs[nbytes]
            print("| %d | %s | %.1f | %.1f | %.2f | %.2f | %.1f× |"
                  % (n, size_text(nbytes), a * 1e6, b * 1e6, bus / a / 1e9, bus / b / 1e9, b / a))
            if nbytes == 8:
                verdicts.append("%d ranks, 8 B: %.1f µs vs gloo %.1f µs: %s (target ≤ half)"
                                % (n, a * 1e6, b * 1e6, "met" if a <= b / 2 else "NOT met"))
            elif nbytes >= (1 << 20):
                verdicts.append("%d ranks, %s: busbw %.1f× gloo's: %s (target ≥ 2×)"
                                % (n, size_text(nbytes), b / a, "met" if b / a >= 2 else "NOT met"))
        ddp_rows.append("| %d | %.2f | %.2f |" % (n, ours["ddp"] * 1e3, theirs["ddp"] * 1e3))
    print()
    print("| ranks | DDP step, trainit ms | DDP step, gloo ms |")
    print("|--:|--:|--:|")
    for row in ddp_rows:
        print(row)
    print()
    for v in verdicts:
        print("- " + v)


if __name__ == "__main__":
    main()
