#include "coll/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace trainit::coll {
namespace {

#if defined(__x86_64__)
// F16C (CPUID.1:ECX bit 29): every AVX2 CPU has it, but ask all the same.
bool has_f16c() {
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
}
#endif

bool cpu_has(const char* name) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (std::strcmp(name, "avx2") == 0) {
    return __builtin_cpu_supports("avx2") && has_f16c();
  }
  if (std::strcmp(name, "avx512") == 0) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }
#endif
  return std::strcmp(name, "scalar") == 0 || std::strcmp(name, kernels_vec128()->name) == 0;
}

}  // namespace

size_t dtype_size(int dtype) {
  static constexpr size_t kSizes[kDtypes] = {4, 8, 2, 2, 4, 8, 1};
  return dtype >= 0 && dtype < kDtypes ? kSizes[dtype] : 0;
}

const Kernels* kernels_by_name(const char* name) {
  if (name == nullptr || !cpu_has(name)) {
    return nullptr;
  }
  if (std::strcmp(name, "scalar") == 0) {
    return kernels_scalar();
  }
#if defined(__x86_64__)
  if (std::strcmp(name, "avx2") == 0) {
    return kernels_avx2();
  }
  if (std::strcmp(name, "avx512") == 0) {
    return kernels_avx512();
  }
#endif
  return kernels_vec128();
}

namespace {

const Kernels* choose_best() {
  // TRAINIT_COLL_ISA names a table (tests, benches); unknown or unsupported
  // names fall back to the best.
  if (const Kernels* k = kernels_by_name(std::getenv("TRAINIT_COLL_ISA"))) {
    return k;
  }
  for (const char* name : {"avx512", "avx2"}) {
    if (const Kernels* k = kernels_by_name(name)) {
      return k;
    }
  }
  return kernels_vec128();
}

}  // namespace

const Kernels* kernels_best() {
  // Racing first callers compute the same answer; no guard needed.
  static std::atomic<const Kernels*> best{nullptr};
  const Kernels* k = best.load(std::memory_order_acquire);
  if (k == nullptr) {
    k = choose_best();
    best.store(k, std::memory_order_release);
  }
  return k;
}

}  // namespace trainit::coll
