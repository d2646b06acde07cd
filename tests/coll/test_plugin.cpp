// Broken plugins for the loader's errors (tests/coll/backend_test.cpp):
// built once with TRAINIT_TEST_PLUGIN_BAD_ABI (the entry symbol, another ABI
// version) and once without (no entry symbol at all).
#include "coll/backend.h"

#ifdef TRAINIT_TEST_PLUGIN_BAD_ABI
namespace {
// Only its ABI version and name: every function stays null.
trainit_coll_backend bad_abi() {
  trainit_coll_backend b{};
  b.abi_version = TRAINIT_COLL_BACKEND_ABI + 1;
  b.name = "bad-abi";
  return b;
}
const trainit_coll_backend kBad = bad_abi();
}  // namespace

extern "C" __attribute__((visibility("default"))) const trainit_coll_backend* trainit_coll_backend_v1() {
  return &kBad;
}
#else
extern "C" __attribute__((visibility("default"))) int trainit_coll_not_a_backend() {
  return 0;
}
#endif
