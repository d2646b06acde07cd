"""trainit_coll: trainit's collective core (libtrainit_coll.so) from Python.

Reductions among the ranks of one node over shared memory, through ctypes:
no dependency beyond the standard library. Buffers may be numpy arrays,
torch CPU tensors (contiguous), or any writable C-contiguous buffer of a
supported item type (array.array, bytearray, memoryview):

    import numpy as np, trainit_coll
    with trainit_coll.Comm.from_env() as comm:      # a rank started by trainit
        grad = np.ones(1000, dtype=np.float32)
        comm.allreduce(grad, out=grad)              # in place
        total = comm.allreduce(grad, op="max")      # into a new array

    comm = trainit_coll.Comm("job-42", rank, size)  # standalone, outside trainit

Types: float32, float64, float16, int32, int64, uint8, and bfloat16 (torch
tensors). f16/bf16 accumulate in f32. Ops: "sum", "prod", "min", "max".

Device collectives. A communicator reduces the memory of the backend it is
made with: Comm(..., backend="cuda") or Comm.from_env(backend=...), where
backend is "host", "cuda", "ascend", a plugin NAME or a plugin's path, and
None takes $TRAINIT_COLL_BACKEND (unset: "host"); comm.backend names it. On
a device communicator the collectives take device memory, in two shapes:

    # torch tensors on the device (contiguous), as numpy arrays on the host:
    comm = trainit_coll.Comm.from_env(backend="cuda")
    grad = torch.ones(1 << 20, device="cuda")
    comm.allreduce(grad, out=grad)                  # in place
    total = comm.allreduce(grad)                    # torch allocates the result

    # a device address as an int, with its element count and type; out= is
    # required (the module allocates nothing), and may be the same address:
    ptr = comm.device_alloc(4 * n)
    comm.device_copy(ptr, host_floats)              # host -> device
    comm.allreduce(ptr, count=n, dtype="float32", out=ptr)
    comm.device_copy(host_floats, ptr)              # device -> host
    comm.device_free(ptr)

count is always the number of elements at `array` (reduce_scatter: size ×
the part each rank gets; allgather: each rank's part). With addresses,
reduce_scatter and allgather may also be in place (out == array), as in C:
reduce_scatter leaves the rank's part at the start of the buffer; allgather
takes the rank's part from out + rank × count elements. Host buffers are
refused on a device communicator and device tensors on a host one. The
stream rule is coll.h's: a call waits for the work this process issued on
its device, and its results are complete when it returns. A backend that
cannot be loaded raises CollError from the constructor, with the loader's
reason (trainit_backend_error) in the message.

Errors raise CollError (an OSError: .errno, and the library's message):
CollAbortedError (also a ConnectionAbortedError) once a peer died or the job
is stopping, CollTimeoutError (also a TimeoutError) when
TRAINIT_COLL_TIMEOUT passed. Bad arguments found here (an unknown op, an
unsupported type, an `out` of the wrong size or type) still take part in the
collective, as an invalid call: every rank raises CollError(EINVAL) for it,
none hangs, and the ranks stay in step for the next call.

The library is found in this order:
 1. $TRAINIT_COLL_LIBRARY (a path to libtrainit_coll.so): when set, only it;
 2. libtrainit_coll.so next to this file;
 3. where `cmake --install` put it, relative to this file (_install.py,
    written at install time);
 4. ctypes.util.find_library("trainit_coll") (the loader's search path).
"""

import ctypes
import ctypes.util
import errno as _errno
import os
import sys as _sys

__all__ = ["Comm", "CollError", "CollAbortedError", "CollTimeoutError", "DTYPES", "OPS", "library_path"]

# trainit_dtype and trainit_op (include/trainit/coll.h).
DTYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3, "int32": 4, "int64": 5, "uint8": 6}
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3}
_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1}
_INVALID = 255  # a dtype/op value the library rejects: the call still takes its step

_lib = None
_lib_path = None

# allreduce on numpy arrays in C (python/fast.cpp), where it was built for
# this interpreter (CPython 3.11 or later): a call costs about 0.4 µs in
# Python where the ctypes path takes 2.5. Without it the module is pure
# Python over ctypes.
try:
    from . import _fast
except ImportError:
    _fast = None


def _candidates():
    env = os.environ.get("TRAINIT_COLL_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libtrainit_coll.so")
    try:
        from . import _install  # written by `cmake --install`
        yield os.path.normpath(os.path.join(here, _install.LIBRARY_FROM_MODULE))
    except ImportError:
        pass
    found = ctypes.util.find_library("trainit_coll")
    if found:
        yield found


def _load():
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        vp, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
        protos = {
            "trainit_comm_init_from_env": [ctypes.POINTER(vp)],
            "trainit_comm_init": [ctypes.POINTER(vp), ctypes.c_char_p, i, i],
            "trainit_comm_init_from_env_backend": [ctypes.POINTER(vp), ctypes.c_char_p],
            "trainit_comm_init_backend": [ctypes.POINTER(vp), ctypes.c_char_p, i, i, ctypes.c_char_p],
            "trainit_comm_rank": [vp],
            "trainit_comm_size": [vp],
            "trainit_allreduce": [vp, vp, vp, sz, i, i],
            "trainit_reduce": [vp, vp, vp, sz, i, i, i],
            "trainit_reduce_scatter": [vp, vp, vp, sz, i, i],
            "trainit_allgather": [vp, vp, vp, sz, i],
            "trainit_broadcast": [vp, vp, sz, i, i],
            "trainit_barrier": [vp],
            "trainit_comm_destroy": [vp],
            "trainit_device_alloc": [vp, sz, ctypes.POINTER(vp)],
            "trainit_device_free": [vp, vp],
            "trainit_device_copy": [vp, vp, vp, sz],
            "trainit_comm_set_stream": [vp, vp],
            "trainit_comm_query": [vp],
            "trainit_comm_register": [vp, vp, sz],
            "trainit_comm_deregister": [vp, vp],
        }
        for name, args in protos.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = i
        lib.trainit_strerror.argtypes = [i]
        lib.trainit_strerror.restype = ctypes.c_char_p
        lib.trainit_comm_backend.argtypes = [vp]
        lib.trainit_comm_backend.restype = ctypes.c_char_p
        lib.trainit_backend_error.argtypes = []
        lib.trainit_backend_error.restype = ctypes.c_char_p
        if _fast is not None:
            _fast.bind(ctypes.cast(lib.trainit_allreduce, ctypes.c_void_p).value)
        _lib, _lib_path = lib, path
        return lib
    raise ImportError("trainit_coll: libtrainit_coll.so not found; tried: " + "; ".join(tried or ["nothing"]) +
                      " (set TRAINIT_COLL_LIBRARY to its path)")


def library_path():
    """The path (or name) the shared library was loaded from."""
    _load()
    return _lib_path


class CollError(OSError):
    """A collective failed: .errno is the error, the message trainit_strerror's."""


class CollAbortedError(CollError, ConnectionAbortedError):
    """-ECONNABORTED: a peer rank died or the job is stopping."""


class CollTimeoutError(CollError, TimeoutError):
    """-ETIMEDOUT: TRAINIT_COLL_TIMEOUT passed."""


def _error(rc, what, detail=None):
    err = -rc
    msg = _load().trainit_strerror(rc).decode("utf-8", "replace")
    msg = "%s: %s" % (what, msg)
    if detail:
        msg += " (%s)" % detail
    cls = {_errno.ECONNABORTED: CollAbortedError, _errno.ETIMEDOUT: CollTimeoutError}.get(err, CollError)
    return cls(err, msg)


class _ArgError(Exception):
    """A bad argument found here: the call is made invalid, not skipped."""


class _Buf:
    """A buffer's address, element count and type name, and what keeps it alive."""

    __slots__ = ("ptr", "count", "dtype", "keep", "obj", "kind")


def _torch():
    return _sys.modules.get("torch")


def _numpy():
    return _sys.modules.get("numpy")


# The fast path of a call on numpy arrays (Comm.allreduce): a C-contiguous
# array of a supported native type costs a few attribute reads and one
# ctypes call (about 1 µs), where the general path (_describe) builds its
# description and numpy's ctypes view (several µs). Anything else — another
# type, a strided or read-only array, an error to report — takes the general
# path, which decides and says why.
_np_ndarray = None  # numpy.ndarray, once the general path met numpy
_np_codes = {}  # numpy dtype.num -> the library's dtype, for the types it takes


def _learn_numpy(np):
    global _np_ndarray
    for char in "bBhHiIlLqQefdg":
        name = np.dtype(char).name
        if name in DTYPES:
            _np_codes[np.dtype(char).num] = DTYPES[name]
    _np_ndarray = np.ndarray


def _np_address(obj, writable):
    """(address, count, dtype) of numpy array obj if it takes the fast path,
    else None. writable: the library writes it."""
    dt = obj.dtype
    code = _np_codes.get(dt.num)
    flags = obj.flags
    count = obj.size
    if code is None or not dt.isnative or not flags.c_contiguous or count == 0:
        return None
    if flags.writeable:
        # The buffer protocol, in C: numpy's .ctypes view costs 3–4 times more.
        return ctypes.addressof(ctypes.c_char.from_buffer(obj)), count, code
    return None if writable else (obj.ctypes.data, count, code)


# The fast path of an allreduce on a device communicator (Comm.allreduce):
# addresses with count= and dtype=, or a contiguous device tensor with out=,
# go straight to the library (through _fast where it is built) after a few
# checks, where the general path costs 1.5–3 µs more in Python. Anything
# else, or anything wrong, takes the general path, which decides and says
# why (and keeps the ranks in step).
_U64 = 1 << 64
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1  # what a C int holds
_tensor_codes = {}  # a tensor's dtype -> the library's dtype, as met


def _device_tensor(t):
    """(address, count, dtype) of device tensor t if it takes the fast path,
    else None: the general path's checks (_describe), without its words."""
    if t.is_cpu or not t.is_contiguous():
        return None
    code = _tensor_codes.get(t.dtype)
    if code is None:
        code = DTYPES.get(str(t.dtype).replace("torch.", ""))
        if code is None:
            return None
        _tensor_codes[t.dtype] = code
    return t.data_ptr(), t.numel(), code


def _device_operands(array, out, count, dtype):
    """(send, recv, count, dtype) of a device allreduce if it takes the fast
    path, else None."""
    if type(array) is int:
        if type(out) is not int or type(count) is not int or type(dtype) is not str or not 0 <= count < _U64:
            return None
        code = DTYPES.get(dtype)
        if code is None or not (0 <= array < _U64 and 0 <= out < _U64):
            return None
        return array, out, count, code
    torch = _torch()
    if torch is None or type(array) is not torch.Tensor or count is not None or dtype is not None:
        return None
    src = _device_tensor(array)
    if src is None:
        return None
    if out is array:
        return src[0], src[0], src[1], src[2]
    if type(out) is not torch.Tensor:
        return None
    dst = _device_tensor(out)
    if dst is None or dst[1:] != src[1:]:
        return None
    return src[0], dst[0], src[1], src[2]


def _is_address(obj):
    return isinstance(obj, int) and not isinstance(obj, bool)


def _fits(value, what):
    """value, an address or size for C: 0 <= value < 2**64 (ctypes would cut
    a larger one down to its low bits)."""
    if not 0 <= value < _U64:
        raise ValueError("%s: %d does not fit 64 bits" % (what, value))
    return value


def _dtype_name(dtype):
    """"float32", a numpy dtype or type, or a torch dtype -> the name in DTYPES, or None."""
    if isinstance(dtype, str):
        return dtype if dtype in DTYPES else None
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype).replace("torch.", "")
    return name if name in DTYPES else None


def _address(value, count, dtype):
    """A buffer given as a plain address (an int) of count elements of dtype:
    the communicator backend's memory (device memory on a device one)."""
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count < _U64:
        raise _ArgError("an address needs count= (its elements, an int >= 0 that fits 64 bits), not %r" % (count,))
    name = _dtype_name(dtype)
    if name is None:
        raise _ArgError("an address needs dtype= one of %s, not %r" % (", ".join(DTYPES), dtype))
    if not 0 <= value < _U64:
        raise _ArgError("%#x is not an address" % value)
    b = _Buf()
    b.kind, b.obj, b.keep, b.ptr, b.count, b.dtype = "address", value, None, value or None, count, name
    return b


def _describe(obj, writable, device=False):
    """The buffer obj (an array, a tensor, a buffer); device: on a device
    communicator, where only device tensors are memory of its backend."""
    b = _Buf()
    b.obj = obj
    b.keep = None
    torch = _torch()
    np = _numpy()
    if np is not None and _np_ndarray is None:
        _learn_numpy(np)
    if torch is not None and isinstance(obj, torch.Tensor):
        if device and obj.device.type == "cpu":
            raise _ArgError("a CPU tensor on a device communicator: pass a device tensor or an address")
        if not device and obj.device.type != "cpu":
            raise _ArgError("a tensor on %s on a host communicator: only CPU tensors "
                            "(make the communicator with backend=)" % obj.device)
        if not obj.is_contiguous():
            raise _ArgError("a non-contiguous tensor")
        name = str(obj.dtype).replace("torch.", "")
        if name not in DTYPES:
            raise _ArgError("unsupported tensor type %s" % obj.dtype)
        b.kind, b.ptr, b.count, b.dtype = "torch", obj.data_ptr(), obj.numel(), name
        return b
    if device:
        raise _ArgError("host memory (%s) on a device communicator: pass a device tensor or an address"
                        % type(obj).__name__)
    if np is not None and isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise _ArgError("a non-contiguous array")
        if writable and not obj.flags.writeable:
            raise _ArgError("a read-only array")
        name = obj.dtype.name
        if name not in DTYPES or obj.dtype.byteorder == ">":
            raise _ArgError("unsupported array type %s" % obj.dtype)
        b.kind, b.ptr, b.count, b.dtype = "numpy", obj.ctypes.data, obj.size, name
        return b
    try:
        mv = memoryview(obj)
    except TypeError:
        raise _ArgError("not an array: %s" % type(obj).__name__) from None
    fmt = mv.format.lstrip("@=<")
    names = {"f": "float32", "d": "float64", "e": "float16", "B": "uint8", "b": None, "c": "uint8"}
    name = names.get(fmt)
    if fmt in ("i", "l", "q", "h", "I", "L", "Q"):
        name = {("i", 4): "int32", ("l", 4): "int32", ("l", 8): "int64", ("q", 8): "int64"}.get((fmt, mv.itemsize))
    if name is None or _ITEMSIZE[name] != mv.itemsize:
        raise _ArgError("unsupported buffer format %r" % mv.format)
    if not mv.c_contiguous:
        raise _ArgError("a non-contiguous buffer")
    n = mv.nbytes
    if mv.readonly:
        if writable:
            raise _ArgError("a read-only buffer")
        holder = _ReadOnlyExport(mv)  # ctypes' from_buffer wants a writable one; a copy would cost its size
        ptr = holder.address
    else:
        holder = (ctypes.c_char * n).from_buffer(mv.cast("B"))
        ptr = ctypes.addressof(holder)
    b.kind, b.ptr, b.count, b.dtype, b.keep = "buffer", ptr, n // mv.itemsize, name, holder
    return b


class _PyBuffer(ctypes.Structure):
    """CPython's Py_buffer (the buffer protocol's view; the same layout since 3.3)."""

    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_PyBUF_FULL_RO = 0x011C  # PyBUF_INDIRECT | PyBUF_FORMAT: any exporter answers it


class _ReadOnlyExport:
    """The address of a read-only, C-contiguous buffer (bytes, a read-only
    memoryview), held exported (PyObject_GetBuffer) until this object goes:
    the library reads it in place, nothing is copied."""

    __slots__ = ("_view", "address")

    def __init__(self, obj):
        api = ctypes.pythonapi
        self._view = None
        view = _PyBuffer()
        try:
            api.PyObject_GetBuffer(ctypes.py_object(obj), ctypes.byref(view), _PyBUF_FULL_RO)
        except BufferError as e:  # pythonapi raises what the exporter set
            raise _ArgError("the buffer cannot be read in place: %s" % e) from None
        self._view = view
        self.address = view.buf

    def __del__(self):
        if self._view is not None:
            ctypes.pythonapi.PyBuffer_Release(ctypes.byref(self._view))
            self._view = None


def _new_like(src, shape_count):
    """A new, uninitialised buffer of src's kind and type with count elements
    (shape_count: a shape tuple for numpy/torch, an element count otherwise)."""
    if src.kind == "torch":
        return _torch().empty(shape_count, dtype=src.obj.dtype, device=src.obj.device)
    if src.kind == "numpy":
        return _numpy().empty(shape_count, dtype=src.obj.dtype)
    count = shape_count if isinstance(shape_count, int) else _prod(shape_count)
    obj = src.obj
    import array
    if isinstance(obj, array.array):
        return array.array(obj.typecode, bytes(count * obj.itemsize))
    if src.dtype == "uint8":
        return bytearray(count)
    raise _ArgError("cannot allocate a result like %s: pass out=" % type(obj).__name__)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _shape(obj, count):
    shape = getattr(obj, "shape", None)
    return tuple(shape) if shape is not None else (count,)


class Comm:
    """A communicator among the ranks of this node.

    Comm(name, rank, size) joins processes that pass the same name and size
    and distinct ranks 0..size-1 (standalone; it leaves nothing behind);
    Comm.from_env() joins the arena trainit handed to this rank. Collectives
    are called by every rank in the same order, from one thread per rank.
    backend: the memory it reduces ("host", "cuda", "ascend", a plugin's
    name or path; None: $TRAINIT_COLL_BACKEND, else "host").
    """

    def __init__(self, name=None, rank=None, size=None, *, backend=None, _from_env=False):
        lib = _load()
        self._c = None
        self._fast_c = None  # the handle as an int, for _fast; None: no fast path
        self._dev_c = None  # the same for a device communicator's fast path
        if backend is not None and not isinstance(backend, (str, bytes, os.PathLike)):
            raise TypeError("backend: a name or a plugin's path (str), or None")
        raw_backend = None if backend is None else os.fsencode(backend)
        handle = ctypes.c_void_p()
        if _from_env:
            rc = lib.trainit_comm_init_from_env_backend(ctypes.byref(handle), raw_backend)
            what = "trainit_comm_init_from_env"
        else:
            if not isinstance(name, (str, bytes)) or not isinstance(rank, int) or not isinstance(size, int):
                raise TypeError("Comm(name: str, rank: int, size: int, backend=None)")
            if not (_INT_MIN <= rank <= _INT_MAX and _INT_MIN <= size <= _INT_MAX):
                raise ValueError("Comm: rank %d and size %d must each fit a C int" % (rank, size))
            raw = name.encode() if isinstance(name, str) else name
            rc = lib.trainit_comm_init_backend(ctypes.byref(handle), raw, rank, size, raw_backend)
            what = "trainit_comm_init(%r, %d, %d)" % (name, rank, size)
        if rc != 0:
            chosen = backend if backend is not None else os.environ.get("TRAINIT_COLL_BACKEND") or "host"
            why = lib.trainit_backend_error().decode("utf-8", "replace")
            raise _error(rc, "%s on backend %r" % (what, chosen), why or None)
        self._c = handle
        self._rank = lib.trainit_comm_rank(handle)
        self._size = lib.trainit_comm_size(handle)
        self._backend = lib.trainit_comm_backend(handle).decode("utf-8", "replace")
        self._device = self._backend != "host"
        if _fast is not None and not self._device:
            self._fast_c = handle.value
        if self._device:
            self._dev_c = handle.value

    @classmethod
    def from_env(cls, backend=None):
        """The communicator of a rank started by trainit (TRAINIT_COLL_FD,
        TRAINIT_LOCAL_RANK, TRAINIT_LOCAL_SIZE; a device one also
        TRAINIT_COLL_PEER_FDS)."""
        return cls(backend=backend, _from_env=True)

    @property
    def backend(self):
        """The backend's name: "host", "cuda", "ascend", or a plugin's own name."""
        return self._backend

    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    def close(self):
        """Leaves the communicator (idempotent)."""
        if self._c is not None:
            c, self._c, self._fast_c, self._dev_c = self._c, None, None, None
            rc = _lib.trainit_comm_destroy(c)
            if rc != 0:
                raise _error(rc, "trainit_comm_destroy")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        if getattr(self, "_c", None) is not None and _lib is not None:
            _lib.trainit_comm_destroy(self._c)
            self._c = self._fast_c = self._dev_c = None

    def __repr__(self):
        state = "closed" if self._c is None else "rank %d of %d, %s" % (self._rank, self._size, self._backend)
        return "<trainit_coll.Comm %s>" % state

    # --- the collectives ----------------------------------------------------

    def _handle(self):
        if self._c is None:
            raise CollError(_errno.EINVAL, "the communicator is closed")
        return self._c

    def _run(self, what, call, invalid):
        """call() -> rc; on an _ArgError, invalid() takes the step instead."""
        c = self._handle()
        detail = None
        try:
            rc = call(c)
        except _ArgError as e:
            detail = str(e)
            rc = invalid(c)
        if rc != 0:
            raise _error(rc, what, detail)
        if detail is not None:  # the library must have refused it
            raise CollError(_errno.EINVAL, "%s: %s" % (what, detail))

    @staticmethod
    def _root(root):
        """root, an int the library's int holds (the library checks its range)."""
        if not isinstance(root, int) or not _INT_MIN <= root <= _INT_MAX:
            raise _ArgError("root must be an int of a rank, not %r" % (root,))

    @staticmethod
    def _op(op):
        if op not in OPS:
            raise _ArgError("unknown op %r: one of %s" % (op, ", ".join(OPS)))
        return OPS[op]

    def _source(self, array, writable, count, dtype):
        """The input buffer: an address (with count and dtype), or an object."""
        if _is_address(array):
            return _address(array, count, dtype)
        if count is not None or dtype is not None:
            raise _ArgError("count= and dtype= describe an address (an int) only")
        return _describe(array, writable, self._device)

    def _out(self, src, out, shape_count, count):
        """The output buffer: out checked against src, or a new one."""
        if src.kind == "address":
            if not _is_address(out):
                raise _ArgError("with an address, out= must be an address too (the module allocates nothing)")
            return _address(out, count, src.dtype)
        if out is None:
            return _describe(_new_like(src, shape_count), True, self._device)
        if out is src.obj:
            return src
        dst = _describe(out, True, self._device)
        if dst.dtype != src.dtype:
            raise _ArgError("out is %s, the input %s" % (dst.dtype, src.dtype))
        if dst.count != count:
            raise _ArgError("out holds %d elements, %d needed" % (dst.count, count))
        return dst

    def allreduce(self, array, op="sum", out=None, *, count=None, dtype=None):
        """Reduces array over every rank into out (a new array when None;
        in place when out is array); returns out. An address (an int) takes
        count= and dtype=, and out= another address or the same."""
        fc = self._fast_c
        if fc is not None and type(array) is _np_ndarray and type(out) is _np_ndarray and type(op) is str:
            o = OPS.get(op)
            rc = None if o is None else _fast.allreduce(fc, array, out, o)
            if rc == 0:
                return out
            if rc is not None:
                raise _error(rc, "allreduce")
        c = self._c
        if (c is not None and type(array) is _np_ndarray and type(out) is _np_ndarray and type(op) is str
                and not self._device):
            fast = self._allreduce_numpy(c, array, op, out)
            if fast is not None:
                return fast
        dc = self._dev_c
        if dc is not None and type(op) is str and out is not None:
            o = OPS.get(op)
            args = None if o is None else _device_operands(array, out, count, dtype)
            if args is not None:
                if _fast is not None:
                    rc = _fast.allreduce_at(dc, args[0], args[1], args[2], args[3], o)
                else:
                    rc = _lib.trainit_allreduce(c, args[0] or None, args[1] or None, args[2], args[3], o)
                if rc != 0:
                    raise _error(rc, "allreduce")
                return out
        res = []

        def call(c):
            src = self._source(array, out is array, count, dtype)
            o = self._op(op)
            dst = self._out(src, out, _shape(array, src.count), src.count)
            res.append(dst.obj)
            return _lib.trainit_allreduce(c, src.ptr, dst.ptr, src.count, DTYPES[src.dtype], o)

        self._run("allreduce", call, lambda c: _lib.trainit_allreduce(c, None, None, 0, _INVALID, _INVALID))
        return res[0]

    @staticmethod
    def _allreduce_numpy(c, array, op, out):
        """allreduce's fast path (numpy arrays, out given): out, or None if the
        arguments need the general path (before any step is taken)."""
        o = OPS.get(op)
        src = _np_address(array, out is array)
        if o is None or src is None:
            return None
        if out is array:
            dst = src[0]
        else:
            into = _np_address(out, True)
            if into is None or into[1:] != src[1:]:
                return None
            dst = into[0]
        rc = _lib.trainit_allreduce(c, src[0], dst, src[1], src[2], o)
        if rc != 0:
            raise _error(rc, "allreduce")
        return out

    def reduce(self, array, op="sum", root=0, out=None, *, count=None, dtype=None):
        """Reduces array over every rank into out on root (a new array when
        None); returns out on root, and out (unwritten) or None elsewhere."""
        res = []

        def call(c):
            src = self._source(array, out is array, count, dtype)
            o = self._op(op)
            self._root(root)
            if self._rank != root and out is None:
                res.append(None)
                return _lib.trainit_reduce(c, src.ptr, None, src.count, DTYPES[src.dtype], o, root)
            dst = self._out(src, out, _shape(array, src.count), src.count)
            res.append(dst.obj)
            return _lib.trainit_reduce(c, src.ptr, dst.ptr, src.count, DTYPES[src.dtype], o, root)

        self._run("reduce", call, lambda c: _lib.trainit_reduce(c, None, None, 0, _INVALID, _INVALID, 0))
        return res[0]

    def reduce_scatter(self, array, op="sum", out=None, *, count=None, dtype=None):
        """Reduces array (size × n elements) over every rank; rank r gets
        the reduced elements [r·n, (r+1)·n) in out (a new array when None;
        numpy/torch: shape (shape[0] / size, *shape[1:]), or flat). An
        address's count is size × n; out may be the same address (the part
        lands at its start)."""
        res = []

        def call(c):
            src = self._source(array, False, count, dtype)
            o = self._op(op)
            if src.count % self._size != 0:
                raise _ArgError("%d elements do not split among %d ranks" % (src.count, self._size))
            n = src.count // self._size
            shape = _shape(array, src.count)
            if len(shape) >= 1 and shape[0] % self._size == 0:
                shape = (shape[0] // self._size,) + shape[1:]
            else:
                shape = (n,)
            if out is array and src.kind != "address":
                raise _ArgError("reduce_scatter cannot be in place: pass another out")
            dst = self._out(src, out, shape, n)
            res.append(dst.obj)
            return _lib.trainit_reduce_scatter(c, src.ptr, dst.ptr, n, DTYPES[src.dtype], o)

        self._run("reduce_scatter", call,
                  lambda c: _lib.trainit_reduce_scatter(c, None, None, 0, _INVALID, _INVALID))
        return res[0]

    def allgather(self, array, out=None, *, count=None, dtype=None):
        """Every rank's array, in rank order, into out (a new array when
        None; numpy/torch: shape (size, *array.shape)). An address's count
        is its rank's part; out may be the same address, holding size ×
        count elements with this rank's part already at rank × count."""
        res = []

        def call(c):
            src = self._source(array, False, count, dtype)
            if out is array and src.kind != "address":
                raise _ArgError("allgather cannot be in place: pass another out")
            shape = (self._size,) + _shape(array, src.count) if src.kind != "buffer" else src.count * self._size
            dst = self._out(src, out, shape, src.count * self._size)
            res.append(dst.obj)
            send = src.ptr
            if src.kind == "address" and send is not None and send == dst.ptr:
                # In place: the rank's part is read where it lies in out (the
                # form every backend takes; the host one also takes send == recv).
                send += self._rank * src.count * _ITEMSIZE[src.dtype]
            return _lib.trainit_allgather(c, send, dst.ptr, src.count, DTYPES[src.dtype])

        self._run("allgather", call, lambda c: _lib.trainit_allgather(c, None, None, 0, _INVALID))
        return res[0]

    def broadcast(self, array, root=0, *, count=None, dtype=None):
        """Root's array into every rank's array (in place); returns array.
        An address takes count= and dtype=."""

        def call(c):
            self._root(root)
            buf = self._source(array, True, count, dtype)
            return _lib.trainit_broadcast(c, buf.ptr, buf.count, DTYPES[buf.dtype], root)

        self._run("broadcast", call, lambda c: _lib.trainit_broadcast(c, None, 0, _INVALID, 0))
        return array

    def barrier(self):
        """Returns once every rank called barrier()."""
        self._run("barrier", lambda c: _lib.trainit_barrier(c), lambda c: _lib.trainit_barrier(c))

    # --- the backend's memory -----------------------------------------------

    def device_alloc(self, nbytes):
        """nbytes of the backend's memory (host memory on "host"): its
        address, an int, for the collectives' address form and device_copy;
        give it back with device_free."""
        if not isinstance(nbytes, int) or nbytes < 0:
            raise TypeError("device_alloc(nbytes: int >= 0)")
        _fits(nbytes, "device_alloc")
        ptr = ctypes.c_void_p()
        rc = _lib.trainit_device_alloc(self._handle(), nbytes, ctypes.byref(ptr))
        if rc != 0:
            raise _error(rc, "device_alloc(%d) on %s" % (nbytes, self._backend))
        return ptr.value or 0

    def device_free(self, ptr):
        """Frees an address from device_alloc (0: nothing)."""
        if not _is_address(ptr):
            raise TypeError("device_free(ptr: int)")
        rc = _lib.trainit_device_free(self._handle(), _fits(ptr, "device_free") or None)
        if rc != 0:
            raise _error(rc, "device_free(%#x) on %s" % (ptr, self._backend))

    def set_stream(self, stream):
        """Stream-ordered calls (a device communicator whose backend
        launches: CUDA, the fake device): each collective is enqueued on
        stream (a cudaStream_t as an int, a torch.cuda.Stream, or any
        non-zero int on the fake device) and returns at once; query() says
        when they are done. None waits for them and goes back to calls that
        return done. An error of an enqueued call is raised by the next call
        or query()."""
        if stream is not None and not _is_address(stream):
            stream = getattr(stream, "cuda_stream", stream)
        if stream is not None and not _is_address(stream):
            raise TypeError("set_stream(stream: int, a torch.cuda.Stream or None)")
        if stream is not None:
            _fits(stream, "set_stream")
        rc = _lib.trainit_comm_set_stream(self._handle(), stream or None)
        if rc != 0:
            raise _error(rc, "set_stream on %s" % self._backend)

    def query(self):
        """True when every stream-ordered call is done, False while one
        runs; raises the error of one that failed."""
        rc = _lib.trainit_comm_query(self._handle())
        if rc == -_errno.EINPROGRESS:
            return False
        if rc != 0:
            raise _error(rc, "a stream-ordered call on %s" % self._backend)
        return True

    def register(self, ptr, nbytes):
        """Registers nbytes at ptr (an address from device_alloc, its start)
        as a window, on every rank at once (each its own buffer of the same
        size; a device communicator whose backend launches): a call past the
        one-shot bound whose buffer lies in it, at the same offset on every
        rank (an allreduce's or reduce's array, an allgather's out, a
        reduce_scatter's array out of place, a broadcast's array), then
        reads and writes the ranks' buffers where they are.
        Raises CollError (EINVAL on every rank, in step) when any rank's
        buffer or arguments cannot be registered."""
        def call(c):
            if not _is_address(ptr) or isinstance(nbytes, bool) or not isinstance(nbytes, int):
                raise _ArgError("register(ptr: int, nbytes: int), not %r, %r" % (ptr, nbytes))
            if not 0 <= ptr < _U64 or not 0 <= nbytes < _U64:
                raise _ArgError("register: %d, %d do not fit 64 bits" % (ptr, nbytes))
            return _lib.trainit_comm_register(c, ptr or None, nbytes)
        self._run("register on %s" % self._backend, call, lambda c: _lib.trainit_comm_register(c, None, 0))

    def deregister(self, ptr):
        """Ends the window at ptr, on every rank at once, once the calls in
        flight are done; when it returns no peer maps it and it may be
        freed."""
        def call(c):
            if not _is_address(ptr) or not 0 <= ptr < _U64:
                raise _ArgError("deregister(ptr: an int address), not %r" % (ptr,))
            return _lib.trainit_comm_deregister(c, ptr or None)
        self._run("deregister on %s" % self._backend, call, lambda c: _lib.trainit_comm_deregister(c, None))

    def device_copy(self, dst, src, nbytes=None):
        """Copies nbytes from src to dst, either an address (device or host
        memory) or a host buffer (bytearray, array.array, numpy array, a
        tensor), in place; done when it returns. nbytes defaults to the
        buffer's size (needed when both are addresses)."""
        c = self._handle()
        dst_ptr, dst_len, keep_dst = _copy_end(dst, True)
        src_ptr, src_len, keep_src = _copy_end(src, False)
        known = [n for n in (dst_len, src_len) if n is not None]
        if nbytes is None:
            if not known:
                raise TypeError("device_copy between two addresses needs nbytes=")
            nbytes = min(known)
        if not isinstance(nbytes, int) or nbytes < 0:
            raise TypeError("device_copy: nbytes must be an int >= 0")
        _fits(nbytes, "device_copy")
        if any(n < nbytes for n in known):
            raise ValueError("device_copy of %d bytes: a buffer holds only %d" % (nbytes, min(known)))
        rc = _lib.trainit_device_copy(c, dst_ptr, src_ptr, nbytes)
        del keep_dst, keep_src  # held exported until the copy is done
        if rc != 0:
            raise _error(rc, "device_copy of %d bytes on %s" % (nbytes, self._backend))


def _copy_end(obj, writable):
    """(address, bytes or None, what keeps it alive) of one end of a copy."""
    if _is_address(obj):
        return _fits(obj, "device_copy") or None, None, None
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        if not obj.is_contiguous():
            raise ValueError("device_copy: a non-contiguous tensor")
        return obj.data_ptr(), obj.numel() * obj.element_size(), obj
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError("device_copy: an address (int) or a buffer, not %s" % type(obj).__name__) from None
    if not mv.c_contiguous:
        raise ValueError("device_copy: a non-contiguous buffer")
    if mv.readonly:
        if writable:
            raise ValueError("device_copy: a read-only destination")
        holder = _ReadOnlyExport(mv)
        return holder.address, mv.nbytes, holder
    if mv.nbytes == 0:
        return None, 0, None
    holder = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return ctypes.addressof(holder), mv.nbytes, holder
