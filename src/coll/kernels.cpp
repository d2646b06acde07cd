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
// The CPU's features from CPUID itself, asked only when a collective first
// needs its kernels: GCC's __builtin_cpu_supports() links libgcc's probe,
// which runs ~12 CPUIDs in a constructor at every start of every program
// that links this library, the init's exec mode included — and in a VM each
// CPUID traps to the hypervisor (3–4 µs on the development machine).
struct CpuFeatures {
  bool avx2;    // AVX2 and F16C, the YMM state saved by the OS
  bool avx512;  // AVX-512 F, BW, DQ, VL, the ZMM and opmask state saved
};

CpuFeatures cpu_features() {
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0 || (ecx & bit_AVX) == 0) {
    return {};
  }
  const bool f16c = (ecx & bit_F16C) != 0;
  unsigned xcr0_lo = 0;
  unsigned xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kXmmYmm = 0x6;      // XCR0 bits 1–2: SSE and AVX state
  constexpr unsigned kOpmaskZmm = 0xe0;  // bits 5–7: opmask, ZMM_Hi256, Hi16_ZMM
  if ((xcr0_lo & kXmmYmm) != kXmmYmm || __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) {
    return {};
  }
  constexpr unsigned kAvx512 = bit_AVX512F | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
  CpuFeatures f;
  f.avx2 = (ebx & bit_AVX2) != 0 && f16c;
  f.avx512 = (ebx & kAvx512) == kAvx512 && f16c && (xcr0_lo & kOpmaskZmm) == kOpmaskZmm;
  return f;
}
#endif

bool cpu_has(const char* name) {
#if defined(__x86_64__)
  if (std::strcmp(name, "avx2") == 0) {
    return cpu_features().avx2;
  }
  if (std::strcmp(name, "avx512") == 0) {
    return cpu_features().avx512;
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
