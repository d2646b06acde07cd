#!/usr/bin/python3
"""py_allreduce: what the Python module (python/trainit_coll) adds to a call.

Allreduce of numpy float32 (sum), in place (comm.allreduce(a, out=a)), for
each size in bytes on the command line, timed one by one on rank 0
(time.perf_counter_ns around the call), in blocks of 16 calls alternating
with blocks of the same call made straight through ctypes (the library's
function with the address, count and types computed once: what any ctypes
binding costs at the least). The difference of the medians is the module's
own cost per call; with -n 1 (no peer to wait for) it is that cost alone.
Rank 0 prints one line per size:

    BYTES MODULE_US BARE_US MODULE_MINUS_BARE_US CALLS_EACH

Under trainit (TRAINIT_COLL_FD set: `trainit --mode torchrun
--nproc-per-node 2 -- /usr/bin/python3 bench/coll/py_allreduce.py 8 1048576`)
each rank joins the job's arena; otherwise `-n N` forks N ranks of one
standalone communicator (what bench/coll/compare.sh runs). The library:
$TRAINIT_COLL_LIBRARY, else build/release's; the module: the package the
build made ($TRAINIT_COLL_PYTHON, else build/release/python: the module and
its C part, trainit_coll._fast), else python/ (the module alone, ctypes).

    py_allreduce.py [-n N] [--budget BYTES] [--max-iters K] SIZE...
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
# The built package (the module and its C part), else the module alone.
sys.path.insert(0, os.environ.get("TRAINIT_COLL_PYTHON", os.path.join(root, "build", "release", "python")))
sys.path.append(os.path.join(root, "python"))
os.environ.setdefault("TRAINIT_COLL_LIBRARY", os.path.join(root, "build", "release", "src", "coll",
                                                           "libtrainit_coll.so"))

import numpy as np  # noqa: E402

import trainit_coll  # noqa: E402


kBlock = 16


def bench(comm, args):
    lib = trainit_coll._load()
    handle = comm._c
    f32, total = trainit_coll.DTYPES["float32"], trainit_coll.OPS["sum"]
    for size in args.sizes:
        a = np.full(max(size // 4, 1), 1.0, dtype=np.float32)
        ptr, count = a.ctypes.data, a.size
        iters = int(min(max(args.budget / size, 64), args.max_iters))
        for _ in range(10):  # warm-up: both paths, the buffer's pages, the spin budget
            comm.allreduce(a, out=a)
            lib.trainit_allreduce(handle, ptr, ptr, count, f32, total)
        module, bare = [], []
        clock = time.perf_counter_ns
        # Blocks of calls, alternating: within a block every rank makes the
        # same kind of call, so no rank's wait for its peer lands on one
        # kind more than the other; the blocks share the machine's moods.
        for _ in range((iters + kBlock - 1) // kBlock):
            for _ in range(kBlock):
                t0 = clock()
                comm.allreduce(a, out=a)
                module.append(clock() - t0)
            for _ in range(kBlock):
                t0 = clock()
                rc = lib.trainit_allreduce(handle, ptr, ptr, count, f32, total)
                bare.append(clock() - t0)
                if rc != 0:
                    sys.exit("py_allreduce: the bare call failed: %d" % rc)
        a.fill(1.0)
        comm.allreduce(a, out=a)
        if a[0] != comm.size or a[-1] != comm.size:
            sys.exit("py_allreduce: rank %d: %d bytes: %r, want %d" % (comm.rank, size, a[0], comm.size))
        if comm.rank == 0:
            m, b = statistics.median(module) / 1e3, statistics.median(bare) / 1e3
            print("%d %.3f %.3f %.3f %d" % (size, m, b, m - b, iters), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=2, help="ranks to fork when not under trainit")
    p.add_argument("--budget", type=float, default=256 << 20, help="bytes per size: calls = budget / size")
    p.add_argument("--max-iters", type=int, default=20000)
    p.add_argument("sizes", type=int, nargs="+")
    args = p.parse_args()
    if os.environ.get("TRAINIT_COLL_FD"):
        with trainit_coll.Comm.from_env() as comm:
            bench(comm, args)
        return
    name = "py-allreduce-%d" % os.getpid()
    pids = []
    for r in range(args.n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                with trainit_coll.Comm(name, r, args.n) as comm:
                    bench(comm, args)
                code = 0
            finally:
                sys.stdout.flush()
                os._exit(code)
        pids.append(pid)
    failed = [pid for pid in pids if os.waitpid(pid, 0)[1] != 0]
    if failed:
        sys.exit("py_allreduce: %d rank(s) failed" % len(failed))


if __name__ == "__main__":
    main()
