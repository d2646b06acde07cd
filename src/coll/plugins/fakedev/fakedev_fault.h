// The fake device's fault knob, TRAINIT_FAKEDEV_FAULT (fakedev.cpp), read
// here so that its tests need no plugin: "DEVICE:KIND[,DEVICE:KIND...]",
// KIND one of
//   fail   init() returns -ENODEV (no such device)
//   hang   the first copy, reduce or fold never returns
//   wrong  every reduce and fold flips the lowest bit of its first result
//   late   the stream retires each launched call 2 s after its blocks end
//          (query() says it runs until then)
//   mute   launched calls store no done words (device_algo.h): a
//          synchronous call learns its end from query() alone
// Header only, no allocation: the plugin has no libstdc++ at run time.
#pragma once

#include <cstddef>
#include <cstring>

namespace trainit::coll {

enum class FakedevFault { kNone, kFail, kHang, kWrong, kLate, kMute };

struct FakedevFaultSpec {
  bool valid = true;  // false: the knob is malformed (the plugin refuses to start)
  FakedevFault fault = FakedevFault::kNone;
};

namespace detail {

inline FakedevFault fault_kind(const char* s, size_t len, bool* ok) noexcept {
  struct Named {
    const char* name;
    FakedevFault fault;
  };
  static constexpr Named kKinds[] = {{"fail", FakedevFault::kFail},
                                     {"hang", FakedevFault::kHang},
                                     {"wrong", FakedevFault::kWrong},
                                     {"late", FakedevFault::kLate},
                                     {"mute", FakedevFault::kMute}};
  for (const Named& k : kKinds) {
    if (std::strlen(k.name) == len && std::memcmp(k.name, s, len) == 0) {
      return k.fault;
    }
  }
  *ok = false;
  return FakedevFault::kNone;
}

}  // namespace detail

// The fault `knob` gives `device` (the first entry naming it); kNone when
// none does or the knob is unset or empty. Each entry is checked, those of
// other devices too: one malformed entry makes the whole knob invalid.
inline FakedevFaultSpec fakedev_fault(const char* knob, long device) noexcept {
  FakedevFaultSpec out;
  if (knob == nullptr || *knob == '\0') {
    return out;
  }
  bool found = false;
  const char* at = knob;
  while (true) {
    const char* comma = std::strchr(at, ',');
    const char* end = comma != nullptr ? comma : at + std::strlen(at);
    const char* colon = static_cast<const char*>(std::memchr(at, ':', static_cast<size_t>(end - at)));
    long number = 0;
    bool ok = colon != nullptr && colon > at && colon - at <= 6;
    for (const char* p = at; ok && p < colon; ++p) {
      ok = *p >= '0' && *p <= '9';
      number = number * 10 + (*p - '0');
    }
    const FakedevFault kind = ok ? detail::fault_kind(colon + 1, static_cast<size_t>(end - colon - 1), &ok) : out.fault;
    if (!ok) {
      return FakedevFaultSpec{false, FakedevFault::kNone};
    }
    if (number == device && !found) {
      found = true;
      out.fault = kind;
    }
    if (comma == nullptr) {
      return out;
    }
    at = comma + 1;
  }
}

}  // namespace trainit::coll
