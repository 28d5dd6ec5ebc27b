// Private to src/ops: the three instruction sets the fast kernels (kernels_impl.hpp) are
// compiled for, behind one interface, so every kernel is written once.
//
//   Avx512    16 floats in a __m512; defined only under #pragma GCC target("avx512f,avx2,fma")
//             in kernels_avx512.cpp and called only when the CPU has AVX-512F (kernels.cpp)
//   Avx2      8 floats in a __m256, FMA; defined only under #pragma GCC target("avx2,fma") in
//             kernels_avx2.cpp and called only when the CPU has both (kernels.cpp checks
//             __builtin_cpu_supports at run time)
//   Portable  4 floats as a GCC vector extension, lowered to the baseline ISA (one SSE2
//             register on x86-64), so it is what runs on any other CPU
//
// All give, per vector V of S::kWidth floats: load/store (full, or the first k with a fill
// value), arithmetic, fma(a, b, c) = a·b + c (one rounding on Avx2 and Avx512, two on
// Portable), min/max, a select, the float → integer steps exp needs, and D: as many doubles,
// so row statistics are accumulated in double as the reference does.
//
// Everything is in an unnamed namespace: each kernel TU gets its own copy compiled for its
// own target, so no out-of-line function compiled for AVX2 can be picked by the linker for
// a caller on a CPU without it.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(MESHTP_KERNELS_AVX2) || defined(MESHTP_KERNELS_AVX512)
#include <immintrin.h>
#endif

namespace meshtp::kernels {
namespace {

struct Portable {
  // GCC vector extensions of 4 lanes: one register of the baseline ISA (SSE2 on x86-64, NEON
  // on AArch64), where GCC lowers every operation below to one instruction or a few.
  static constexpr int kWidth = 4;
  typedef float V __attribute__((vector_size(16)));
  typedef std::int32_t I __attribute__((vector_size(16)));
  typedef double D __attribute__((vector_size(32)));
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
  static V fma(V a, V b, V c) { return a * b + c; }
  // x86's minps/maxps: the second operand when either is NaN.
  static V min(V a, V b) { return a < b ? a : b; }
  static V max(V a, V b) { return a > b ? a : b; }
  // x < limit ? low : high, lane by lane (NaN x gives high)
  static V select_below(V x, V limit, V low, V high) { return x < limit ? low : high; }
  static V sqrt(V a) {
    for (int l = 0; l < kWidth; ++l) a[l] = __builtin_sqrtf(a[l]);
    return a;
  }
  static V abs(V a) { return reinterpret_cast<V>(reinterpret_cast<I>(a) & 0x7fffffff); }
  // Round to nearest with the 1.5·2²³ trick (SSE2 has no roundps); exact for |a| < 2²²,
  // which exp's clamped range is. NaN → 0.
  static I round_to_int(V a) {
    const V t = (a + 12582912.0f) - 12582912.0f;
    return __builtin_convertvector(t == t ? t : V{}, I);
  }
  static V to_float(I a) { return __builtin_convertvector(a, V); }
  // 2^n for integer n in [−126, 127], built in the exponent bits
  static V pow2(I n) { return reinterpret_cast<V>((n + 127) << 23); }
  static float reduce_max(V a) {
    float m = a[0];
    for (int l = 1; l < kWidth; ++l) m = a[l] > m ? a[l] : m;
    return m;
  }
  static float reduce_add(V a) {
    float s = 0.0f;
    for (int l = 0; l < kWidth; ++l) s += a[l];
    return s;
  }
  static D dzero() { return D{}; }
  static D dsum(D a, D b) { return a + b; }
  static D dadd(D acc, V a) { return acc + __builtin_convertvector(a, D); }
  static D dfma(D acc, V a, V b) {  // the product exact in double
    return acc + __builtin_convertvector(a, D) * __builtin_convertvector(b, D);
  }
  static D dfma_centered(D acc, V a, double mean) {
    const D d = __builtin_convertvector(a, D) - mean;
    return acc + d * d;
  }
  static double dreduce(D a) {
    double s = 0.0;
    for (int l = 0; l < kWidth; ++l) s += a[l];
    return s;
  }
};

#ifdef MESHTP_KERNELS_AVX2
// Only in kernels_avx2.cpp, which defines MESHTP_KERNELS_AVX2 under its avx2,fma pragma.
struct Avx2 {
  static constexpr int kWidth = 8;
  using V = __m256;
  using I = __m256i;
  struct D {
    __m256d lo, hi;
  };
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V a) { _mm256_storeu_ps(p, a); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V select_below(V x, V limit, V low, V high) {
    return _mm256_blendv_ps(high, low, _mm256_cmp_ps(x, limit, _CMP_LT_OQ));
  }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static I round_to_int(V a) { return _mm256_cvtps_epi32(a); }
  static V to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static V pow2(I n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
  }
  static float reduce_max(V a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static float reduce_add(V a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static __m256d lo(V a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); }
  static __m256d hi(V a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); }
  static D dzero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static D dsum(D a, D b) { return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)}; }
  static D dadd(D acc, V a) { return {_mm256_add_pd(acc.lo, lo(a)), _mm256_add_pd(acc.hi, hi(a))}; }
  static D dfma(D acc, V a, V b) {
    return {_mm256_fmadd_pd(lo(a), lo(b), acc.lo), _mm256_fmadd_pd(hi(a), hi(b), acc.hi)};
  }
  static D dfma_centered(D acc, V a, double mean) {
    const __m256d m = _mm256_set1_pd(mean);
    const __m256d dl = _mm256_sub_pd(lo(a), m), dh = _mm256_sub_pd(hi(a), m);
    return {_mm256_fmadd_pd(dl, dl, acc.lo), _mm256_fmadd_pd(dh, dh, acc.hi)};
  }
  static double dreduce(D a) {
    const __m256d s = _mm256_add_pd(a.lo, a.hi);
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    t = _mm_add_sd(t, _mm_unpackhi_pd(t, t));
    return _mm_cvtsd_f64(t);
  }
};
#endif

#ifdef MESHTP_KERNELS_AVX512
// Only in kernels_avx512.cpp, which defines MESHTP_KERNELS_AVX512 under its avx512f pragma.
// The same operations as Avx2 on 16 floats; AVX-512 compares give masks, not vectors.
struct Avx512 {
  static constexpr int kWidth = 16;
  using V = __m512;
  using I = __m512i;
  struct D {
    __m512d lo, hi;
  };
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V a) { _mm512_storeu_ps(p, a); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V select_below(V x, V limit, V low, V high) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, limit, _CMP_LT_OQ), high, low);
  }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V abs(V a) { return _mm512_abs_ps(a); }
  static I round_to_int(V a) { return _mm512_cvtps_epi32(a); }
  static V to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static V pow2(I n) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
  }
  static float reduce_max(V a) { return _mm512_reduce_max_ps(a); }
  static float reduce_add(V a) { return _mm512_reduce_add_ps(a); }
  static __m512d lo(V a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); }
  static __m512d hi(V a) {
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
  }
  static D dzero() { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static D dsum(D a, D b) { return {_mm512_add_pd(a.lo, b.lo), _mm512_add_pd(a.hi, b.hi)}; }
  static D dadd(D acc, V a) { return {_mm512_add_pd(acc.lo, lo(a)), _mm512_add_pd(acc.hi, hi(a))}; }
  static D dfma(D acc, V a, V b) {
    return {_mm512_fmadd_pd(lo(a), lo(b), acc.lo), _mm512_fmadd_pd(hi(a), hi(b), acc.hi)};
  }
  static D dfma_centered(D acc, V a, double mean) {
    const __m512d m = _mm512_set1_pd(mean);
    const __m512d dl = _mm512_sub_pd(lo(a), m), dh = _mm512_sub_pd(hi(a), m);
    return {_mm512_fmadd_pd(dl, dl, acc.lo), _mm512_fmadd_pd(dh, dh, acc.hi)};
  }
  static double dreduce(D a) { return _mm512_reduce_add_pd(_mm512_add_pd(a.lo, a.hi)); }
};
#endif

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
