// The collectives' protocol (protocol.h): what only some calls run (large
// calls' offsets, zero copy's buffers, shares), out of line.
#include "coll/protocol.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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

void hand_over(const trainit_comm* c, void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  if (!c->stream_handover) {
    copy(dst, src, bytes);
    return;
  }
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Plain stores up to a 16-byte boundary of dst and past the last one.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  copy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes / 16 * 16;
  for (size_t i = 0; i < body; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  }
  copy(d + body, s + body, bytes - body);
  // Streaming stores are weakly ordered: complete them before the step that
  // publishes them (a release store orders only ordinary ones).
  _mm_sfence();
#else
  (void)c;
  copy(dst, src, bytes);
#endif
}

Handover choose_handover(trainit_comm* c) {
  constexpr double kExploreEvery = 32;  // calls between tries of the dearer way, at least
  constexpr double kExploreRarest = 8;  // times that, at most
  const double plain = c->handover_ns_per_kib[0];
  const double streaming = c->handover_ns_per_kib[1];
  Handover h{false, false, 0};
  if (c->handover_forced >= 0) {
    h.stream = c->handover_forced == 1;
  } else if (c->handover_calls < 4) {
    h.stream = c->handover_calls % 2 == 1;  // each way twice at first: the first one of each is not measured
  } else {
    // A try costs what the dearer way costs: the dearer it is, the rarer,
    // so that tries cost about a 32nd of the calls' time.
    const bool cheaper = streaming < plain;
    const double dearer = cheaper ? plain / streaming : streaming / plain;
    const double every = kExploreEvery * (dearer > 1 ? std::min(dearer, kExploreRarest) : 1);
    h.explore = static_cast<double>(++c->handover_untried) >= every;
    c->handover_untried = h.explore ? 0 : c->handover_untried;
    h.stream = cheaper != h.explore;
  }
  ++c->handover_calls;
  c->stream_handover = h.stream;
  h.start_ns = comm_now_ns();
  return h;
}

void learn_handover(trainit_comm* c, Handover h, size_t bytes, int64_t now_ns) {
  if (c->handover_calls <= 2) {
    return;  // a first call of its way: page faults, cold caches
  }
  const double per_kib = static_cast<double>(now_ns - h.start_ns) * 1024.0 / static_cast<double>(bytes);
  double& avg = c->handover_ns_per_kib[h.stream ? 1 : 0];
  if (avg == 0 || h.explore) {
    // A try replaces the dearer way's figure: the one it had may be
    // hundreds of calls old, from before the cores moved. Averaged with it,
    // a way that became the cheaper one took several tries, hundreds of
    // calls, to be chosen again.
    avg = per_kib;
    return;
  }
  // A slow call (the first after the caches went to other work, a
  // preemption) counts as no worse than 1.5 times the average, which it
  // moves by an eighth at most: where it counted up to 4 times, two in a row
  // handed the calls after them to the dearer way until its next try. A
  // real change (the cores moved) still doubles the figure in 6 calls.
  avg += (std::min(per_kib, 1.5 * avg) - avg) / 4;
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
