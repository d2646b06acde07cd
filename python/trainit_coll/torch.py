"""The collective core as a torch.distributed backend: "trainit".

    import trainit_coll.torch                  # registers the backend
    torch.distributed.init_process_group("trainit")

An unchanged DDP or FSDP script, or one calling all_reduce in its own loop,
then reduces over the core with one word changed. It works in a rank started
by trainit and in one started by any launcher with the usual env://
variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE).

How a group joins. The ranks of one host share one communicator of the core:
the arena trainit handed the rank (Comm.from_env()) when the group is
exactly trainit's local ranks, else a standalone one (Comm(name, ...)) whose
name the group's first rank makes up and hands the others through the
group's store. Ranks on several hosts reduce hierarchically: within each
host on the core, between hosts among one rank per host (each host's lowest)
over a gloo group of their own, then back within the host. Which host a
rank is on: TRAINIT_COLL_HOST when set, else GROUP_RANK (set by trainit's
torchrun modes and by torchrun), else the host's name.

Tensors: CPU tensors, of the core's dtypes for reductions (float32, float64,
float16, bfloat16, int32, int64, uint8); broadcast and the gathers move any
dtype (as bytes). Tensors whose elements do not lie one after the other
(non-contiguous ones, and a one-element view such as x[:1, 1], which torch
calls contiguous) are copied to a dense one and back. CUDA tensors (and NPU ones where torch_npu is present) go to the
core's device path: a communicator of backend "cuda" ("ascend") made on
first use, on one host only.

Operations: all_reduce (sum, product, min, max), broadcast, all_gather,
all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, reduce and
barrier, each returning a completed Work whose future holds the output
tensors. The core's calls are synchronous: an operation has finished, or
raised, when it returns, async_op=True included. Anything else (send/recv,
all_to_all, scatter, gather, AVG, bitwise ops) raises RuntimeError naming
the operation. A peer that died, or trainit stopping the job, raises
CollAbortedError (a ConnectionAbortedError) within the core's bound (well
under a second) rather than a hang; TRAINIT_COLL_TIMEOUT's expiry raises
CollTimeoutError. Under DDP, whose reducer calls the backend from torch's
C++, backward() raises a RuntimeError whose message begins with the error's
name ("CollAbortedError: [Errno 103] ...") instead: torch turns every
exception that crosses its C++ into a RuntimeError.

Why a Python backend rather than a C++ extension: the backend registration
(torch.distributed.Backend.register_backend) and a ProcessGroup subclassed
in Python are supported alike by Debian 12's torch 1.13 and by torch 2.x
(2.x takes a ProcessGroup the creator returns as the group itself), while
c10d's C++ ProcessGroup/Backend ABI changed between them (the split into
Backend in 2.0) and an extension would be built per torch version. The core
is already reached from Python through the module (its numpy/torch buffer
paths, ctypes), so one file serves both.
"""

import atexit
import inspect
import os
import socket
import uuid
import weakref

import torch
import torch.distributed as dist

from . import CollAbortedError, CollError, CollTimeoutError, Comm

__all__ = ["ProcessGroupTrainit", "CollError", "CollAbortedError", "CollTimeoutError"]

BACKEND = "trainit"

# torch's dtypes the core reduces, by its own names (trainit_coll.DTYPES).
_DTYPES = {
    torch.float32: "float32",
    torch.float64: "float64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
}


class _Refused(RuntimeError):
    """A call this rank refuses before the core: it still takes the call's
    step, as an invalid one, so that its peers fail the call too (EINVAL)
    and the ranks stay in step (see _refusing)."""


# (ReduceOp, the core's name): ReduceOp values compare, they do not hash alike
# across torch versions.
_OPS = [
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.PRODUCT, "prod"),
    (dist.ReduceOp.MIN, "min"),
    (dist.ReduceOp.MAX, "max"),
]


_OP_NAMES = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR", "PREMUL_SUM")


def _op_name(op, what):
    for reduce_op, name in _OPS:
        if op == reduce_op:
            return name
    shown = next((n for n in _OP_NAMES if hasattr(dist.ReduceOp, n) and op == getattr(dist.ReduceOp, n)), str(op))
    raise _Refused("trainit backend: %s with %s: the core reduces with SUM, PRODUCT, MIN and MAX only"
                   % (what, shown))


def _dtype_name(tensor, what):
    name = _DTYPES.get(tensor.dtype)
    if name is None:
        raise _Refused("trainit backend: %s of %s: the core reduces %s only"
                       % (what, tensor.dtype, ", ".join(str(d) for d in _DTYPES)))
    return name


def _bytes(tensor):
    """A contiguous tensor's memory as a flat uint8 tensor (shared)."""
    flat = tensor.reshape(-1)
    return flat.view(torch.uint8) if flat.dtype != torch.uint8 else flat


# A finished operation as torch's C++ side takes it: a Work made from a
# completed future (c10d's own FutureWrappingWork). A Work subclassed in
# Python would not do: once its Python object is collected, C++ callers
# (DDP's parameter checks, its reducer) reach the base class's wait(), which
# waits forever for a completion only the Python object knew of. Present in
# torch 1.13 and 2.x.
_work_from_future = torch._C._distributed_c10d._create_work_from_future


def _Work(result):  # noqa: N802 (made like a class)
    """A finished operation: wait() returns at once, its future holds the
    output tensors."""
    future = torch.futures.Future()
    future.set_result(result)
    return _work_from_future(future)


def _dense(tensor):
    """Whether the tensor's elements lie one after the other from its start,
    so that its memory can be viewed as bytes. is_contiguous() alone is not
    that: it ignores the stride of a dimension of size 1 (x[:1, 1] of a
    (3, 2) tensor is "contiguous" with stride 2)."""
    return tensor.is_contiguous() and tensor.reshape(-1).stride(0) == 1


class _Contiguous:
    """A tensor as the core takes it: itself when dense, else a dense copy
    that is written back on finish()."""

    def __init__(self, tensor, copy_in=True):
        self.tensor = tensor
        if _dense(tensor):
            self.work = tensor
        elif copy_in:
            self.work = tensor.clone(memory_format=torch.contiguous_format)
        else:
            self.work = torch.empty_like(tensor, memory_format=torch.contiguous_format)

    def finish(self):
        if self.work is not self.tensor:
            self.tensor.copy_(self.work)


# Whether this process's seat in trainit's arena is still free, per device type.
_ARENA_FREE = {"cpu": True, "cuda": True, "npu": True}

# The groups whose leaders hold a gloo group between the hosts. Each drops
# it while the interpreter is whole: one freed during its finalisation (a
# group still referenced when the program ends) made the process abort
# ("terminate called without an active exception") in about one run of
# nine of a two-host DDP job, none of forty after this.
_LEADERS = weakref.WeakSet()


@atexit.register
def _drop_cross_groups():
    for pg in list(_LEADERS):
        pg._cross = None


def _host_key():
    key = os.environ.get("TRAINIT_COLL_HOST")
    if key:
        return "set:" + key
    group_rank = os.environ.get("GROUP_RANK")
    if group_rank:
        return "group:" + group_rank
    return "name:" + socket.gethostname()


def _exchange(store, key, rank, size, value):
    """Every rank's value for `key`, in rank order, through the store."""
    store.set("%s/%d" % (key, rank), value)
    return [store.get("%s/%d" % (key, r)).decode() for r in range(size)]


def _tensors_in(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors_in(a)


def _invalid_step(comm):
    """Takes a call's step on comm as an invalid call: its peers' same call
    fails with EINVAL (as two ranks that disagree do), and the ranks stay in
    step. Its own EINVAL, or a communicator already ended, is no news."""
    try:
        comm.allreduce(None, op="refused")
    except (CollError, RuntimeError):
        pass


def _refusing(method):
    """An operation whose refusal (_Refused) on this rank alone must not put
    the ranks out of step: the rank takes the call's step on the
    communicator of its tensors' device as an invalid call (its peers' calls
    then fail with EINVAL, as two ranks that disagree do), then raises."""

    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except _Refused:
            device = next((t.device.type for t in _tensors_in(args)), "cpu")
            _invalid_step(self._comm(device if device in ("cpu", "cuda", "npu") else "cpu"))
            raise

    run.__name__ = method.__name__
    run.__doc__ = method.__doc__
    return run


class ProcessGroupTrainit(dist.ProcessGroup):
    """The "trainit" backend's process group (see the module's text)."""

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._store = store
        self._timeout = timeout
        hosts = _exchange(store, "trainit_coll/host", rank, size, _host_key())
        order = []  # host keys in the order of their lowest rank
        for key in hosts:
            if key not in order:
                order.append(key)
        self._host_of = [order.index(key) for key in hosts]  # each rank's host index
        self._host = self._host_of[rank]
        self._local_ranks = [r for r in range(size) if self._host_of[r] == self._host]  # global ranks, ascending
        self._local_rank = self._local_ranks.index(rank)
        self._hosts = len(order)
        self._leaders = [self._host_of.index(h) for h in range(self._hosts)]  # each host's lowest rank
        self._comms = {}
        self.joined_arena = False  # the host communicator is trainit's arena (Comm.from_env())
        self._cross = None
        if self._hosts > 1 and self._local_rank == 0:
            # The leaders' own group, over gloo: its rank is the host's index.
            cross_store = dist.PrefixStore("trainit_coll/cross", store)
            self._cross = dist.ProcessGroupGloo(cross_store, self._host, self._hosts, timeout)
            _LEADERS.add(self)
        self._comm("cpu")  # joined now: every rank of the group is in init_process_group together

    def getBackendName(self):  # noqa: N802 (torch's name)
        return BACKEND

    def __repr__(self):
        return "<ProcessGroupTrainit rank %d of %d, %d host(s)>" % (self.rank(), self.size(), self._hosts)

    # --- communicators ----------------------------------------------------

    def _comm(self, device_type):
        comm = self._comms.get(device_type)
        if comm is not None:
            return comm
        backend = {"cpu": "host", "cuda": "cuda", "npu": "ascend"}.get(device_type)
        if backend is None:
            raise RuntimeError("trainit backend: tensors on %s: the core takes cpu, cuda and npu tensors" % device_type)
        if device_type != "cpu" and self._hosts > 1:
            raise RuntimeError("trainit backend: %s tensors on several hosts: the device path reduces within one host"
                               % device_type)
        size = len(self._local_ranks)
        # The arena trainit handed this rank: for the first group of the
        # whole job only (a rank has one seat there), when its ranks on this
        # host are exactly trainit's local ranks.
        from_env = (_ARENA_FREE[device_type]
                    and os.environ.get("TRAINIT_COLL_FD") is not None
                    and os.environ.get("TRAINIT_LOCAL_SIZE") == str(size)
                    and os.environ.get("TRAINIT_LOCAL_RANK") == str(self._local_rank)
                    and os.environ.get("WORLD_SIZE") == str(self.size())
                    and os.environ.get("RANK") == str(self.rank())
                    and (backend == "host" or os.environ.get("TRAINIT_COLL_PEER_FDS") is not None))
        if not from_env:
            key = "trainit_coll/name/%s/%d" % (device_type, self._host)
            if self._local_rank == 0:
                name = "torch-%s-%d" % (uuid.uuid4().hex[:16], self._host)
                self._store.set(key, name)
            else:
                name = self._store.get(key).decode()
        # The group's timeout bounds each call's waits, as gloo's does, unless
        # TRAINIT_COLL_TIMEOUT says otherwise (the core reads it at init).
        unset = not os.environ.get("TRAINIT_COLL_TIMEOUT") and self._timeout is not None
        if unset:
            os.environ["TRAINIT_COLL_TIMEOUT"] = "%.3f" % max(self._timeout.total_seconds(), 0.001)
        try:
            if from_env:
                comm = Comm.from_env(backend=backend)
                _ARENA_FREE[device_type] = False
                self.joined_arena = self.joined_arena or device_type == "cpu"
            else:
                comm = Comm(name, self._local_rank, size, backend=backend)
        finally:
            if unset:
                del os.environ["TRAINIT_COLL_TIMEOUT"]
        self._comms[device_type] = comm
        return comm

    def _device_comm(self, tensors):
        types = {t.device.type for t in tensors}
        if len(types) != 1:
            raise _Refused("trainit backend: tensors on %s in one call" % ", ".join(sorted(types)))
        if any(t.layout != torch.strided for t in tensors):
            raise _Refused("trainit backend: a %s tensor: the core takes dense (strided) tensors only"
                           % next(t.layout for t in tensors if t.layout != torch.strided))
        return self._comm(types.pop())

    @staticmethod
    def _across(comm, step, then_local=True):
        """The leaders' gloo step between the host's core steps. Should it
        fail, the leader takes the host's next core step (then_local) as an
        invalid call, so that its host's ranks fail the call too rather than
        pair it with the next one; then it raises."""
        try:
            step()
        except Exception:
            if then_local:
                _invalid_step(comm)
            raise

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise _Refused("trainit backend: %s takes one tensor per rank, not %d" % (what, len(tensors)))
        return tensors[0]

    # --- the operations -----------------------------------------------------

    @_refusing
    def allreduce(self, tensors, opts=None):
        tensor = self._one(tensors, "all_reduce")
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "all_reduce")
        comm = self._device_comm([tensor])
        _dtype_name(tensor, "all_reduce")
        buf = _Contiguous(tensor)
        if self._hosts == 1:
            comm.allreduce(buf.work, op=op, out=buf.work)
        else:
            # Within the host onto its leader, between the leaders, back within the host.
            comm.reduce(buf.work, op=op, root=0, out=buf.work if self._local_rank == 0 else None)
            if self._cross is not None:
                cross = dist.AllreduceOptions()
                cross.reduceOp = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
                self._across(comm, lambda: self._cross_allreduce(buf.work, cross))
            comm.broadcast(buf.work, root=0)
        buf.finish()
        return _Work(list(tensors))

    def _cross_allreduce(self, tensor, cross):
        # torch 1.13's gloo has no bfloat16: the hosts' partial sums cross
        # as float32 and are rounded back once.
        if tensor.dtype == torch.bfloat16:
            wide = tensor.float()
            self._cross.allreduce([wide], cross).wait()
            tensor.copy_(wide)
        else:
            self._cross.allreduce([tensor], cross).wait()

    @_refusing
    def broadcast(self, tensors, opts=None):
        tensor = self._one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root, "broadcast")
        comm = self._device_comm([tensor])
        buf = _Contiguous(tensor)
        data = _bytes(buf.work)
        if self._hosts == 1:
            comm.broadcast(data, root=root)
        else:
            root_host = self._host_of[root]
            if self._host == root_host:  # the root's host: onto its leader
                comm.broadcast(data, root=self._local_ranks.index(root))
            if self._cross is not None:
                cross = dist.BroadcastOptions()
                cross.rootRank = root_host
                self._across(comm, lambda: self._cross.broadcast([data], cross).wait(), self._host != root_host)
            if self._host != root_host:
                comm.broadcast(data, root=0)
        buf.finish()
        return _Work(list(tensors))

    @_refusing
    def allgather(self, output_tensors, input_tensors, opts=None):  # noqa: ARG002
        tensor = self._one(input_tensors, "all_gather")
        outputs = self._one(output_tensors, "all_gather")
        if len(outputs) != self.size():
            raise _Refused("trainit backend: all_gather into %d tensors for %d ranks" % (len(outputs), self.size()))
        for out in outputs:
            if out.dtype != tensor.dtype or out.numel() != tensor.numel():
                raise _Refused("trainit backend: all_gather: an output of %s x %d for an input of %s x %d"
                               % (out.dtype, out.numel(), tensor.dtype, tensor.numel()))
        gathered = self._gather(tensor)
        for r, out in enumerate(outputs):
            out.copy_(gathered[r].view_as(out))
        return _Work(list(outputs))  # the gathered tensors, as gloo's future holds them

    @_refusing
    def _allgather_base(self, output, input, opts=None):  # noqa: A002,ARG002 (torch's names)
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise _Refused("trainit backend: all_gather_into_tensor: output %s x %d, input %s x %d on %d ranks"
                           % (output.dtype, output.numel(), input.dtype, input.numel(), self.size()))
        gathered = self._gather(input)
        output.copy_(gathered.reshape(output.shape))
        return _Work([output])

    def _gather(self, tensor):
        """Every rank's tensor, stacked in rank order: (size, numel)."""
        comm = self._device_comm([tensor])
        src = _bytes(_Contiguous(tensor).work)
        if self._hosts == 1:
            out = torch.empty((self.size(), src.numel()), dtype=torch.uint8, device=tensor.device)
            comm.allgather(src, out=out)
        else:
            local = torch.empty((len(self._local_ranks), src.numel()), dtype=torch.uint8)
            comm.allgather(src, out=local)
            blocks = torch.empty((self.size(), src.numel()), dtype=torch.uint8)
            if self._cross is not None and src.numel() > 0:  # gloo divides by an empty block's size
                # Each leader sends its host's block, padded to the largest host.
                most = max(self._host_of.count(h) for h in range(self._hosts))
                padded = torch.zeros((most, src.numel()), dtype=torch.uint8)
                padded[: local.shape[0]] = local
                hosts = [torch.empty_like(padded) for _ in range(self._hosts)]
                self._across(comm, lambda: self._cross.allgather([hosts], [padded]).wait())
                for h in range(self._hosts):
                    members = [r for r in range(self.size()) if self._host_of[r] == h]
                    for i, r in enumerate(members):
                        blocks[r] = hosts[h][i]
            comm.broadcast(blocks, root=0)
            out = blocks
        if out.numel() == 0:  # no bytes to view as the dtype's elements
            return torch.empty((self.size(), 0), dtype=tensor.dtype, device=tensor.device)
        return out.view(tensor.dtype).reshape(self.size(), -1)

    @_refusing
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        output = self._one(output_tensors, "reduce_scatter")
        inputs = self._one(input_tensors, "reduce_scatter")
        if len(inputs) != self.size():
            raise _Refused("trainit backend: reduce_scatter of %d tensors for %d ranks" % (len(inputs), self.size()))
        for t in inputs:
            if t.dtype != output.dtype or t.numel() != output.numel():
                raise _Refused("trainit backend: reduce_scatter: an input of %s x %d for an output of %s x %d"
                               % (t.dtype, t.numel(), output.dtype, output.numel()))
        flat = torch.cat([t.reshape(-1) for t in inputs])
        self._reduce_scatter_flat(output, flat, opts, "reduce_scatter")
        return _Work(list(output_tensors))

    @_refusing
    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 (torch's names)
        if input.numel() != output.numel() * self.size() or input.dtype != output.dtype:
            raise _Refused("trainit backend: reduce_scatter_tensor: output %s x %d, input %s x %d on %d ranks"
                           % (output.dtype, output.numel(), input.dtype, input.numel(), self.size()))
        self._reduce_scatter_flat(output, input.reshape(-1), opts, "reduce_scatter_tensor")
        return _Work([output])

    def _reduce_scatter_flat(self, output, flat, opts, what):
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, what)
        comm = self._device_comm([output, flat])
        _dtype_name(output, what)
        n = output.numel()
        if self._hosts == 1:
            out = _Contiguous(output, copy_in=False)
            comm.reduce_scatter(flat.contiguous(), op=op, out=out.work.reshape(-1))
            out.finish()
            return
        total = flat.clone()
        self._allreduce_flat(total, opts)
        output.copy_(total[self.rank() * n:(self.rank() + 1) * n].view_as(output))

    def _allreduce_flat(self, tensor, opts):
        ar = dist.AllreduceOptions()
        if opts is not None:
            ar.reduceOp = opts.reduceOp
        self.allreduce([tensor], ar)

    @_refusing
    def reduce(self, tensors, opts=None):
        tensor = self._one(tensors, "reduce")
        root = opts.rootRank if opts is not None else 0
        self._check_root(root, "reduce")
        op = _op_name(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, "reduce")
        comm = self._device_comm([tensor])
        _dtype_name(tensor, "reduce")
        if self._hosts == 1:
            buf = _Contiguous(tensor)
            comm.reduce(buf.work, op=op, root=root, out=buf.work if self.rank() == root else None)
            if self.rank() == root:
                buf.finish()
        else:
            total = tensor.clone()
            self._allreduce_flat(total, opts)
            if self.rank() == root:
                tensor.copy_(total)
        return _Work(list(tensors))

    def barrier(self, opts=None):  # noqa: ARG002
        comm = self._comm("cpu")
        comm.barrier()
        if self._hosts > 1:
            if self._cross is not None:
                self._cross.barrier().wait()
            comm.barrier()
        return _Work([])

    def _check_root(self, root, what):
        if not 0 <= root < self.size():
            raise _Refused("trainit backend: %s from rank %d of a group of %d" % (what, root, self.size()))

    # --- what the core does not do ------------------------------------------

    def _unsupported(self, what):
        raise RuntimeError("trainit backend: %s is not supported (the core does all_reduce, broadcast, all_gather, "
                           "reduce_scatter, reduce and barrier)" % what)

    def send(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("send")

    def recv(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("recv")

    def recv_anysource(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("recv from any source")

    def alltoall(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("all_to_all")

    def alltoall_base(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("all_to_all_single")

    def gather(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("gather")

    def scatter(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("scatter")

    def allreduce_coalesced(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("all_reduce_coalesced")

    def allgather_coalesced(self, *args, **kwargs):  # noqa: ARG002
        self._unsupported("all_gather_coalesced")


def _create(store, rank, size, timeout):
    return ProcessGroupTrainit(store, rank, size, timeout)


def _register():
    if BACKEND.upper() in getattr(dist.Backend, "_plugins", {}) or hasattr(dist.Backend, BACKEND.upper()):
        return
    # torch 2.x asks which devices a backend takes (and warns when not told);
    # 1.13's register_backend has no such parameter.
    kwargs = {}
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        kwargs["devices"] = ["cpu", "cuda"]
    dist.Backend.register_backend(BACKEND, _create, **kwargs)


_register()
