#!/usr/bin/python3
"""The torch.distributed backend "trainit" (trainit_coll.torch) against gloo.

    tests/python/torch_test.py CASE    (TRAINIT_COLL_LIBRARY: the .so;
                                        PYTHONPATH: the build's python/)

Each CASE forks its ranks, which meet through env:// (MASTER_ADDR,
MASTER_PORT on a free port, RANK, WORLD_SIZE) as any launcher's ranks do,
and check their own results. Exit 0: passed; 1: failed; 77: skipped (torch
missing).
"""
import errno
import os
import signal
import socket
import sys
import time
import traceback

SKIP = 77
try:
    import torch
    import torch.distributed as dist
except ImportError:
    sys.exit(SKIP)

import trainit_coll
import trainit_coll.torch  # noqa: F401 (registers "trainit")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks(n, body, timeout=60.0, env=None, init=None):
    """Runs body(rank) in n forked ranks after init_process_group("trainit",
    **init) through env://; raises if a rank failed or did not finish in
    time."""
    port = free_port()
    pids = []
    for r in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(n))
                for k, v in (env(r) if env else {}).items():
                    os.environ[k] = v
                dist.init_process_group("trainit", **(init or {}))
                body(r)
                dist.destroy_process_group()
                code = 0
            except BaseException:  # noqa: B036 (the child reports and exits)
                sys.stderr.write("rank %d of %d:\n%s" % (r, n, traceback.format_exc()))
            finally:
                sys.stderr.flush()
                os._exit(code)
        pids.append(pid)
    wait_all(pids, timeout)


def wait_all(pids, timeout):
    deadline = time.monotonic() + timeout
    status = {}
    while len(status) < len(pids):
        for pid in pids:
            if pid not in status:
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status[pid] = st
        if time.monotonic() > deadline:
            for pid in pids:
                if pid not in status:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            raise AssertionError("ranks did not finish within %.0f s" % timeout)
        time.sleep(0.01)
    bad = [os.waitstatus_to_exitcode(status[p]) for p in pids if status[p] != 0]
    if bad:
        raise AssertionError("ranks failed: exit codes %s" % bad)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def same(a, b, what):
    check(a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), "%s: %s != %s" % (what, a, b))


# --- cases ------------------------------------------------------------------


def train(backend_group, seed, rank, steps=5):
    """A small model trained with DDP over `backend_group`: its parameters."""
    return train_on(backend_group, seed, rank, steps, device="cpu")


def train_on(backend_group, seed, rank, steps=5, device="cpu"):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=backend_group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        x = torch.randn(32, 8, generator=data).to(device)
        y = torch.randn(32, 4, generator=data).to(device)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def case_ddp_on_two_ranks_trains_to_the_same_parameters_as_gloo():
    # Two ranks: each gradient is one sum of two addends, a + b, in both
    # backends (the core folds rank 0 then rank 1; gloo adds the two), so
    # the parameters are equal bit for bit.
    def body(rank):
        gloo = dist.new_group(backend="gloo")
        ours = train(None, seed=7, rank=rank)
        theirs = train(gloo, seed=7, rank=rank)
        for a, b in zip(ours, theirs):
            same(a, b, "rank %d: a parameter after 5 DDP steps" % rank)
        # Every rank holds the same model.
        flat = torch.cat([p.reshape(-1) for p in ours])
        gathered = [torch.empty_like(flat) for _ in range(2)]
        dist.all_gather(gathered, flat)
        same(gathered[0], gathered[1], "the two ranks' parameters")

    ranks(2, body)


def cuda_seen_from_a_child():
    """Whether torch sees a GPU, asked in a child: torch.cuda.is_available()
    starts CUDA in the process that asks (torch then refuses CUDA in every
    child it forks), so this process, which forks the ranks, must not."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if torch.cuda.is_available() else 1
        finally:
            os._exit(code)
    try:
        wait_all([pid], 60)
    except AssertionError:
        return False
    return True


def gpu_case_ddp_on_cuda_tensors_on_two_ranks_trains_to_the_same_parameters_as_gloo():
    # The device path: the model on the GPU (both ranks on GPU 0 where there
    # is one), CUDA tensors to a communicator of backend "cuda". A GPU case:
    # not among ctest's (which registers case_*), run by
    # bench/coll/gpu_check.sh on a GPU machine; 77 where torch sees none.
    if not cuda_seen_from_a_child():
        sys.exit(SKIP)

    def body(rank):
        torch.cuda.set_device(rank % torch.cuda.device_count())
        gloo = dist.new_group(backend="gloo")
        ours = train_on(None, seed=7, rank=rank, device="cuda")
        theirs = train_on(gloo, seed=7, rank=rank, device="cuda")
        for a, b in zip(ours, theirs):
            check(a.is_cuda, "a parameter left the GPU")
            same(a.cpu(), b.cpu(), "rank %d: a parameter after 5 DDP steps on CUDA" % rank)

    ranks(2, body)


def case_ddp_on_four_ranks_agrees_with_gloo_within_the_sum_order():
    # Four ranks: the core folds 0, 1, 2, 3 in order, gloo's ring adds in
    # another order; float32 sums of 4 addends then differ in the last bits
    # only (each step's gradient within a few ulp), so after 5 SGD steps the
    # parameters agree within 1e-5 relative.
    def body(rank):
        gloo = dist.new_group(backend="gloo")
        ours = train(None, seed=11, rank=rank)
        theirs = train(gloo, seed=11, rank=rank)
        for a, b in zip(ours, theirs):
            check(torch.allclose(a, b, rtol=1e-5, atol=1e-6), "rank %d: %s vs gloo's %s" % (rank, a, b))

    ranks(4, body, timeout=90)


def case_every_operation_matches_gloos_result():
    n = 3

    def body(rank):
        gloo = dist.new_group(backend="gloo")
        gen = torch.Generator().manual_seed(rank)
        # all_reduce: every op and dtype, on small integers (sums and
        # products exact in every dtype): the core's result is the ranks'
        # values folded in rank order, and gloo's the same where gloo has the
        # dtype (torch 1.13's gloo has no bfloat16).
        folds = {dist.ReduceOp.SUM: torch.add, dist.ReduceOp.PRODUCT: torch.mul, dist.ReduceOp.MIN: torch.minimum,
                 dist.ReduceOp.MAX: torch.maximum}
        for d, dtype in enumerate((torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8, torch.float16,
                                   torch.bfloat16)):
            inputs = [torch.randint(0, 4, (37,), generator=torch.Generator().manual_seed(100 * d + r)).to(dtype)
                      for r in range(n)]
            for op, fold in folds.items():
                want = inputs[0]
                for other in inputs[1:]:
                    want = fold(want, other)
                ours = inputs[rank].clone()
                dist.all_reduce(ours, op=op)
                same(ours, want, "all_reduce %s %s" % (dtype, op))
                if dtype != torch.bfloat16 and not (dtype == torch.float16 and op == dist.ReduceOp.PRODUCT):
                    theirs = inputs[rank].clone()
                    dist.all_reduce(theirs, op=op, group=gloo)
                    same(ours, theirs, "all_reduce %s %s against gloo" % (dtype, op))
        x = torch.randn(5, 4, generator=gen)
        # broadcast from every root, of any dtype (bool too: bytes moved).
        for root in range(n):
            ours, theirs = x.clone(), x.clone()
            dist.broadcast(ours, root)
            dist.broadcast(theirs, root, group=gloo)
            same(ours, theirs, "broadcast from %d" % root)
        flags = torch.tensor([rank % 2 == 0, True, False])
        dist.broadcast(flags, 1)
        same(flags, torch.tensor([False, True, False]), "broadcast of bool")
        # all_gather and all_gather_into_tensor.
        ours = [torch.empty_like(x) for _ in range(n)]
        theirs = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(ours, x)
        dist.all_gather(theirs, x, group=gloo)
        for r in range(n):
            same(ours[r], theirs[r], "all_gather part %d" % r)
        into = torch.empty(n * 5, 4)
        dist.all_gather_into_tensor(into, x)
        same(into, torch.cat(theirs), "all_gather_into_tensor")
        # reduce_scatter, reduce_scatter_tensor and reduce: the ranks' floats
        # folded in rank order, bit for bit; gloo's sums (another order on 3
        # ranks) within rounding.
        def rank_parts(r):
            g = torch.Generator().manual_seed(500 + r)
            return [torch.randn(6, generator=g) for _ in range(n)]

        folded = torch.cat(rank_parts(0))
        for r in range(1, n):
            folded = folded + torch.cat(rank_parts(r))
        mine = rank_parts(rank)
        gloo_total = torch.cat(mine)
        dist.all_reduce(gloo_total, group=gloo)
        check(torch.allclose(folded, gloo_total, rtol=1e-6, atol=1e-6), "the fold against gloo's all_reduce")
        want = folded[rank * 6:(rank + 1) * 6]
        out = torch.empty(6)
        dist.reduce_scatter(out, [p.clone() for p in mine])
        same(out, want, "reduce_scatter")
        out = torch.empty(6)
        dist.reduce_scatter_tensor(out, torch.cat(mine))
        same(out, want, "reduce_scatter_tensor")
        for root in range(n):
            ours = torch.cat(mine)
            dist.reduce(ours, root)
            same(ours, folded if rank == root else torch.cat(mine), "reduce to %d (rank %d)" % (root, rank))
        # Non-contiguous tensors are reduced where they lie.
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
        dist.all_reduce(t)
        same(t, torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * n, "a transposed tensor")
        # async_op: a finished Work whose future holds the tensors.
        y = torch.ones(3)
        work = dist.all_reduce(y, async_op=True)
        check(work.wait() and work.is_completed(), "the Work of an async all_reduce")
        same(work.get_future().wait()[0], torch.full((3,), float(n)), "the Work's future")
        dist.barrier()

    ranks(n, body)


def on_two_hosts(n, body):
    # Ranks 0, 2, … on "host-0" and 1, 3, … on "host-1" (TRAINIT_COLL_HOST).
    ranks(n, body, timeout=90, env=lambda r: {"TRAINIT_COLL_HOST": "host-%d" % (r % 2)})


def the_next_all_reduce_pairs(rank):
    # Four ranks' next all_reduce after a failed or odd call: still in step.
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    same(t, torch.full((3,), 6.0), "rank %d: the next all_reduce" % rank)


def case_two_hosts_of_two_ranks_reduce_within_each_host_then_between_them():
    # TRAINIT_COLL_HOST puts ranks on hosts: here 0 and 2 on one, 1 and 3 on
    # the other (not contiguous, as a launcher may number them), all on this
    # machine. Each host reduces on the core, the hosts' lowest ranks over
    # gloo. Sums of small integers are exact in any order: equal to gloo's.
    n = 4

    def body(rank):
        pg = dist.distributed_c10d._get_default_group()
        check("rank %d of 4, 2 host(s)" % rank in repr(pg), "the group: %r" % pg)
        gloo = dist.new_group(backend="gloo")
        x = torch.randint(0, 8, (33,), generator=torch.Generator().manual_seed(rank)).float()
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
            ours, theirs = x.clone(), x.clone()
            dist.all_reduce(ours, op=op)
            dist.all_reduce(theirs, op=op, group=gloo)
            same(ours, theirs, "hierarchical all_reduce %s" % op)
        for root in range(n):
            ours = x.clone()
            dist.broadcast(ours, root)
            same(ours, torch.randint(0, 8, (33,), generator=torch.Generator().manual_seed(root)).float(),
                 "broadcast from %d" % root)
        gathered = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(gathered, x)
        for r in range(n):
            same(gathered[r], torch.randint(0, 8, (33,), generator=torch.Generator().manual_seed(r)).float(),
                 "all_gather part %d" % r)
        total = torch.cat([x] * n)
        dist.all_reduce(total, group=gloo)
        out = torch.empty(33)
        dist.reduce_scatter_tensor(out, torch.cat([x] * n))
        same(out, total[rank * 33:(rank + 1) * 33], "hierarchical reduce_scatter_tensor")
        ours = x.clone()
        dist.reduce(ours, 3)
        same(ours, total[:33] if rank == 3 else x, "hierarchical reduce to 3")
        dist.barrier()
        # DDP over the hosts: within rounding of gloo's (sums of floats in
        # another order).
        for a, b in zip(train(None, seed=3, rank=rank), train(gloo, seed=3, rank=rank)):
            check(torch.allclose(a, b, rtol=1e-5, atol=1e-6), "rank %d: %s vs gloo's %s" % (rank, a, b))

    on_two_hosts(n, body)


def case_two_hosts_reduce_bfloat16_and_gather_empty_tensors_and_stay_in_step():
    # Between hosts the leaders use gloo, which in torch 1.13 has no
    # bfloat16: the hosts' partial sums cross as float32 and round once back.
    # Small integers are exact either way. Empty tensors cross as nothing.
    n = 4

    def body(rank):
        x = torch.full((5,), float(rank + 1), dtype=torch.bfloat16)
        dist.all_reduce(x)
        same(x, torch.full((5,), 10.0, dtype=torch.bfloat16), "bfloat16 all_reduce over 2 hosts")
        outs = [torch.ones(0) for _ in range(n)]
        dist.all_gather(outs, torch.empty(0))
        check(all(o.numel() == 0 for o in outs), "an empty all_gather over 2 hosts")
        the_next_all_reduce_pairs(rank)

    on_two_hosts(n, body)


def case_two_hosts_whose_step_between_them_fails_fail_the_call_on_every_rank_and_stay_in_step():
    # The leaders' gloo step fails (as a dead host's would make it): every
    # rank of each host raises for that call, none pairs it with the next.
    n = 4

    class Failing:
        def __init__(self, inner):
            self.inner = inner

        def allreduce(self, *args, **kwargs):
            raise RuntimeError("the step between the hosts failed (test)")

        def __getattr__(self, name):
            return getattr(self.inner, name)

    def body(rank):
        pg = dist.distributed_c10d._get_default_group()
        real = pg._cross
        if real is not None:
            pg._cross = Failing(real)
        try:
            dist.all_reduce(torch.ones(2))
        except (RuntimeError, trainit_coll.CollError):
            pass
        else:
            raise AssertionError("rank %d: the all_reduce whose step between the hosts failed succeeded" % rank)
        pg._cross = real
        the_next_all_reduce_pairs(rank)

    on_two_hosts(n, body)


def case_one_element_views_with_any_stride_move_in_every_operation():
    # x[:1, 1] of a (3, 2) tensor: shape (1,), stride (2,), which torch calls
    # contiguous, yet no byte view of it exists: copied in and back as any
    # tensor that is not.
    n = 2

    def odd(value, dtype):
        return torch.full((3, 2), value, dtype=dtype)[:1, 1]

    def body(rank):
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            t = odd(rank + 1, dtype)
            dist.broadcast(t, src=1)
            same(t, torch.full((1,), 2, dtype=dtype), "broadcast %s" % dtype)
            outs = [odd(0, dtype) for _ in range(n)]
            dist.all_gather(outs, odd(rank + 1, dtype))
            same(torch.cat(outs), torch.tensor([1, 2], dtype=dtype), "all_gather %s" % dtype)
            into = torch.zeros(n, dtype=dtype)
            dist.all_gather_into_tensor(into, odd(rank + 1, dtype))
            same(into, torch.tensor([1, 2], dtype=dtype), "all_gather_into_tensor %s" % dtype)
            t = odd(rank + 1, dtype)
            dist.all_reduce(t)
            same(t, torch.full((1,), 3, dtype=dtype), "all_reduce %s" % dtype)
            out = odd(0, dtype)
            dist.reduce_scatter(out, [odd(rank + 1, dtype), odd(rank + 10, dtype)])
            same(out, torch.full((1,), 3 if rank == 0 else 21, dtype=dtype), "reduce_scatter %s" % dtype)

    ranks(n, body)


def case_bad_calls_raise_errors_naming_the_operation():
    def body(rank):
        def raises(what, call):
            try:
                call()
            except RuntimeError as e:
                check(what in str(e), "%r not in %r" % (what, str(e)))
                return
            raise AssertionError("no error for %s" % what)

        raises("AVG", lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.AVG))
        raises("torch.int8", lambda: dist.all_reduce(torch.ones(2, dtype=torch.int8)))
        raises("send is not supported", lambda: dist.send(torch.ones(1), 1 - rank))
        raises("all_to_all_single is not supported", lambda: dist.all_to_all_single(torch.ones(2), torch.ones(2)))
        raises("all_gather into 3 tensors for 2 ranks", lambda: dist.all_gather([torch.ones(1)] * 3, torch.ones(1)))
        raises("dense (strided) tensors only", lambda: dist.all_reduce(torch.ones(2).to_sparse()))
        # The ranks are still in step: a good call after the bad ones.
        t = torch.ones(2)
        dist.all_reduce(t)
        same(t, torch.full((2,), 2.0), "all_reduce after the refused calls")

    ranks(2, body)


def case_a_call_one_rank_alone_refuses_fails_on_every_rank_and_the_next_calls_are_right():
    # Rank 0 alone passes a bad call; rank 1's own is good. Both must fail it
    # (rank 1 with the core's EINVAL), never pair rank 1's call with rank 0's
    # next one.
    def body(rank):
        def fails(what, call):
            try:
                call()
            except (RuntimeError, trainit_coll.CollError) as e:
                return str(e)
            raise AssertionError("rank %d: no error for %s" % (rank, what))

        out = [torch.zeros(1) for _ in range(3 if rank == 0 else 2)]
        why = fails("all_gather", lambda: dist.all_gather(out, torch.ones(1)))
        check(rank == 1 or "all_gather into 3 tensors" in why, why)
        op = dist.ReduceOp.AVG if rank == 1 else dist.ReduceOp.SUM
        fails("all_reduce", lambda: dist.all_reduce(torch.ones(2), op=op))
        root = 5 if rank == 0 else 0
        fails("broadcast", lambda: dist.broadcast(torch.ones(2), src=root))
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t)
        same(t, torch.full((3,), 3.0), "rank %d: the all_reduce after the refused calls" % rank)
        gathered = [torch.zeros(1) for _ in range(2)]
        dist.all_gather(gathered, torch.full((1,), float(rank)))
        same(torch.cat(gathered), torch.tensor([0.0, 1.0]), "rank %d: the all_gather after them" % rank)

    ranks(2, body)


def case_all_gathers_of_empty_tensors_give_empty_tensors():
    def body(rank):
        for dtype in (torch.float32, torch.int64, torch.uint8):
            outs = [torch.ones(0, dtype=dtype) for _ in range(2)]
            dist.all_gather(outs, torch.empty(0, dtype=dtype))
            check(all(o.numel() == 0 and o.dtype == dtype for o in outs), "all_gather of %s" % dtype)
            out = torch.empty(0, dtype=dtype)
            dist.all_gather_into_tensor(out, torch.empty(0, dtype=dtype))
            check(out.numel() == 0, "all_gather_into_tensor of %s" % dtype)
        t = torch.ones(2)
        dist.all_reduce(t)
        same(t, torch.full((2,), 2.0), "rank %d: an all_reduce after them" % rank)

    ranks(2, body)


def case_the_groups_timeout_bounds_a_call_a_peer_never_makes():
    import datetime

    def body(rank):
        if rank == 1:
            time.sleep(8)  # never calls; alive, so only the timeout can end rank 0's wait
            return
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(2))
        except (RuntimeError, trainit_coll.CollError) as e:
            took = time.monotonic() - start
            check("timed out" in str(e) or "ETIMEDOUT" in str(e), "rank 0: %s" % e)
            check(1.5 <= took < 6, "rank 0 raised after %.1f s (group timeout 2 s)" % took)
            return
        raise AssertionError("rank 0: an all_reduce its peer never made succeeded")

    os.environ.pop("TRAINIT_COLL_TIMEOUT", None)
    ranks(2, body, init={"timeout": datetime.timedelta(seconds=2)})


def killed_mid_training(ddp):
    """Rank 2 of 3 SIGKILLs itself at its 50th step; the others must raise
    within a second of its death: CollAbortedError from a call of their own
    (all_reduce in a loop), or under DDP, whose reducer calls the backend
    from torch's C++ (which turns every exception into a RuntimeError), a
    RuntimeError that begins with its name."""
    n = 3
    port = free_port()
    read_end, write_end = os.pipe()
    pids = []
    for r in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            code = 1
            try:
                os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(n))
                dist.init_process_group("trainit")
                torch.manual_seed(0)
                model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64)) if ddp else None
                t = torch.ones(1 << 16)
                for step in range(1000000):
                    if r == 2 and step == 50:
                        os.kill(os.getpid(), signal.SIGKILL)
                    try:
                        if ddp:
                            model(torch.ones(4, 64)).sum().backward()
                        else:
                            dist.all_reduce(t)
                            t.fill_(1.0)
                    except trainit_coll.CollAbortedError as e:
                        check(not ddp, "DDP let CollAbortedError through itself")
                        check(e.errno == errno.ECONNABORTED, "errno %s" % e.errno)
                    except RuntimeError as e:
                        check(ddp and str(e).startswith("CollAbortedError: [Errno 103]"), "raised %r" % str(e)[:200])
                    else:
                        continue
                    os.write(write_end, b"%d %f\n" % (r, time.monotonic()))
                    code = 0
                    break
            except BaseException:  # noqa: B036
                sys.stderr.write("rank %d:\n%s" % (r, traceback.format_exc()))
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(write_end)
    killed = pids[2]
    start = time.monotonic()
    _, st = os.waitpid(killed, 0)
    died = time.monotonic()
    check(os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGKILL, "rank 2 was to die of SIGKILL")
    wait_all(pids[:2], timeout=10)
    lines = os.read(read_end, 4096).decode().split()
    raised = {int(lines[i]): float(lines[i + 1]) for i in range(0, len(lines), 2)}
    check(sorted(raised) == [0, 1], "ranks that raised: %s" % sorted(raised))
    for r, at in raised.items():
        check(at - died < 1.0, "rank %d raised %.3f s after rank 2 died (started %.3f s before)" % (r, at - died, died - start))


def case_a_rank_killed_mid_training_makes_the_others_raise_within_a_second():
    killed_mid_training(ddp=False)


def case_a_rank_killed_mid_ddp_training_makes_the_others_raise_naming_collabortederror_within_a_second():
    killed_mid_training(ddp=True)


def main():
    cases = {name.split("case_", 1)[1]: f for name, f in globals().items() if name.startswith(("case_", "gpu_case_"))}
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.exit("usage: torch_test.py CASE (%s)" % ", ".join(sorted(cases)))
    try:
        cases[sys.argv[1]]()
    except AssertionError as e:
        sys.exit("FAILED: %s" % e)


if __name__ == "__main__":
    main()
