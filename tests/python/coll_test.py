#!/usr/bin/python3
"""The Python module trainit_coll over the built libtrainit_coll.so.

    tests/python/coll_test.py CASE     (TRAINIT_COLL_LIBRARY: the .so;
                                        PYTHONPATH: python/)

Each CASE forks its ranks (os.fork, a unique communicator name per group),
which join with Comm(name, rank, size) and check their results themselves
against a reference computed here in the library's documented order (ranks
folded 0, 1, … n−1; f16/bf16 accumulated in f32), and bitwise equal across
ranks. Exit 0: passed; 1: failed; 77: skipped (numpy or torch missing).
No pytest: Debian's python3 and the standard library are enough.
"""
import errno
import hashlib
import os
import signal
import sys
import time
import traceback

import trainit_coll as tc

SKIP = 77
_group = [0]


def host_comm(name, rank, n):
    return [tc.Comm(name, rank, n)]


def ranks(n, body, timeout=20.0, comms=host_comm):
    """Runs body(*comms(name, rank, n)) in n forked ranks (one new host
    communicator each by default); raises if a rank failed or did not
    finish within timeout seconds."""
    _group[0] += 1
    name = "pytest-%d-%d" % (os.getpid(), _group[0])
    pids = []
    for r in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                opened = comms(name, r, n)
                try:
                    body(*opened)
                finally:
                    for comm in opened:
                        comm.close()
                code = 0
            except BaseException:  # noqa: B036 (the child reports and exits)
                sys.stderr.write("rank %d of %d:\n%s" % (r, n, traceback.format_exc()))
            finally:
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    deadline = time.monotonic() + timeout
    status = {}
    while len(status) < n:
        for pid in pids:
            if pid not in status:
                got, st = os.waitpid(pid, os.WNOHANG)
                if got == pid:
                    status[pid] = st
        if time.monotonic() > deadline:
            for pid in pids:
                if pid not in status:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            raise AssertionError("%d ranks: still running after %.0f s (a hang)" % (n, timeout))
        time.sleep(0.002)
    return [status[p] for p in pids]


def check_ranks(n, body, timeout=20.0, comms=host_comm):
    st = ranks(n, body, timeout, comms)
    bad = [(r, s) for r, s in enumerate(st) if not (os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0)]
    if bad:
        raise AssertionError("%d ranks: rank(s) failed: %s" % (n, bad))


def same_on_every_rank(comm, data):
    """Raises unless data's bytes are identical on every rank."""
    import array
    digest = array.array("B", hashlib.sha256(bytes(memoryview(data).cast("B"))).digest())
    every = comm.allgather(digest)
    for r in range(comm.size):
        if every[32 * r:32 * (r + 1)] != digest:
            raise AssertionError("rank %d's result differs from rank %d's" % (r, comm.rank))


# --- numpy -------------------------------------------------------------------

NP_TYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]
COUNTS = [0, 1, 7, 4097, 300007]  # inline (≤ 48 B), one-shot, pipelined


def np_input(np, dtype, count, rank, op, seed=0):
    rng = np.random.default_rng(1000 * seed + 17 * rank + count)
    if dtype.startswith("float"):
        lo, hi = (0.5, 1.5) if op == "prod" else (-100.0, 100.0)
        return rng.uniform(lo, hi, count).astype(dtype)
    lo, hi = (1, 3) if op == "prod" else (0, 40)
    return rng.integers(lo, hi, count).astype(dtype)


def np_reference(np, inputs, dtype, op):
    """The fold in rank order, in the type the library accumulates in."""
    acc_type = "float32" if dtype == "float16" else dtype
    acc = inputs[0].astype(acc_type)
    for x in inputs[1:]:
        x = x.astype(acc_type)
        if op == "sum":
            acc = acc + x
        elif op == "prod":
            acc = acc * x
        elif op == "min":
            acc = np.minimum(acc, x)
        else:
            acc = np.maximum(acc, x)
    return acc.astype(dtype)


def equal(np, got, want, what):
    if got.dtype != want.dtype or got.shape != want.shape:
        raise AssertionError("%s: %s%s, want %s%s" % (what, got.dtype, got.shape, want.dtype, want.shape))
    if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
        bad = np.flatnonzero(got != want)
        raise AssertionError("%s: %d elements differ, first at %d: %r, want %r" %
                             (what, bad.size, bad[0], got.flat[bad[0]], want.flat[bad[0]]))


def need_numpy():
    try:
        import numpy
        return numpy
    except ImportError:
        print("numpy is not importable: skipped")
        sys.exit(SKIP)


def numpy_allreduce_matches_the_fold(np):
    """The body of the allreduce-on-numpy cases: every type, op and count,
    into a new array, into out and in place, against the reference."""

    def body(comm):
        n = comm.size
        for dtype in NP_TYPES:
            for op in ["sum", "prod", "min", "max"]:
                for count in COUNTS:
                    inputs = [np_input(np, dtype, count, r, op) for r in range(n)]
                    want = np_reference(np, inputs, dtype, op)
                    what = "allreduce %s %s count %d, %d ranks" % (dtype, op, count, n)
                    mine = inputs[comm.rank].copy()
                    got = comm.allreduce(mine, op=op)
                    equal(np, mine, inputs[comm.rank], what + ": input changed")
                    equal(np, got, want, what)
                    out = np.full(count, 7, dtype=dtype)
                    assert comm.allreduce(mine, op=op, out=out) is out
                    equal(np, out, want, what + " into out")
                    assert comm.allreduce(mine, op=op, out=mine) is mine
                    equal(np, mine, want, what + " in place")
                    same_on_every_rank(comm, got)
        # A 2-D array keeps its shape.
        m = np.arange(12, dtype=np.float32).reshape(3, 4) + comm.rank
        got = comm.allreduce(m)
        equal(np, got, np_reference(np, [np.arange(12, dtype=np.float32).reshape(3, 4) + r for r in range(n)],
                                    "float32", "sum"), "allreduce 3x4")

    for n in (2, 3):
        check_ranks(n, body)


def case_allreduce_on_numpy_is_bitwise_the_rank_order_fold_for_every_dtype_op_and_count():
    numpy_allreduce_matches_the_fold(need_numpy())


def case_allreduce_on_numpy_through_ctypes_alone_is_the_same_fold():
    """The module without its C part (an interpreter it was not built for)."""
    np = need_numpy()
    tc._fast = None
    numpy_allreduce_matches_the_fold(np)


class _CountingFast:
    """Stands in for tc._fast: counts the calls and what they returned."""

    def __init__(self, real):
        self.real, self.calls, self.declined = real, 0, 0

    def allreduce(self, *args):
        self.calls += 1
        rc = self.real.allreduce(*args)
        self.declined += rc is None
        return rc


def case_numpy_allreduce_with_out_takes_the_c_path_where_it_is_built():
    np = need_numpy()
    if os.environ.get("TRAINIT_COLL_FAST_BUILT") == "1":
        assert tc._fast is not None, "the build made trainit_coll._fast, but the module did not import it"
    if tc._fast is None:
        print("trainit_coll._fast is not built for this interpreter: skipped")
        sys.exit(SKIP)
    tc._load()  # bound to the library before the stand-in comes
    counting = tc._fast = _CountingFast(tc._fast)

    def body(comm):
        a = np.full(1000, comm.rank + 1, dtype=np.float32)
        comm.allreduce(a)  # the first numpy call takes the general path, which learns numpy
        before = counting.calls
        for _ in range(3):
            assert comm.allreduce(a, out=a) is a
        b = np.empty_like(a)
        assert comm.allreduce(a, out=b) is b
        frozen = np.ones(7, dtype=np.int64)
        frozen.flags.writeable = False  # read-only input, written elsewhere: still the C path
        got = np.empty(7, dtype=np.int64)
        comm.allreduce(frozen, out=got)
        assert counting.calls - before == 5 and counting.declined == 0, (counting.calls, counting.declined)
        n = comm.size
        assert a[0] == (n * (n + 1) // 2) * n ** 2 and b[0] == a[0] * n and list(got) == [n] * 7, (a[0], b[0], got)

    check_ranks(2, body)


def case_arrays_the_c_path_declines_raise_einval_on_every_rank_and_keep_them_in_step():
    np = need_numpy()

    def body(comm):
        a = np.arange(8, dtype=np.float32)
        frozen = a.copy()
        frozen.flags.writeable = False
        declined = {
            "a strided input": (lambda: comm.allreduce(a[::2], out=np.empty(4, np.float32)), "non-contiguous"),
            "a strided out": (lambda: comm.allreduce(a[:4], out=a[::2]), "non-contiguous"),
            "Fortran order": (lambda: comm.allreduce(np.asfortranarray(a.reshape(2, 4)),
                                                     out=np.empty((2, 4), np.float32)), "non-contiguous"),
            "the other byte order": (lambda: comm.allreduce(a.astype(">f4"), out=np.empty(8, ">f4")), ">f4"),
            "read-only, in place": (lambda: comm.allreduce(frozen, out=frozen), "read-only"),
            "out of another type of the same size": (lambda: comm.allreduce(a, out=np.empty(8, np.int32)),
                                                     "out is int32"),
            "a short out": (lambda: comm.allreduce(a, out=np.empty(4, np.float32)), "4 elements"),
            "int8": (lambda: comm.allreduce(np.ones(4, np.int8), out=np.empty(4, np.int8)), "int8"),
            "bool": (lambda: comm.allreduce(np.ones(4, bool), out=np.empty(4, bool)), "bool"),
        }
        for what, (call, detail) in declined.items():
            e = expect_error(call, errno.EINVAL, what)
            assert detail in str(e), "%s: %s" % (what, e)
        # Still in step, and on the C path again.
        assert comm.allreduce(a, out=a) is a and list(a) == [comm.size * i for i in range(8)], a
        comm.barrier()

    check_ranks(2, body)


def case_numpy_allreduce_lets_the_ranks_other_threads_run_while_it_waits():
    import threading
    np = need_numpy()

    def body(comm):
        a = np.ones(1 << 16, dtype=np.float32)
        comm.allreduce(a, out=a)  # both paths warmed up
        if comm.rank == 1:
            time.sleep(0.3)  # rank 0 waits in its call meanwhile
        ticks, stop = [0], threading.Event()

        def tick():
            while not stop.is_set():
                ticks[0] += 1

        sys.setswitchinterval(0.001)
        t = threading.Thread(target=tick)
        t.start()
        time.sleep(0.05)  # the thread's pace while this one sleeps
        before = ticks[0]
        t0 = time.monotonic()
        comm.allreduce(a, out=a)
        waited, during = time.monotonic() - t0, ticks[0] - before
        stop.set()
        t.join()
        if comm.rank == 0:
            # Holding the interpreter's lock, the call would leave the thread
            # about one switch interval (1 ms, after the call returned): a
            # fiftieth of the 50 ms it counted before, where it should count
            # through the whole wait.
            assert waited > 0.2 and during > before, "waited %.3f s; the thread counted %d, %d in 50 ms before" % (
                waited, during, before)

    check_ranks(2, body)


def case_reduce_scatter_allgather_broadcast_reduce_on_numpy_match_the_reference():
    np = need_numpy()

    def body(comm):
        n, me = comm.size, comm.rank
        for dtype in NP_TYPES:
            for per in [0, 1, 7, 4097, 100003]:
                inputs = [np_input(np, dtype, per * n, r, "sum", 1) for r in range(n)]
                full = np_reference(np, inputs, dtype, "sum")
                what = "%s, %d per rank, %d ranks" % (dtype, per, n)
                got = comm.reduce_scatter(inputs[me])
                equal(np, got, full[me * per:(me + 1) * per], "reduce_scatter " + what)
                out = np.empty(per, dtype=dtype)
                assert comm.reduce_scatter(inputs[me], op="max", out=out) is out
                equal(np, out, np_reference(np, inputs, dtype, "max")[me * per:(me + 1) * per],
                      "reduce_scatter max " + what)

                parts = [np_input(np, dtype, per, r, "sum", 2) for r in range(n)]
                got = comm.allgather(parts[me])
                equal(np, got, np.stack(parts), "allgather " + what)
                flat = np.zeros(per * n, dtype=dtype)
                assert comm.allgather(parts[me], out=flat) is flat
                equal(np, flat, np.concatenate(parts), "allgather into a flat out " + what)

                root = (per + 1) % n
                buf = parts[me].copy()
                assert comm.broadcast(buf, root=root) is buf
                equal(np, buf, parts[root], "broadcast from %d %s" % (root, what))

                got = comm.reduce(parts[me], op="min", root=root)
                if me == root:
                    equal(np, got, np_reference(np, parts, dtype, "min"), "reduce min to %d %s" % (root, what))
                else:
                    assert got is None, "reduce returned %r off the root" % (got,)
        comm.barrier()

    for n in (2, 3, 4):
        check_ranks(n, body)


# --- torch -------------------------------------------------------------------

def case_torch_cpu_tensors_including_bfloat16_reduce_gather_and_broadcast():
    need_numpy()
    import importlib.util
    # Imported in the ranks only: nothing of torch's runs before the fork.
    if importlib.util.find_spec("torch") is None:
        print("torch is not importable: skipped")
        sys.exit(SKIP)

    def body(comm):
        import torch
        torch.set_num_threads(1)
        n, me = comm.size, comm.rank
        types = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8]
        for dtype in types:
            floating = dtype.is_floating_point
            for count in [0, 1, 7, 4097, 300007]:
                what = "%s count %d, %d ranks" % (dtype, count, n)
                gen = [torch.Generator().manual_seed(31 * r + count) for r in range(n)]
                if floating:
                    inputs = [(torch.rand(count, generator=g, dtype=torch.float64) * 200 - 100).to(dtype) for g in gen]
                else:
                    inputs = [torch.randint(0, 40, (count,), generator=g, dtype=torch.int64).to(dtype) for g in gen]
                acc_type = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
                want = inputs[0].to(acc_type)
                for x in inputs[1:]:
                    want = want + x.to(acc_type)
                want = want.to(dtype)
                mine = inputs[me].clone()
                got = comm.allreduce(mine)
                assert isinstance(got, torch.Tensor) and got.dtype == dtype, what
                assert torch.equal(mine, inputs[me]), what + ": input changed"
                assert torch.equal(got, want), "%s: %r, want %r" % (what, got[:4], want[:4])
                assert comm.allreduce(mine, out=mine) is mine
                assert torch.equal(mine, want), what + " in place"
                same_on_every_rank(comm, got.view(torch.uint8).numpy())

                per = count // n
                part = comm.reduce_scatter(inputs[me][:per * n])
                assert torch.equal(part, want[me * per:(me + 1) * per]), "reduce_scatter " + what
                every = comm.allgather(inputs[me])
                assert every.shape == (n, count) and torch.equal(every, torch.stack(inputs)), "allgather " + what
                buf = inputs[me].clone()
                comm.broadcast(buf, root=n - 1)
                assert torch.equal(buf, inputs[n - 1]), "broadcast " + what
        # A 2-D slice that is not contiguous is refused on every rank, in step.
        m = torch.zeros(4, 4)
        try:
            comm.allreduce(m[:, 1])
            raise AssertionError("a non-contiguous tensor was accepted")
        except tc.CollError as e:
            assert e.errno == errno.EINVAL and "non-contiguous" in str(e), e
        comm.barrier()

    # 3 ranks: odd splits; each rank imports torch (about 1 s). 45 s to call
    # it a hang (within ctest's 60): under ASan the case takes 10-16 s alone,
    # past 20 beside another test on a slow day's 2 cores (a CI rehearsal),
    # 30 beside three busy loops.
    check_ranks(3, body, timeout=45.0)


# --- without numpy -----------------------------------------------------------

def case_plain_buffers_work_without_numpy():
    import array
    # Nothing here imported numpy: the module works from the standard library.
    assert "numpy" not in sys.modules, "numpy was imported"

    def body(comm):
        n, me = comm.size, comm.rank
        a = array.array("d", [me + 0.5 * i for i in range(9)])
        got = comm.allreduce(a)
        assert isinstance(got, array.array) and got.typecode == "d"
        assert list(got) == [sum(r + 0.5 * i for r in range(n)) for i in range(9)], got
        b = array.array("q", [me * 10 + i for i in range(5)])
        comm.allreduce(b, op="max", out=b)
        assert list(b) == [(n - 1) * 10 + i for i in range(5)], b
        c = bytearray([me] * 3)
        comm.broadcast(c, root=1)
        assert c == bytearray([1] * 3), c
        every = comm.allgather(array.array("i", [me, -me]))
        assert list(every) == [v for r in range(n) for v in (r, -r)], every
        assert comm.allreduce(bytes([2, 3])) == bytearray([2 * n, 3 * n])

    check_ranks(3, body)


def case_allreduce_copies_and_allocates_nothing_of_the_buffers_size():
    import array
    import tracemalloc
    np = need_numpy()
    size = 1 << 20  # bytes of every buffer below; the module may allocate far less than that

    def peak_of(call):
        call()  # the first call of a kind may set up what later calls reuse
        tracemalloc.start()
        try:
            call()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def body(comm):
        grad = np.ones(size // 4, dtype=np.float32)
        frozen = np.ones(size // 4, dtype=np.float32)
        frozen.flags.writeable = False
        into = np.empty_like(frozen)
        doubles = array.array("d", bytes(size))
        raw = bytes(size)
        sums = bytearray(size)
        cases = {
            "numpy in place": lambda: comm.allreduce(grad, out=grad),
            "numpy, a read-only input into out": lambda: comm.allreduce(frozen, out=into),
            "array.array in place": lambda: comm.allreduce(doubles, out=doubles),
            "bytes into a bytearray": lambda: comm.allreduce(raw, out=sums),
        }
        for what, call in cases.items():
            peak = peak_of(call)
            assert peak < size // 16, "%s: %d bytes allocated during a call on %d bytes" % (what, peak, size)
        assert into[0] == comm.size and sums[0] == 0, (into[0], sums[0])

    check_ranks(2, body)


# --- errors ------------------------------------------------------------------

def expect_error(fn, err, what, cls=tc.CollError):
    try:
        fn()
    except cls as e:
        assert isinstance(e, OSError) and e.errno == err, "%s: %r" % (what, e)
        return e
    raise AssertionError("%s: no error" % what)


def case_a_root_past_a_c_int_raises_einval_on_every_rank_not_another_root():
    """A root that does not fit the library's int is refused, on every rank,
    where it used to be cut down to one that fits (2**32 became root 0)."""
    import array

    def body(comm):
        for root in (2 ** 32, -2 ** 32, 2 ** 31):
            a = array.array("f", [comm.rank + 1.0] * 4)
            expect_error(lambda: comm.broadcast(a, root=root), errno.EINVAL, "broadcast from root %d" % root)
            assert list(a) == [comm.rank + 1.0] * 4, a
            expect_error(lambda: comm.reduce(a, root=root), errno.EINVAL, "reduce to root %d" % root)
        assert list(comm.broadcast(a, root=1)) == [2.0] * 4  # still in step

    check_ranks(2, body)


def case_bad_op_or_mismatched_dtype_raises_einval_on_every_rank_and_keeps_them_in_step():
    np = need_numpy()

    def body(comm):
        me = comm.rank
        x = np.ones(5, dtype=np.float32)
        e = expect_error(lambda: comm.allreduce(x, op="xor"), errno.EINVAL, "unknown op")
        assert "xor" in str(e) and "invalid argument" in str(e), e
        # Only rank 0 passes a bad op: the others, whose call is fine, fail too.
        expect_error(lambda: comm.allreduce(x, op="avg" if me == 0 else "sum"), errno.EINVAL, "bad op on rank 0")
        # Ranks that disagree on the type.
        y = x.astype(np.float64) if me == 1 else x
        expect_error(lambda: comm.allreduce(y), errno.EINVAL, "float64 on rank 1, float32 elsewhere")
        # Ranks that disagree on the count (each path: inline, one-shot, chunked).
        for count in (3, 1000, 200000):
            expect_error(lambda: comm.allreduce(np.ones(count + me, dtype=np.float32)), errno.EINVAL,
                         "count mismatch near %d" % count)
        # An out of another type or size, on one rank only.
        out = np.empty(5, dtype=np.int32 if me == 0 else np.float32)
        expect_error(lambda: comm.allreduce(x, out=out), errno.EINVAL, "int32 out for float32 on rank 0")
        expect_error(lambda: comm.allreduce(x, out=np.empty(4 + me, np.float32)), errno.EINVAL, "short out")
        # Unsupported types and objects.
        expect_error(lambda: comm.allreduce(np.ones(3, dtype=np.complex64)), errno.EINVAL, "complex64")
        expect_error(lambda: comm.allreduce([1.0, 2.0]), errno.EINVAL, "a list")
        expect_error(lambda: comm.broadcast(x, root=comm.size), errno.EINVAL, "root out of range")
        expect_error(lambda: comm.reduce_scatter(np.ones(comm.size + 1, np.float32)), errno.EINVAL,
                     "a count that does not split")
        # Still in step: the next calls work.
        got = comm.allreduce(np.full(3, me, dtype=np.int64))
        assert list(got) == [sum(range(comm.size))] * 3, got
        comm.barrier()

    check_ranks(3, body)


def case_killed_peer_raises_connection_aborted_on_the_others_within_a_second():
    np = need_numpy()

    def body(comm):
        if comm.rank == 2:
            comm.barrier()
            time.sleep(0.05)  # the others are in their allreduce, waiting for this rank
            os.kill(os.getpid(), signal.SIGKILL)
        comm.barrier()
        t0 = time.monotonic()
        try:
            comm.allreduce(np.ones(1 << 16, dtype=np.float32))
            raise AssertionError("allreduce returned although rank 2 died")
        except ConnectionAbortedError as e:
            dt = time.monotonic() - t0 - 0.05
            assert isinstance(e, tc.CollAbortedError) and isinstance(e, tc.CollError), repr(e)
            assert e.errno == errno.ECONNABORTED and "peer rank died" in str(e), repr(e)
            print("rank %d: %r after %.1f ms past the kill" % (comm.rank, e, 1000 * dt), flush=True)
            if dt > 1.0:
                raise AssertionError("the error took %.0f ms past the kill" % (1000 * dt))
        # Every later call fails at once too.
        expect_error(comm.barrier, errno.ECONNABORTED, "barrier after the abort", tc.CollAbortedError)

    st = ranks(3, body)
    assert os.WIFSIGNALED(st[2]) and os.WTERMSIG(st[2]) == signal.SIGKILL, st
    assert all(os.WIFEXITED(s) and os.WEXITSTATUS(s) == 0 for s in st[:2]), st


def case_closed_comm_from_env_outside_trainit_and_a_missing_library_raise():
    # Outside trainit there is no arena in the environment.
    env = {k: os.environ.pop(k) for k in ("TRAINIT_COLL_FD", "TRAINIT_LOCAL_RANK", "TRAINIT_LOCAL_SIZE")
           if k in os.environ}
    expect_error(tc.Comm.from_env, errno.EINVAL, "from_env outside trainit")
    os.environ.update(env)
    expect_error(lambda: tc.Comm("x", 2, 2), errno.EINVAL, "rank out of range")
    with tc.Comm("pytest-solo-%d" % os.getpid(), 0, 1) as comm:
        assert (comm.rank, comm.size) == (0, 1)
        assert bytes(comm.allreduce(bytearray(b"\x01\x02"))) == b"\x01\x02"
    expect_error(comm.barrier, errno.EINVAL, "a closed communicator")
    comm.close()  # again: nothing
    assert tc.library_path() == os.environ["TRAINIT_COLL_LIBRARY"], tc.library_path()
    # A TRAINIT_COLL_LIBRARY that does not exist is named in the ImportError.
    import subprocess
    r = subprocess.run([sys.executable, "-c", "import trainit_coll as t; t.Comm('a', 0, 1)"],
                       env=dict(os.environ, TRAINIT_COLL_LIBRARY="/nonexistent/libtrainit_coll.so"),
                       capture_output=True, text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr and "/nonexistent/libtrainit_coll.so" in r.stderr, r


# --- device communicators (the fake device) -----------------------------------
#
# The fake device plugin's "device memory" is host-mapped memfd: its
# addresses go through the module's address form (ints), and device_copy
# moves data in and out. The reference for each call is the same call on a
# host communicator of the same ranks.

def fakedev():
    path = os.environ.get("TRAINIT_FAKEDEV_PLUGIN")
    if not path or not os.path.exists(path):
        raise AssertionError("TRAINIT_FAKEDEV_PLUGIN (the fake device plugin, set by ctest) is %r" % path)
    return path


def device_and_host_comms(name, rank, n):
    """A fake-device communicator and a host one, among the same ranks."""
    return [tc.Comm(name + "-dev", rank, n, backend=fakedev()), tc.Comm(name + "-host", rank, n)]


DEVICE_TYPES = [("f", "float32"), ("i", "int32")]
DEVICE_COUNTS = [0, 1, 7, 4097, 100003]  # the last runs past the 64 KiB staging: in pieces


def values(code, count, rank, seed):
    import array
    import random
    rng = random.Random(1000 * seed + 17 * rank + count)
    if code == "f":
        return array.array("f", [rng.uniform(-100.0, 100.0) for _ in range(count)])
    return array.array("i", [rng.randint(-40, 40) for _ in range(count)])


class Device:
    """Device buffers of one rank, freed on exit: put() copies host data in,
    get() copies it out."""

    def __init__(self, comm):
        self.comm, self.held = comm, []

    def alloc(self, nbytes):
        ptr = self.comm.device_alloc(max(nbytes, 1))
        self.held.append(ptr)
        return ptr

    def put(self, host):
        ptr = self.alloc(len(host) * host.itemsize)
        self.comm.device_copy(ptr, host)
        return ptr

    def get(self, ptr, code, count):
        import array
        host = array.array(code, bytes(count * array.array(code).itemsize))
        self.comm.device_copy(host, ptr)
        return host

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for ptr in self.held:
            self.comm.device_free(ptr)
        return False


def same_bits(got, want, what):
    if got.tobytes() != want.tobytes():
        bad = next(i for i in range(len(want)) if got[i] != want[i]) if len(got) == len(want) else None
        raise AssertionError("%s: differs from the host communicator's result (%d vs %d elements; first at %r)" %
                             (what, len(got), len(want), bad))


def device_allreduce_and_broadcast(dev, host):
    n, me = dev.size, dev.rank
    with Device(dev) as d:
        for code, dtype in DEVICE_TYPES:
            for count in DEVICE_COUNTS:
                mine = values(code, count, me, 0)
                src = d.put(mine)
                out = d.alloc(len(mine) * mine.itemsize)
                for op in ("sum", "prod", "min", "max"):
                    what = "allreduce %s %s count %d, %d ranks" % (dtype, op, count, n)
                    want = host.allreduce(mine, op=op)
                    assert dev.allreduce(src, op=op, out=out, count=count, dtype=dtype) == out
                    same_bits(d.get(out, code, count), want, what)
                    same_bits(d.get(src, code, count), mine, what + ": input changed")
                    inplace = d.put(mine)
                    dev.allreduce(inplace, op=op, out=inplace, count=count, dtype=dtype)
                    same_bits(d.get(inplace, code, count), want, what + " in place")
                root = count % n
                buf = d.put(mine)
                assert dev.broadcast(buf, root=root, count=count, dtype=dtype) == buf
                want = host.broadcast(values(code, count, me, 0), root=root)
                same_bits(d.get(buf, code, count), want, "broadcast %s count %d from %d" % (dtype, count, root))
        dev.barrier()


def device_reduce_scatter_and_allgather(dev, host):
    import array
    n, me = dev.size, dev.rank
    with Device(dev) as d:
        for code, dtype in DEVICE_TYPES:
            for per in DEVICE_COUNTS:
                what = "%s, %d per rank, %d ranks" % (dtype, per, n)
                mine = values(code, per * n, me, 1)
                want = host.reduce_scatter(mine, op="max", out=array.array(code, bytes(per * mine.itemsize)))
                src = d.put(mine)
                out = d.alloc(per * mine.itemsize)
                dev.reduce_scatter(src, op="max", out=out, count=per * n, dtype=dtype)
                same_bits(d.get(out, code, per), want, "reduce_scatter " + what)
                dev.reduce_scatter(src, op="max", out=src, count=per * n, dtype=dtype)
                same_bits(d.get(src, code, per), want, "reduce_scatter in place " + what)

                part = values(code, per, me, 2)
                want = host.allgather(part)
                src = d.put(part)
                out = d.alloc(per * n * part.itemsize)
                dev.allgather(src, out=out, count=per, dtype=dtype)
                same_bits(d.get(out, code, per * n), want, "allgather " + what)
                # In place: this rank's part already at its place in the whole.
                whole = array.array(code, bytes(per * n * part.itemsize))
                whole[me * per:(me + 1) * per] = part
                buf = d.put(whole)
                dev.allgather(buf, out=buf, count=per, dtype=dtype)
                same_bits(d.get(buf, code, per * n), want, "allgather in place " + what)
        dev.barrier()


def case_device_allreduce_and_broadcast_on_addresses_equal_the_host_results():
    os.environ["TRAINIT_COLL_DEVICE_STAGING"] = "65536"
    for n in (2, 3):
        check_ranks(n, device_allreduce_and_broadcast, 60.0, device_and_host_comms)


def case_device_reduce_scatter_and_allgather_on_addresses_equal_the_host_results():
    os.environ["TRAINIT_COLL_DEVICE_STAGING"] = "65536"
    for n in (2, 3):
        check_ranks(n, device_reduce_scatter_and_allgather, 60.0, device_and_host_comms)


def case_device_stream_ordered_calls_return_at_once_and_query_says_when_done():
    import array

    def body(dev, host):
        ptr = dev.device_alloc(4 * 4096)
        try:
            dev.device_copy(ptr, array.array("i", [dev.rank + 1] * 4096))
            dev.set_stream(1)
            for _ in range(4):
                dev.allreduce(ptr, out=ptr, count=4096, dtype="int32")
            deadline = time.monotonic() + 20.0
            while not dev.query():
                assert time.monotonic() < deadline, "stream-ordered calls still running after 20 s"
                time.sleep(0.0005)
            dev.set_stream(None)
            got = array.array("i", bytes(4 * 4096))
            dev.device_copy(got, ptr)
            want = sum(range(1, dev.size + 1)) * dev.size ** 3
            assert got[0] == want and got[4095] == want, (got[0], got[4095], want)
            expect_error(lambda: host.set_stream(1), errno.EOPNOTSUPP, "a stream on a host communicator")
        finally:
            dev.device_free(ptr)

    check_ranks(3, body, 30.0, device_and_host_comms)


def case_device_register_makes_a_large_allreduce_in_place_zero_copy_and_equal_to_the_host():
    import array
    os.environ["TRAINIT_COLL_DEVICE_ONE_SHOT"] = "4096"
    count = 50001

    def body(dev, host):
        ptr = dev.device_alloc(4 * count)
        try:
            data = values("f", count, dev.rank, 5)
            dev.device_copy(ptr, data)
            dev.register(ptr, 4 * count)
            dev.allreduce(ptr, out=ptr, count=count, dtype="float32")
            expect_error(lambda: dev.register(ptr, 4 * count), errno.EINVAL, "a window registered twice")
            dev.deregister(ptr)
            got = array.array("f", bytes(4 * count))
            dev.device_copy(got, ptr)
            host.allreduce(data, out=data)
            same_bits(got, data, "allreduce in a window")
            expect_error(lambda: host.register(0, 4), errno.EOPNOTSUPP, "a window on a host communicator")
            # A wrong argument on one rank alone is EINVAL on every rank, in
            # step: the next registration pairs with the peers' next one.
            bad = {0: lambda: dev.register("0", 4), 1: lambda: dev.register(ptr, 2 ** 64)}
            expect_error(bad[dev.rank], errno.EINVAL, "a bad register on one rank")
            bad = {0: lambda: dev.register(ptr, True), 1: lambda: dev.register(ptr, 4 * count)}
            expect_error(bad[dev.rank], errno.EINVAL, "a bool for a size")
            bad = {0: lambda: dev.deregister(None), 1: lambda: dev.deregister(ptr)}
            dev.register(ptr, 4 * count)
            expect_error(bad[dev.rank], errno.EINVAL, "a bad deregister on one rank")
            dev.deregister(ptr)
        finally:
            dev.device_free(ptr)

    check_ranks(2, body, 30.0, device_and_host_comms)


def case_device_register_makes_large_allgather_reduce_scatter_broadcast_and_allreduce_out_of_place_equal_to_the_host():
    import array
    os.environ["TRAINIT_COLL_DEVICE_ONE_SHOT"] = "4096"
    count = 20001  # a rank's part, past the bound

    def body(dev, host):
        n = dev.size
        window = dev.device_alloc(4 * count * n)
        part = dev.device_alloc(4 * count)
        try:
            dev.register(window, 4 * count * n)
            mine = values("f", count, dev.rank, 9)
            dev.device_copy(part, mine)
            dev.allgather(part, out=window, count=count, dtype="float32")
            got = array.array("f", bytes(4 * count * n))
            dev.device_copy(got, window)
            same_bits(got, host.allgather(mine), "allgather into a window")
            inputs = values("f", count * n, dev.rank, 10)
            dev.device_copy(window, inputs)
            dev.reduce_scatter(window, out=part, count=count * n, dtype="float32")
            got = array.array("f", bytes(4 * count))
            dev.device_copy(got, part)
            same_bits(got, host.reduce_scatter(inputs), "reduce_scatter from a window")
            dev.allreduce(window, out=part, count=count, dtype="float32")
            dev.device_copy(got, part)
            same_bits(got, host.allreduce(inputs[:count]), "allreduce out of place from a window")
            root = values("f", count, 1, 11)
            if dev.rank == 1:
                dev.device_copy(window, root)
            dev.broadcast(window, 1, count=count, dtype="float32")
            dev.device_copy(got, window)
            same_bits(got, root, "broadcast in a window")
            dev.deregister(window)
        finally:
            dev.device_free(window)
            dev.device_free(part)

    check_ranks(2, body, 30.0, device_and_host_comms)


def case_device_address_calls_copy_and_allocate_nothing_of_the_buffers_size():
    import tracemalloc
    size = 1 << 22  # bytes of the device buffer; the module may allocate far less than that

    def body(dev, host):
        ptr = dev.device_alloc(size)
        other = dev.device_alloc(size)
        count = size // 4
        calls = {
            "allreduce in place": lambda: dev.allreduce(ptr, out=ptr, count=count, dtype="float32"),
            "allreduce into out": lambda: dev.allreduce(ptr, out=other, count=count, dtype="float32"),
            "reduce_scatter": lambda: dev.reduce_scatter(ptr, out=other, count=count, dtype="int32"),
            "allgather": lambda: dev.allgather(ptr, out=other, count=count // dev.size, dtype="int32"),
            "broadcast": lambda: dev.broadcast(ptr, count=count, dtype="float32"),
        }
        for what, call in calls.items():
            call()
            tracemalloc.start()
            try:
                call()
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < size // 64, "%s: %d bytes allocated during a call on %d bytes" % (what, peak, size)
        dev.device_free(ptr)
        dev.device_free(other)

    check_ranks(2, body, 60.0, device_and_host_comms)


def case_device_allreduce_of_addresses_with_out_skips_the_general_path_with_and_without_the_c_part():
    """Addresses with out=, count= and dtype= go straight to the library (the
    general path, Comm._run, is not entered); what the fast path declines
    takes the general path, which raises EINVAL on every rank in step."""
    import array

    def body(dev, host):
        general = []
        run = tc.Comm._run
        tc.Comm._run = lambda self, *a: (general.append(a[0]), run(self, *a))[1]
        try:
            ptr, other = dev.device_alloc(4 * 64), dev.device_alloc(4 * 64)
            n, me = dev.size, dev.rank
            for c_part in (tc._fast, None):
                tc._fast = c_part
                dev.device_copy(ptr, array.array("i", [me + 1] * 64))
                assert dev.allreduce(ptr, out=ptr, count=64, dtype="int32") == ptr
                assert dev.allreduce(ptr, op="max", out=other, count=64, dtype="int32") == other
                assert general == [], general
                got = array.array("i", bytes(4 * 64))
                dev.device_copy(got, other)
                assert list(got) == [n * (n + 1) // 2] * 64, got
                # Declined by the fast path: the general path's error, on every rank.
                expect_error(lambda: dev.allreduce(ptr, out=ptr, count=-1 if me == 0 else 64, dtype="int32"),
                             errno.EINVAL, "a negative count on rank 0")
                expect_error(lambda: dev.allreduce(True, out=ptr, count=64, dtype="int32"), errno.EINVAL,
                             "a bool for an address")
                # A count past size_t on rank 0: neither an overflow that
                # takes no step nor a count cut down to fit.
                expect_error(lambda: dev.allreduce(ptr, out=ptr, count=2 ** 64 if me == 0 else 64, dtype="int32"),
                             errno.EINVAL, "a count of 2**64 on rank 0")
                assert general == ["allreduce"] * (3 if me == 0 else 1), general
                general.clear()
        finally:
            tc.Comm._run = run
            dev.device_free(ptr)
            dev.device_free(other)

    tc._load()
    check_ranks(2, body, 30.0, device_and_host_comms)


def case_a_rank_or_size_past_a_c_int_is_refused_not_cut_down():
    """Comm(name, 2**32, 1) used to join as rank 0 of 1 (ctypes keeps an
    int's low 32 bits)."""
    for rank, size in ((1 << 32, 1), (0, (1 << 32) + 1), (-(1 << 32), 1)):
        try:
            tc.Comm("pytest-int-%d" % os.getpid(), rank, size).close()
            raise AssertionError("Comm(rank=%d, size=%d): joined" % (rank, size))
        except ValueError as e:
            assert "int" in str(e), e


def case_sizes_and_addresses_past_64_bits_are_refused_not_cut_down():
    """ctypes cuts an int down to the C type's bits: 2**64 + 16 would be 16,
    and a free of ptr + 2**64 would free ptr. Each is refused instead."""
    import array
    with tc.Comm("pytest-64-%d" % os.getpid(), 0, 1, backend=fakedev()) as dev:
        ptr = dev.device_alloc(16)
        dev.device_copy(ptr, array.array("i", [7] * 4))
        over = 1 << 64
        for what, call in {
            "device_alloc of 2**64 + 16 bytes": lambda: dev.device_alloc(over + 16),
            "device_free of ptr + 2**64": lambda: dev.device_free(ptr + over),
            "device_free of -1": lambda: dev.device_free(-1),
            "device_copy of 2**64 + 4 bytes": lambda: dev.device_copy(ptr, ptr + 4, over + 4),
            "device_copy to ptr + 2**64": lambda: dev.device_copy(ptr + over, array.array("i", [1] * 4)),
            "set_stream(2**64 + 1)": lambda: dev.set_stream(over + 1),
        }.items():
            try:
                call()
                raise AssertionError("%s: accepted" % what)
            except (TypeError, ValueError):
                pass
        got = array.array("i", bytes(16))
        dev.device_copy(got, ptr)  # ptr is still allocated, and unchanged
        assert list(got) == [7] * 4, got
        dev.device_free(ptr)


def case_device_communicator_names_its_backend_and_refuses_host_buffers_in_step():
    import array

    def body(dev, host):
        assert dev.backend == "fakedev" and host.backend == "host", (dev.backend, host.backend)
        assert "fakedev" in repr(dev), repr(dev)
        ptr = dev.device_alloc(16)
        try:
            # Each mistake raises EINVAL on every rank (one rank's is enough)
            # and the ranks stay in step.
            host_array = array.array("f", [1.0] * 4)
            e = expect_error(lambda: dev.allreduce(host_array), errno.EINVAL, "host memory on a device comm")
            assert "device communicator" in str(e), e
            e = expect_error(lambda: dev.allreduce(ptr, count=4, dtype="float32"), errno.EINVAL, "no out=")
            assert "out=" in str(e), e
            e = expect_error(lambda: dev.allreduce(ptr, out=ptr, count=4 if dev.rank else None, dtype="float32"),
                             errno.EINVAL, "no count on rank 0")
            assert "count=" in str(e) or dev.rank != 0, e
            e = expect_error(lambda: dev.allreduce(ptr, out=ptr, count=4, dtype="complex64"), errno.EINVAL,
                             "unknown dtype")
            expect_error(lambda: host.allreduce(host_array, count=4), errno.EINVAL, "count= with a buffer")
            # Still in step.
            dev.device_copy(ptr, array.array("i", [dev.rank + 1] * 4))
            dev.allreduce(ptr, out=ptr, count=4, dtype="int32")
            got = array.array("i", bytes(16))
            dev.device_copy(got, ptr)
            assert list(got) == [sum(range(1, dev.size + 1))] * 4, got
        finally:
            dev.device_free(ptr)

    check_ranks(2, body, 30.0, device_and_host_comms)


def case_device_tensors_over_the_fake_device_through_a_stand_in_torch():
    """torch CUDA is absent here: a stand-in torch module whose tensors live in
    fake-device memory exercises the module's device-tensor path (the
    attributes it reads: device.type, is_cpu, data_ptr, numel, dtype,
    is_contiguous;
    torch.empty for a new result on the tensor's device)."""
    import array
    import math
    import types
    fake = types.ModuleType("torch")
    held = []

    class Tensor:
        def __init__(self, count, device):
            self.count, self.dtype, self.device = count, "torch.float32", types.SimpleNamespace(type=device)
            self.ptr = held[0].device_alloc(max(4 * count, 1))

        @property
        def is_cpu(self):
            return self.device.type == "cpu"

        def data_ptr(self):
            return self.ptr

        def numel(self):
            return self.count

        def is_contiguous(self):
            return True

        def element_size(self):
            return 4

    fake.Tensor = Tensor
    fake.empty = lambda shape, dtype, device: Tensor(math.prod(shape), device.type)
    sys.modules["torch"] = fake
    try:
        with tc.Comm("pytest-tensor-%d" % os.getpid(), 0, 1, backend=fakedev()) as dev:
            held.append(dev)
            t = Tensor(5, "cuda")
            dev.device_copy(t, array.array("f", [1, 2, 3, 4, 5]))
            fresh = dev.allreduce(t)
            assert isinstance(fresh, Tensor) and fresh.device.type == "cuda" and fresh.ptr != t.ptr
            got = array.array("f", bytes(20))
            dev.device_copy(got, fresh)
            assert list(got) == [1, 2, 3, 4, 5], got
            assert dev.allreduce(t, out=t) is t
            assert dev.allgather(t).count == 5 and dev.reduce_scatter(t).count == 5
            e = expect_error(lambda: dev.allreduce(Tensor(2, "cpu")), errno.EINVAL, "a CPU tensor on a device comm")
            assert "CPU tensor" in str(e), e
        with tc.Comm("pytest-tensor-host-%d" % os.getpid(), 0, 1) as host:
            e = expect_error(lambda: host.allreduce(t), errno.EINVAL, "a device tensor on a host comm")
            assert "host communicator" in str(e), e
    finally:
        del sys.modules["torch"]


def case_missing_backend_plugin_raises_naming_it():
    missing = "/nonexistent/libtrainit_coll_nothing.so"
    e = expect_error(lambda: tc.Comm("pytest-nodev-%d" % os.getpid(), 0, 1, backend=missing), errno.ENOENT,
                     "a missing plugin")
    assert missing in str(e), e
    # The same from TRAINIT_COLL_BACKEND, when backend= is left out.
    os.environ["TRAINIT_COLL_BACKEND"] = missing
    try:
        e = expect_error(lambda: tc.Comm("pytest-nodev2-%d" % os.getpid(), 0, 1), errno.ENOENT, "from the variable")
        assert missing in str(e), e
        # An explicit backend wins over the variable.
        with tc.Comm("pytest-host-%d" % os.getpid(), 0, 1, backend="host") as comm:
            assert comm.backend == "host"
    finally:
        del os.environ["TRAINIT_COLL_BACKEND"]
    try:
        tc.Comm("x", 0, 1, backend=3)
        raise AssertionError("backend=3 was accepted")
    except TypeError as e:
        assert "backend" in str(e), e


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        sys.exit("usage: coll_test.py CASE\ncases: " + " ".join(CASES))
    t0 = time.monotonic()
    CASES[sys.argv[1]]()
    print("%s: passed in %.2f s" % (sys.argv[1], time.monotonic() - t0))
