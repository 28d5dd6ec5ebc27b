// Private to src/ops: the elementwise math of softmax and GeLU, written so that GCC
// vectorises the loops that call it at -O3 on baseline x86-64 (SSE2), with no -ffast-math.
//
// What makes that possible:
//   - exp_approx is branch-free arithmetic (no libm call): Cody–Waite range reduction
//     x = n·ln2 + r, |r| ≤ ln2/2, the Cephes expf polynomial for e^r, and 2ⁿ built in the
//     exponent bits. Max relative error 8.2e-8 (≈ 1 ulp) against exp in double on
//     [−87, 88]; inputs are clamped to that range (e^−87 ≈ 1.6e-38 is the smallest normal
//     result), so there are no infinities, NaNs from overflow, or subnormals.
//   - meshtp_ops is built with -fno-trapping-math (nothing reads FP exception flags), which
//     lets the clamps become vector min/max.
//   - Reductions keep 8 independent partial results (fixed lanes, combined in a fixed order),
//     so they vectorise without reassociation flags and stay deterministic for a given n.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace meshtp::detail {

inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  constexpr float kRound = 12582912.0f;  // 1.5·2²³: t + kRound − kRound rounds t to an integer
  const float n = (x * 1.44269504088896341f + kRound) - kRound;  // round(x / ln2)
  float r = x - n * 0.693359375f;                                // ln2 = 0.693359375
  r = r - n * -2.12194440e-4f;                                   //       − 2.12194440e-4
  float p = 1.9875691500e-4f;  // Cephes expf: e^r ≈ 1 + r + r²·P(r)
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2ⁿ
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// tanh(u) = sign(u)·(1 − e)/(1 + e), e = e^(−2|u|); absolute error at fp32 rounding.
inline float tanh_approx(float u) {
  const float e = exp_approx(-2.0f * std::fabs(u));
  return std::copysign((1.0f - e) / (1.0f + e), u);
}

inline constexpr int kLanes = 8;

inline float max_of(const float* x, std::int64_t n) {
  float lane[kLanes];
  for (float& l : lane) l = -std::numeric_limits<float>::infinity();
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
  }
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (const float l : lane) m = l > m ? l : m;
  return m;
}

inline float sum_of(const float* x, std::int64_t n) {
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += x[i + l];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  for (const float l : lane) s += l;
  return s;
}

inline float dot_of(const float* a, const float* b, std::int64_t n) {
  float lane[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += a[i] * b[i];
  for (const float l : lane) s += l;
  return s;
}

}  // namespace meshtp::detail
