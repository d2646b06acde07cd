// Broken plugins for the loader's errors (tests/coll/backend_test.cpp):
// built once with TRAINIT_TEST_PLUGIN_BAD_ABI (the entry symbol, another ABI
// version) and once without (no entry symbol at all).
#include "coll/backend.h"

#ifdef TRAINIT_TEST_PLUGIN_BAD_ABI
namespace {
constexpr trainit_coll_backend kBad = {TRAINIT_COLL_BACKEND_ABI + 1,
                                       "bad-abi",
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr};
}  // namespace

extern "C" __attribute__((visibility("default"))) const trainit_coll_backend* trainit_coll_backend_v1() {
  return &kBad;
}
#else
extern "C" __attribute__((visibility("default"))) int trainit_coll_not_a_backend() {
  return 0;
}
#endif
