// The collectives' protocol (protocol.h): what only some calls run (large
// calls' offsets, zero copy's buffers, shares), out of line.
#include "coll/protocol.h"

#include <cstring>

namespace trainit::coll {

void Call::put_offsets(SeqLine* l, const void* send, const void* recv) const {
  const uint64_t off[2] = {
      send != nullptr ? static_cast<uint64_t>(static_cast<const unsigned char*>(send) - c_->base) : 0,
      recv != nullptr ? static_cast<uint64_t>(static_cast<const unsigned char*>(recv) - c_->base) : 0};
  std::memcpy(l->data, off, sizeof(off));
}

// Whether every rank set the zero-copy flag in its first step's descriptor.
bool Call::all_zero_copy(uint32_t s) const {
  for (int p = 0; p < c_->n; ++p) {
    if ((arena_line(c_->base, p, s)->desc & kDescZeroCopy) == 0) {
      return false;
    }
  }
  return true;
}

unsigned char* Window::buffer(int p, int which) const {
  uint64_t off[2];
  std::memcpy(off, arena_line(c_->base, p, s_)->data, sizeof(off));
  return c_->base + off[which];
}

Share share(size_t len, int n, int i) {
  return {len * static_cast<size_t>(i) / static_cast<size_t>(n),
          len * static_cast<size_t>(i + 1) / static_cast<size_t>(n)};
}

bool in_heap(const trainit_comm* c, const void* p, size_t bytes) {
  const auto* q = static_cast<const unsigned char*>(p);
  return q != nullptr && q >= c->heap_all && bytes <= c->heap_all_bytes &&
         static_cast<size_t>(q - c->heap_all) <= c->heap_all_bytes - bytes;
}

bool overlap(const void* a, size_t alen, const void* b, size_t blen) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  return alen != 0 && blen != 0 && x < y + blen && y < x + alen;
}

}  // namespace trainit::coll
