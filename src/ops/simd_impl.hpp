// Private to src/ops: the vector type the fast kernels (kernels_impl.hpp) are written over,
// one template over the width W, so every kernel is written once. kernels_simd.cpp is compiled
// once per width, its target pragma chosen by the width:
//
//   Simd<16>  AVX-512   #pragma GCC target("avx512f,avx2,fma")
//   Simd<8>   AVX2      #pragma GCC target("avx2,fma")
//   Simd<4>   portable  the baseline ISA (one SSE2 register on x86-64, NEON on AArch64)
//
// V is W floats as a GCC vector extension: GCC lowers each operation below to the one or few
// instructions of the ISA the pragma enables (one register of 4, 8 or 16 floats); only min/max
// name the instruction (on x86, see there). kernels.cpp calls a table only on a CPU that has
// its ISA (__builtin_cpu_supports at run time).
//
// Per vector V: load/store (full, or the first k with a fill value), arithmetic,
// fma(a, b, c) = a·b + c (one rounding at widths 8 and 16, two at the baseline, which has no
// FMA), min/max, a select, the float → integer steps exp needs, and D: as many doubles, so row
// statistics are accumulated in double as the reference does.
//
// Everything is in an unnamed namespace: each kernel TU gets its own copy compiled for its
// own target, so no out-of-line function compiled for AVX2 can be picked by the linker for
// a caller on a CPU without it.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#define MESHTP_KERNELS_X86 1
#include <immintrin.h>  // included first by kernels_simd.cpp, before its target pragma
#endif

namespace meshtp::kernels {
namespace {

// N lanes of T. (A struct, not `typedef T V __attribute__((vector_size(…)))` in Simd itself:
// GCC 12 does not see such a typedef as dependent on W.)
template <class T, int N>
struct Lanes {
  typedef T type __attribute__((vector_size(sizeof(T) * N)));
};

// The low (H = 0) or high (H = 1) half of the N lanes of a.
template <int H, int N, class Vec, std::size_t... L>
[[gnu::always_inline]] inline auto half(Vec a, std::index_sequence<L...>) {
  return __builtin_shufflevector(a, a, (L + H * N / 2)...);
}
template <int H, int N, class Vec>
[[gnu::always_inline]] inline auto half(Vec a) {
  return half<H, N>(a, std::make_index_sequence<N / 2>());
}

// op over the N lanes of a, as a tree: halves combined until one lane is left (log₂ N ops).
template <int N, class Vec, class Op>
[[gnu::always_inline]] inline auto reduce(Vec a, Op op) {
  if constexpr (N == 2) {
    return op(a[0], a[1]);
  } else {
    return reduce<N / 2>(op(half<0, N>(a), half<1, N>(a)), op);
  }
}

template <int W>
struct Simd {
  static constexpr int kWidth = W;
  using V = typename Lanes<float, W>::type;
  using I = typename Lanes<std::int32_t, W>::type;
  // W doubles, as two halves of W/2: one register each (a vector wider than the ISA's
  // registers would live in memory).
  using DHalf = typename Lanes<double, W / 2>::type;
  struct D {
    DHalf lo, hi;
  };
  static V set1(float x) { return V{} + x; }
  static V load(const float* p) {
    V r;
    std::memcpy(&r, p, sizeof r);
    return r;
  }
  static void store(float* p, V a) { std::memcpy(p, &a, sizeof a); }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  // One vfmadd where the ISA has FMA: GCC fuses a·b + c (-ffp-contract=fast, CMakeLists.txt).
  static V fma(V a, V b, V c) { return a * b + c; }
  // x86's minps/maxps: the second operand when either is NaN. GCC lowers the generic form to
  // a compare and a blend when an operand is a constant, so on x86 the instruction is named.
  template <bool kMax>
  static V min_max(V a, V b) {
#ifdef MESHTP_KERNELS_X86
    if constexpr (W == 4) return kMax ? _mm_max_ps(a, b) : _mm_min_ps(a, b);
    if constexpr (W == 8) return kMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
    if constexpr (W == 16) return kMax ? _mm512_max_ps(a, b) : _mm512_min_ps(a, b);
#endif
    return (kMax ? a > b : a < b) ? a : b;
  }
  static V min(V a, V b) { return min_max<false>(a, b); }
  static V max(V a, V b) { return min_max<true>(a, b); }
  // x < limit ? low : high, lane by lane (NaN x gives high)
  static V select_below(V x, V limit, V low, V high) { return x < limit ? low : high; }
  static V sqrt(V a) {  // one sqrtps (-fno-math-errno)
    for (int l = 0; l < W; ++l) a[l] = __builtin_sqrtf(a[l]);
    return a;
  }
  static V abs(V a) { return reinterpret_cast<V>(reinterpret_cast<I>(a) & 0x7fffffff); }
  static I round_to_int(V a) {  // to nearest, ties to even: one cvtps2dq
    I n;
    for (int l = 0; l < W; ++l) n[l] = __builtin_irintf(a[l]);
    return n;
  }
  static V to_float(I a) { return __builtin_convertvector(a, V); }
  // 2^n for integer n in [−126, 127], built in the exponent bits
  static V pow2(I n) { return reinterpret_cast<V>((n + 127) << 23); }
  static float reduce_max(V a) {
    return reduce<W>(a, [](auto x, auto y) { return x > y ? x : y; });
  }
  static float reduce_add(V a) {
    return reduce<W>(a, [](auto x, auto y) { return x + y; });
  }
  static D widen(V a) {  // converted whole, then split: GCC 12 converts halves poorly
    const auto d = __builtin_convertvector(a, typename Lanes<double, W>::type);
    return {half<0, W>(d), half<1, W>(d)};
  }
  static D dzero() { return {DHalf{}, DHalf{}}; }
  static D dsum(D a, D b) { return {a.lo + b.lo, a.hi + b.hi}; }
  static D dadd(D acc, V a) { return dsum(acc, widen(a)); }
  static D dfma(D acc, V a, V b) {  // the products exact in double
    const D x = widen(a), y = widen(b);
    return {acc.lo + x.lo * y.lo, acc.hi + x.hi * y.hi};
  }
  static D dfma_centered(D acc, V a, double mean) {
    const D x = widen(a);
    const DHalf dl = x.lo - mean, dh = x.hi - mean;
    return {acc.lo + dl * dl, acc.hi + dh * dh};
  }
  static double dreduce(D a) {
    return reduce<W / 2>(a.lo + a.hi, [](auto x, auto y) { return x + y; });
  }
};

// The first k < S::kWidth floats of p, the other lanes `fill`; and the store of the first k.
template <class S>
[[gnu::always_inline]] inline typename S::V load_part(const float* p, std::int64_t k, float fill) {
  float buf[S::kWidth];
  for (int l = 0; l < S::kWidth; ++l) buf[l] = l < k ? p[l] : fill;
  return S::load(buf);
}
template <class S>
[[gnu::always_inline]] inline void store_part(float* p, std::int64_t k, typename S::V a) {
  float buf[S::kWidth];
  S::store(buf, a);
  for (int l = 0; l < k; ++l) p[l] = buf[l];
}

}  // namespace
}  // namespace meshtp::kernels
