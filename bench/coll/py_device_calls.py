#!/usr/bin/python3
"""py_device_calls: what the Python module (python/trainit_coll) adds to a
device allreduce.

One rank, a fake-device communicator; the library's trainit_allreduce, as
the module calls it, replaced by a function that returns at once
(libbench_nop_allreduce.so, built beside this script), so that only the
Python side is timed. Three calls, each the median of blocks of calls
alternating with the others:

  - the module's allreduce on device addresses, in place (count=, dtype=,
    out=): comm.allreduce(ptr, out=ptr, count=N, dtype="float32");
  - the same on a device tensor, where python3 has torch: a tensor on
    torch's "meta" device, whose attributes (is_cpu, is_contiguous,
    data_ptr, numel, dtype) torch reads as it reads a CUDA tensor's;
  - the bare function through ctypes, its arguments converted by ctypes
    (what any ctypes binding costs at the least).

Prints one line per call: NAME MEDIAN_US, then the module's cost over the
bare ctypes call. Paths (defaults: build/release's):
$TRAINIT_COLL_LIBRARY, $TRAINIT_COLL_PYTHON, $TRAINIT_FAKEDEV_PLUGIN,
$BENCH_NOP_ALLREDUCE.

    py_device_calls.py [--calls K]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
build = os.path.join(root, "build", "release")
sys.path.insert(0, os.environ.get("TRAINIT_COLL_PYTHON", os.path.join(build, "python")))
os.environ.setdefault("TRAINIT_COLL_LIBRARY", os.path.join(build, "src", "coll", "libtrainit_coll.so"))
plugin = os.environ.get("TRAINIT_FAKEDEV_PLUGIN", os.path.join(build, "src", "coll", "libtrainit_coll_fakedev.so"))
nop_path = os.environ.get("BENCH_NOP_ALLREDUCE", os.path.join(build, "bench", "coll", "libbench_nop_allreduce.so"))

import trainit_coll  # noqa: E402

kBlock = 64


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=100000, help="calls of each kind")
    args = p.parse_args()
    for path in (plugin, nop_path):
        if not os.path.exists(path):
            sys.exit("py_device_calls: %s is missing (build the release preset)" % path)
    try:
        import torch
    except ImportError:
        torch = None
    comm = trainit_coll.Comm("py-device-calls-%d" % os.getpid(), 0, 1, backend=plugin)
    nop = ctypes.CDLL(nop_path).bench_nop_allreduce
    lib = trainit_coll._load()
    nop.argtypes, nop.restype = lib.trainit_allreduce.argtypes, lib.trainit_allreduce.restype
    lib.trainit_allreduce = nop  # the module's ctypes path
    if trainit_coll._fast is not None:  # and its C part
        trainit_coll._fast.bind(ctypes.cast(nop, ctypes.c_void_p).value)
    handle, ptr, count = comm._c, 1 << 20, 1024
    f32, total = trainit_coll.DTYPES["float32"], trainit_coll.OPS["sum"]
    calls = {
        "module, addresses": lambda: comm.allreduce(ptr, out=ptr, count=count, dtype="float32"),
        "bare ctypes": lambda: nop(handle, ptr, ptr, count, f32, total),
    }
    if torch is not None:
        t = torch.empty(count, device="meta")
        calls["module, a device tensor"] = lambda: comm.allreduce(t, out=t)
    times = {name: [] for name in calls}
    clock = time.perf_counter_ns
    for _ in range((args.calls + kBlock - 1) // kBlock):
        for name, call in calls.items():
            took = times[name]
            for _ in range(kBlock):
                t0 = clock()
                call()
                took.append(clock() - t0)
    med = {name: statistics.median(took) / 1e3 for name, took in times.items()}
    print("C part: %s; torch: %s" % ("yes" if trainit_coll._fast is not None else "no (ctypes alone)",
                                      torch.__version__ if torch is not None else "absent"))
    for name, us in med.items():
        print("%-24s %.3f us" % (name, us))
    for name, us in med.items():
        if name.startswith("module"):
            print("%s - bare ctypes: %.3f us" % (name, us - med["bare ctypes"]))
    comm.close()


if __name__ == "__main__":
    main()
