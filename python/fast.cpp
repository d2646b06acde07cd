// trainit_coll._fast: the module's allreduce on numpy arrays and on device
// addresses, in C.
//
// The ctypes path costs about 2.5 µs a call in Python before the library
// sees it (the array's flags, its address through a ctypes object, six
// arguments converted one by one). Here one call takes the buffers through
// the buffer protocol, checks them, and calls the library's
// trainit_allreduce with the interpreter's lock released: a few hundred
// nanoseconds. The buffers stay exported (their memory pinned: numpy refuses
// to resize an exported array) until the library has returned.
//
// The stable ABI of Python 3.11 (the buffer protocol joined it there): one
// build loads into every later CPython. The module does not link the
// library: __init__.py hands it the address of the trainit_allreduce it
// loaded, so both paths use the same library and the same communicators.
//
//   bind(address)                 the library's trainit_allreduce
//   allreduce(comm, src, dst, op) -> the call's return code, or None when
//                                    the buffers need the general path
//                                    (another type, strided, read-only
//                                    where written, empty, src and dst
//                                    unlike); nothing was called then
//   allreduce_at(comm, send, recv, count, dtype, op)
//                                 -> the call's return code: a device
//                                    communicator's allreduce of addresses
//                                    the module has checked (ints), with
//                                    the lock released as above
#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstddef>

#include "trainit/coll.h"

namespace {

// trainit_dtype, by the buffer's struct format.
enum Dtype : int {
  kF32 = TRAINIT_F32,
  kF64 = TRAINIT_F64,
  kF16 = TRAINIT_F16,
  kI32 = TRAINIT_I32,
  kI64 = TRAINIT_I64,
  kU8 = TRAINIT_U8,
  kNone = -1
};

// Called through a pointer of its own type: a call through another (ints
// for its enums) is undefined, whatever the calling convention makes of it.
using AllreduceFn = decltype(&trainit_allreduce);
AllreduceFn g_allreduce = nullptr;

// The dtype of a buffer of native items of one type ("f", "@f", "=f" and,
// on a little-endian machine, "<f"), or kNone. Integers by their size:
// numpy's int64 is "l" here, "q" elsewhere.
Dtype dtype_of(const Py_buffer& b) {
  const char* f = b.format;
  if (f == nullptr) {
    return kU8;  // no format: unsigned bytes
  }
  if (*f == '@' || *f == '=' || (*f == '<' && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__)) {
    ++f;
  }
  if (f[0] == '\0' || f[1] != '\0') {
    return kNone;
  }
  Py_ssize_t size = b.itemsize;
  switch (f[0]) {
    case 'f':
      return size == 4 ? kF32 : kNone;
    case 'd':
      return size == 8 ? kF64 : kNone;
    case 'e':
      return size == 2 ? kF16 : kNone;
    case 'i':
    case 'l':
    case 'q':
      return size == 4 ? kI32 : size == 8 ? kI64 : kNone;
    case 'B':
      return size == 1 ? kU8 : kNone;
    default:
      return kNone;
  }
}

// A C-contiguous buffer of obj (writable if asked) holding one supported
// type: true, and *b to release; false (no error set) otherwise.
bool export_buffer(PyObject* obj, bool writable, Py_buffer* b, Dtype* dtype) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, b, flags) != 0) {
    PyErr_Clear();  // not ours to report: the general path says why
    return false;
  }
  *dtype = dtype_of(*b);
  if (*dtype == kNone || b->len == 0) {
    PyBuffer_Release(b);
    return false;
  }
  return true;
}

PyObject* bind(PyObject* /*self*/, PyObject* address) {
  void* fn = PyLong_AsVoidPtr(address);
  if (fn == nullptr) {
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_ValueError, "bind: a null address");
    }
    return nullptr;
  }
  g_allreduce = reinterpret_cast<AllreduceFn>(fn);
  Py_RETURN_NONE;
}

// A call of nargs arguments, where usage wants want, with the library
// bound: true; false with the error set otherwise.
bool callable(Py_ssize_t nargs, Py_ssize_t want, const char* usage) {
  if (nargs != want) {
    PyErr_SetString(PyExc_TypeError, usage);
    return false;
  }
  if (g_allreduce == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "bind() was not called");
    return false;
  }
  return true;
}

PyObject* allreduce(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (!callable(nargs, 4, "allreduce(comm, src, dst, op)")) {
    return nullptr;
  }
  void* comm = PyLong_AsVoidPtr(args[0]);
  long op = PyLong_AsLong(args[3]);
  if (PyErr_Occurred()) {
    return nullptr;
  }
  bool in_place = args[1] == args[2];
  Py_buffer src{};
  Dtype dtype = kNone;
  if (!export_buffer(args[1], in_place, &src, &dtype)) {
    Py_RETURN_NONE;
  }
  Py_buffer dst{};
  if (!in_place) {
    Dtype out_dtype = kNone;
    if (!export_buffer(args[2], true, &dst, &out_dtype)) {
      PyBuffer_Release(&src);
      Py_RETURN_NONE;
    }
    if (out_dtype != dtype || dst.len != src.len) {
      PyBuffer_Release(&dst);
      PyBuffer_Release(&src);
      Py_RETURN_NONE;
    }
  }
  void* recv = in_place ? src.buf : dst.buf;
  auto count = static_cast<size_t>(src.len / src.itemsize);
  PyThreadState* thread = PyEval_SaveThread();  // other threads run while the ranks reduce
  int rc = g_allreduce(static_cast<trainit_comm*>(comm), src.buf, recv, count, static_cast<trainit_dtype>(dtype),
                       static_cast<trainit_op>(op));
  PyEval_RestoreThread(thread);
  if (!in_place) {
    PyBuffer_Release(&dst);
  }
  PyBuffer_Release(&src);
  return PyLong_FromLong(rc);
}

PyObject* allreduce_at(PyObject* /*self*/, PyObject* const* args, Py_ssize_t nargs) {
  if (!callable(nargs, 6, "allreduce_at(comm, send, recv, count, dtype, op)")) {
    return nullptr;
  }
  void* comm = PyLong_AsVoidPtr(args[0]);
  void* send = PyLong_AsVoidPtr(args[1]);
  void* recv = PyLong_AsVoidPtr(args[2]);
  const size_t count = PyLong_AsSize_t(args[3]);
  const long dtype = PyLong_AsLong(args[4]);
  const long op = PyLong_AsLong(args[5]);
  if (PyErr_Occurred()) {
    return nullptr;
  }
  PyThreadState* thread = PyEval_SaveThread();
  const int rc = g_allreduce(static_cast<trainit_comm*>(comm), send, recv, count, static_cast<trainit_dtype>(dtype),
                             static_cast<trainit_op>(op));
  PyEval_RestoreThread(thread);
  return PyLong_FromLong(rc);
}

PyMethodDef g_methods[] = {
    {"bind", bind, METH_O, "bind(address): the library's trainit_allreduce"},
    {"allreduce", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce)), METH_FASTCALL,
     "allreduce(comm, src, dst, op) -> rc, or None where the general path is needed"},
    {"allreduce_at", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(allreduce_at)), METH_FASTCALL,
     "allreduce_at(comm, send, recv, count, dtype, op) -> rc: device addresses"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef g_module = {
    PyModuleDef_HEAD_INIT,
    "_fast",
    "trainit_coll's allreduce on numpy arrays and device addresses, in C",
    -1,
    g_methods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace

// CPython finds the module's init by this name.
PyMODINIT_FUNC PyInit__fast() {  // NOLINT(bugprone-reserved-identifier)
  return PyModule_Create(&g_module);
}
