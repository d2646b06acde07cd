#!/usr/bin/python3
"""gloo_allreduce: a torch.distributed backend (gloo unless --backend says
nccl or trainit: trainit_coll.torch), dist.all_reduce (f32 sum, in place) on
CPU tensors (or, with --device cuda, on CUDA tensors: rank r on GPU r mod the
GPU count, each call followed by torch.cuda.synchronize()) among N local
processes, for each size in bytes on the command line: warm-up calls, then
ITERS = clamp(BUDGET / size, MIN, MAX) calls (fewer once --seconds have
passed, at least MIN), timed one by one on rank 0 (time.perf_counter_ns
around the call) as bench_coll times trainit_allreduce. Rank 0 prints "BYTES
MEDIAN_US CALLS" per size. Each rank uses one intra-op thread, as the other
columns' ranks do.

    /usr/bin/python3 gloo_allreduce.py -n N [--backend gloo|nccl|trainit] [--device cpu|cuda]
        [--budget BYTES] [--max-iters K] [--seconds S] SIZE...

Run by bench/coll/compare.sh (gloo on CPU tensors) and bench/coll/gpu_check.sh
(CUDA tensors: gloo, nccl where there are GPUs enough, trainit).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time


def rank_main(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if args.backend == "trainit":
        import trainit_coll.torch  # noqa: F401 (registers the backend)
    device = "cpu"
    done = lambda: None  # noqa: E731
    if args.device == "cuda":
        torch.cuda.set_device(args.rank % torch.cuda.device_count())
        device = "cuda"
        done = torch.cuda.synchronize
    dist.init_process_group(args.backend, init_method="tcp://127.0.0.1:%d" % args.port,
                            rank=args.rank, world_size=args.n)
    n = args.n
    for size in args.sizes:
        count = size // 4
        t = torch.full((count,), float(args.rank + 1), dtype=torch.float32, device=device)
        iters = int(min(max(args.budget / size, args.min_iters), args.max_iters))
        for _ in range(min(10, iters)):
            t.fill_(float(args.rank + 1))
            dist.all_reduce(t)
            done()
        want = n * (n + 1) / 2
        if count and (t[0].item() != want or t[-1].item() != want):
            sys.exit("gloo_allreduce: rank %d: %d bytes: %r, want %r" % (args.rank, size, t[0].item(), want))
        # Every rank runs the same number of calls: rank 0 decides, after
        # each, whether to go on (a 1-element broadcast outside the timing).
        us = []
        go = torch.ones(1, dtype=torch.int32, device=device)
        stop_at = time.monotonic() + args.seconds
        for i in range(iters):
            t0 = time.perf_counter_ns()
            dist.all_reduce(t)
            done()
            us.append((time.perf_counter_ns() - t0) / 1000.0)
            if i + 1 >= args.min_iters and (i + 1) % 10 == 0:
                go[0] = 1 if time.monotonic() < stop_at else 0
                dist.broadcast(go, 0)
                if go[0] == 0:
                    break
        if args.rank == 0:
            print("%d %.3f %d" % (size, statistics.median(us), len(us)), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=2)
    p.add_argument("--backend", choices=("gloo", "nccl", "trainit"), default="gloo")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--budget", type=float, default=64 * 2**20, help="bytes to reduce per size (sets ITERS)")
    p.add_argument("--min-iters", type=int, default=5)
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--seconds", type=float, default=3.0, help="stop timing a size after this long")
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("sizes", type=int, nargs="+")
    args = p.parse_args()
    if args.rank is not None:
        rank_main(args)
        return
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [sys.executable, os.path.abspath(__file__), "-n", str(args.n), "--backend", args.backend,
            "--device", args.device, "--budget", str(args.budget),
            "--min-iters", str(args.min_iters), "--max-iters", str(args.max_iters), "--seconds", str(args.seconds),
            "--port", str(port)]
    procs = [subprocess.Popen(base + ["--rank", str(r)] + [str(s) for s in args.sizes],
                              stdout=None if r == 0 else subprocess.DEVNULL) for r in range(args.n)]
    codes = [pr.wait() for pr in procs]
    if any(codes):
        sys.exit("gloo_allreduce: rank exit codes %s" % codes)


if __name__ == "__main__":
    main()
