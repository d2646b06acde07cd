// A thin RAII wrapper over trainit/coll.h: one Comm owns one trainit_comm
// and destroys it. Move-only; every method returns what the C call returns
// (0 or a negative errno) and throws nothing. Same contract as coll.h: one
// thread per rank calls a Comm's collectives, every rank in the same order.
#ifndef TRAINIT_COLL_HPP
#define TRAINIT_COLL_HPP

#include <cstddef>

#include "trainit/coll.h"

namespace trainit::coll {

class Comm {
 public:
  Comm() noexcept = default;
  ~Comm() { reset(); }
  Comm(Comm&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  Comm& operator=(Comm&& other) noexcept {
    if (this != &other) {
      reset();
      comm_ = other.comm_;
      other.comm_ = nullptr;
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // A rank started by trainit (TRAINIT_COLL_FD, TRAINIT_LOCAL_RANK,
  // TRAINIT_LOCAL_SIZE): 0 or a negative errno; *this is left empty on error.
  int init_from_env() noexcept {
    reset();
    return trainit_comm_init_from_env(&comm_);
  }
  // Standalone: processes passing the same name and size, each its own rank.
  int init(const char* name, int rank, int size) noexcept {
    reset();
    return trainit_comm_init(&comm_, name, rank, size);
  }
  // The same on a chosen backend: "host", "cuda", "ascend", a plugin's name
  // or path; nullptr takes TRAINIT_COLL_BACKEND. On error,
  // trainit_backend_error() says why in words.
  int init_from_env_backend(const char* backend) noexcept {
    reset();
    return trainit_comm_init_from_env_backend(&comm_, backend);
  }
  int init_backend(const char* name, int rank, int size, const char* backend) noexcept {
    reset();
    return trainit_comm_init_backend(&comm_, name, rank, size, backend);
  }

  explicit operator bool() const noexcept { return comm_ != nullptr; }
  trainit_comm* get() const noexcept { return comm_; }
  int rank() const noexcept { return trainit_comm_rank(comm_); }
  int size() const noexcept { return trainit_comm_size(comm_); }
  // "host", "cuda", "ascend" or a plugin's own name; on a device backend the
  // collectives take device pointers (coll.h: the ordering rule).
  const char* backend() const noexcept { return trainit_comm_backend(comm_); }

  int allreduce(const void* send, void* recv, size_t count, trainit_dtype dtype, trainit_op op) noexcept {
    return trainit_allreduce(comm_, send, recv, count, dtype, op);
  }
  int reduce(const void* send, void* recv, size_t count, trainit_dtype dtype, trainit_op op, int root) noexcept {
    return trainit_reduce(comm_, send, recv, count, dtype, op, root);
  }
  int reduce_scatter(const void* send, void* recv, size_t recvcount, trainit_dtype dtype, trainit_op op) noexcept {
    return trainit_reduce_scatter(comm_, send, recv, recvcount, dtype, op);
  }
  int allgather(const void* send, void* recv, size_t sendcount, trainit_dtype dtype) noexcept {
    return trainit_allgather(comm_, send, recv, sendcount, dtype);
  }
  int broadcast(void* buf, size_t count, trainit_dtype dtype, int root) noexcept {
    return trainit_broadcast(comm_, buf, count, dtype, root);
  }
  int barrier() noexcept { return trainit_barrier(comm_); }

  // From the arena: peers read such buffers in place. nullptr when full.
  void* alloc(size_t bytes) noexcept { return trainit_alloc(comm_, bytes); }
  void free(void* ptr) noexcept { trainit_free(comm_, ptr); }

  // The backend's memory (host memory on "host"): 0 or a negative errno.
  int device_alloc(size_t bytes, void** ptr) noexcept { return trainit_device_alloc(comm_, bytes, ptr); }
  int device_free(void* ptr) noexcept { return trainit_device_free(comm_, ptr); }
  // Device and host memory either way, or within the device; done on return.
  int device_copy(void* dst, const void* src, size_t bytes) noexcept {
    return trainit_device_copy(comm_, dst, src, bytes);
  }
  int set_stream(void* stream) noexcept { return trainit_comm_set_stream(comm_, stream); }
  int register_window(void* buf, size_t bytes) noexcept { return trainit_comm_register(comm_, buf, bytes); }
  int deregister_window(void* buf) noexcept { return trainit_comm_deregister(comm_, buf); }
  int query() noexcept { return trainit_comm_query(comm_); }

  // Destroys the communicator now: 0 or a negative errno.
  int reset() noexcept {
    trainit_comm* c = comm_;
    comm_ = nullptr;
    return trainit_comm_destroy(c);
  }

 private:
  trainit_comm* comm_ = nullptr;
};

}  // namespace trainit::coll

#endif  // TRAINIT_COLL_HPP
