// The reduction kernels' body, compiled once per ISA: the including file
// defines KERNEL_NS (the namespace), KERNEL_WIDTH (vector bytes; 0: scalar
// only), KERNEL_NAME, and may define KERNEL_F16_TO_F32(float* out, const
// unsigned char* in) / KERNEL_F16_FROM_F32(unsigned char* out, const float*
// in) converting KERNEL_WIDTH / 4 halves with the hardware.
//
// Everything here is internal to its file (an anonymous namespace, builtins
// only): the ISA flags the file is compiled with must not leak into an inline
// function the linker could pick for the rest of the program.
#include <cstdint>
#include <type_traits>

#include "coll/kernels.h"

namespace trainit::coll::KERNEL_NS {
namespace {

constexpr bool kVector = KERNEL_WIDTH > 0;
#if KERNEL_WIDTH > 0
constexpr size_t kW = KERNEL_WIDTH;
#else
constexpr size_t kW = 16;  // the vector types still exist; the scalar table uses none
#endif

template <class T>
struct Vec {
  typedef T type __attribute__((vector_size(kW)));
};
template <class T>
struct HalfVec {
  typedef T type __attribute__((vector_size(kW / 2)));
};

// Scalar conversions, round to nearest even (the hardware's, bit for bit).
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16;
  const uint32_t exp = (h >> 10) & 0x1fU;
  uint32_t mant = h & 0x3ffU;
  uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      uint32_t e = 113;
      while ((mant & 0x400U) == 0) {
        mant <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mant & 0x3ffU) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000U | (mant << 13) | (mant != 0 ? 0x400000U : 0U);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000U);
  const uint32_t a = u & 0x7fffffffU;
  if (a > 0x7f800000U) {
    return static_cast<uint16_t>(sign | 0x7e00U | ((a >> 13) & 0x3ffU));
  }
  if (a >= 0x477ff000U) {  // rounds past 65504: infinity
    return static_cast<uint16_t>(sign | 0x7c00U);
  }
  if (a < 0x38800000U) {  // below 2^-14: a subnormal half, or zero
    if (a <= 0x33000000U) {
      return sign;
    }
    const uint32_t e = a >> 23;
    const uint32_t mant = (a & 0x7fffffU) | 0x800000U;
    const uint32_t shift = 126 - e;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1U << shift) - 1);
    const uint32_t half = 1U << (shift - 1);
    r += (rem > half || (rem == half && (r & 1U) != 0)) ? 1U : 0U;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = (((a >> 23) - 112) << 10) | ((a & 0x7fffffU) >> 13);
  const uint32_t rem = a & 0x1fffU;
  r += (rem > 0x1000U || (rem == 0x1000U && (r & 1U) != 0)) ? 1U : 0U;
  return static_cast<uint16_t>(sign | r);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffU) > 0x7f800000U) {
    return static_cast<uint16_t>((u >> 16) | 0x40U);
  }
  return static_cast<uint16_t>((u + 0x7fffU + ((u >> 16) & 1U)) >> 16);
}

template <class To, class From>
inline To bitcast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  __builtin_memcpy(&to, &from, sizeof(To));
  return to;
}

// A dtype: its storage S, the type C it folds in, the type U sums and
// products wrap in, and block loads/stores of kW / sizeof(C) elements.
// Integers sum and multiply as their unsigned twins (they wrap); floats as themselves.
template <class T, bool = std::is_integral_v<T>>
struct Unsigned {
  using type = T;
};
template <class T>
struct Unsigned<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <class T>
struct Plain {
  using S = T;
  using C = T;
  using U = typename Unsigned<T>::type;
  using VC = typename Vec<C>::type;
  using VU = typename Vec<U>::type;
  static C load(const unsigned char* p) {
    S s;
    __builtin_memcpy(&s, p, sizeof(S));
    return s;
  }
  static void store(unsigned char* p, C c) { __builtin_memcpy(p, &c, sizeof(S)); }
  static VC vload(const unsigned char* p) {
    VC v;
    __builtin_memcpy(&v, p, kW);
    return v;
  }
  static void vstore(unsigned char* p, VC v) { __builtin_memcpy(p, &v, kW); }
};

struct Bf16 {
  using S = uint16_t;
  using C = float;
  using U = float;
  using VC = Vec<float>::type;
  using VU = VC;
  using V32 = Vec<uint32_t>::type;
  using VI32 = Vec<int32_t>::type;
  using V16 = HalfVec<uint16_t>::type;
  static C load(const unsigned char* p) {
    S s;
    __builtin_memcpy(&s, p, 2);
    return bf16_to_f32(s);
  }
  static void store(unsigned char* p, C c) {
    const S s = f32_to_bf16(c);
    __builtin_memcpy(p, &s, 2);
  }
  static VC vload(const unsigned char* p) {
    V16 h;
    __builtin_memcpy(&h, p, kW / 2);
    const V32 u = __builtin_convertvector(h, V32) << 16;
    VC v;
    __builtin_memcpy(&v, &u, kW);
    return v;
  }
  static void vstore(unsigned char* p, VC v) {
    V32 u;
    __builtin_memcpy(&u, &v, kW);
    const VI32 nan = (u & 0x7fffffffU) > 0x7f800000U;
    const V32 rounded = (u + 0x7fffU + ((u >> 16) & 1U)) >> 16;
    const V32 quiet = (u >> 16) | 0x40U;
    const V32 r = (quiet & bitcast<V32>(nan)) | (rounded & ~bitcast<V32>(nan));
    const V16 h = __builtin_convertvector(r, V16);
    __builtin_memcpy(p, &h, kW / 2);
  }
};

struct F16 {
  using S = uint16_t;
  using C = float;
  using U = float;
  using VC = Vec<float>::type;
  using VU = VC;
  static constexpr size_t kLanes = kW / 4;
  static C load(const unsigned char* p) {
    S s;
    __builtin_memcpy(&s, p, 2);
    return f16_to_f32(s);
  }
  static void store(unsigned char* p, C c) {
    const S s = f32_to_f16(c);
    __builtin_memcpy(p, &s, 2);
  }
  static VC vload(const unsigned char* p) {
    float f[kLanes];
#ifdef KERNEL_F16_TO_F32
    KERNEL_F16_TO_F32(f, p);
#else
    for (size_t i = 0; i < kLanes; ++i) {
      f[i] = load(p + 2 * i);
    }
#endif
    VC v;
    __builtin_memcpy(&v, f, kW);
    return v;
  }
  static void vstore(unsigned char* p, VC v) {
    float f[kLanes];
    __builtin_memcpy(f, &v, kW);
#ifdef KERNEL_F16_FROM_F32
    KERNEL_F16_FROM_F32(p, f);
#else
    for (size_t i = 0; i < kLanes; ++i) {
      store(p + 2 * i, f[i]);
    }
#endif
  }
};

// The ops, on scalars and on vectors alike. min and max keep the
// accumulator unless the new value is strictly smaller (larger): the same
// choice as x86's MINPS/MAXPS, so NaNs fold alike in every kernel.
template <int Op, class U, class C>
inline C apply(C a, C b) {
  if constexpr (Op == 0) {
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else if constexpr (Op == 1) {
    return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
  } else if constexpr (Op == 2) {
    return a < b ? a : b;
  } else {
    return a > b ? a : b;
  }
}

template <int Op, class D>
inline typename D::VC vapply(typename D::VC a, typename D::VC b) {
  using VC = typename D::VC;
  using VU = typename D::VU;
  if constexpr (Op == 0) {
    return bitcast<VC>(bitcast<VU>(a) + bitcast<VU>(b));
  } else if constexpr (Op == 1) {
    return bitcast<VC>(bitcast<VU>(a) * bitcast<VU>(b));
  } else if constexpr (Op == 2) {
    return a < b ? a : b;
  } else {
    return a > b ? a : b;
  }
}

template <class D, int Op>
void fold(void* out, const void* const* ins, int n, size_t count) {
  using S = typename D::S;
  using C = typename D::C;
  using U = typename D::U;
  auto* o = static_cast<unsigned char*>(out);
  size_t i = 0;
  if constexpr (kVector) {
    constexpr size_t kLanes = kW / sizeof(C);
    for (; i + kLanes <= count; i += kLanes) {
      const size_t at = i * sizeof(S);
      auto acc = D::vload(static_cast<const unsigned char*>(ins[0]) + at);
      for (int k = 1; k < n; ++k) {
        acc = vapply<Op, D>(acc, D::vload(static_cast<const unsigned char*>(ins[k]) + at));
      }
      D::vstore(o + at, acc);
    }
  }
  for (; i < count; ++i) {
    const size_t at = i * sizeof(S);
    C acc = D::load(static_cast<const unsigned char*>(ins[0]) + at);
    for (int k = 1; k < n; ++k) {
      acc = apply<Op, U>(acc, D::load(static_cast<const unsigned char*>(ins[k]) + at));
    }
    D::store(o + at, acc);
  }
}

template <class D>
constexpr void row(FoldFn* r) {
  r[0] = fold<D, 0>;
  r[1] = fold<D, 1>;
  r[2] = fold<D, 2>;
  r[3] = fold<D, 3>;
}

constexpr Kernels make_table() {
  Kernels k{};
  k.name = KERNEL_NAME;
  row<Plain<float>>(k.fold[0]);
  row<Plain<double>>(k.fold[1]);
  row<F16>(k.fold[2]);
  row<Bf16>(k.fold[3]);
  row<Plain<int32_t>>(k.fold[4]);
  row<Plain<int64_t>>(k.fold[5]);
  row<Plain<uint8_t>>(k.fold[6]);
  return k;
}

// Constant-initialised: no guard, no run-time constructor.
constexpr Kernels kTable = make_table();

}  // namespace
}  // namespace trainit::coll::KERNEL_NS
