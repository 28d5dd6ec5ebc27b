// Helpers shared by the ops tests: test inputs, L = Σ dy⊙y, and the finite-difference check.
//
// Finite differences. For a scalar loss L(θ) (recomputed by `loss` from the current values of
// the tensors under test) the derivative with respect to each element θ_i is estimated with
// the fourth-order central stencil, in double:
//
//   fd_i = (−L(θ+2h·e_i) + 8·L(θ+h·e_i) − 8·L(θ−h·e_i) + L(θ−2h·e_i)) / (12h)
//
// Its truncation error is O(h⁴), so h can be large enough (2⁻⁵) that fp32 rounding of the
// op's outputs, divided by h, stays far below the tolerance (the observed errors scale as 1/h
// between h = 2⁻⁹ and 2⁻⁵: rounding noise, not a bias). Test inputs are multiples of
// 2⁻¹² (test_tensor), so every perturbed value θ_i ± k·h is exact in fp32 and the stencil's
// steps are exactly h. The reported error is
//
//   error = max_i |fd_i − an_i| / max_i |fd_i|
//
// i.e. the worst element against the scale of the whole gradient, like max_relative_error.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <span>
#include <string>

#include "tensor/tensor.hpp"

namespace meshtp::testing {

inline constexpr double kFdStep = 1.0 / 32.0;  // h = 2⁻⁵
// One tolerance for every op. Observed errors (fp32 ops, this stencil): linear, residual,
// embedding, cross-entropy ≤ 1e-6; LayerNorm ≤ 3.3e-6; GeLU ≤ 2.8e-6; attention ≤ 5.1e-6.
// 5e-5 leaves a 10× margin, while every deliberately wrong gradient in grad_check_test.cpp
// fails: the subtlest, the exact erf-GeLU derivative in place of the tanh one, errs by 7.7e-4;
// one element off by 0.1% of the scale by 1e-3; the others by 0.17 to 4.
inline constexpr double kFdTol = 5e-5;

// Uniform in [-scale, scale) + offset, rounded to a multiple of 2⁻¹².
Tensor test_tensor(Shape shape, std::uint64_t seed, float scale = 1.0f, float offset = 0.0f);

// Σ_i a_i·b_i in double.
double dot(std::span<const float> a, std::span<const float> b);

struct FdResult {
  double error = 0.0;       // max_i |fd_i − an_i| / max_i |fd_i|
  double scale = 0.0;       // max_i |fd_i|
  std::int64_t worst = -1;  // index of the largest |fd_i − an_i|
  double fd_worst = 0.0;
  double an_worst = 0.0;
};
std::ostream& operator<<(std::ostream& os, const FdResult& r);

// Finite-difference gradient of loss() with respect to every element of theta (which is
// restored afterwards), compared with the analytic gradient.
FdResult check_gradient(std::span<float> theta, std::span<const float> analytic,
                        const std::function<double()>& loss, double h = kFdStep);

// a + b, elementwise: what a gradient buffer holding a must hold after a backward adds b.
Tensor plus(const Tensor& a, const Tensor& b);

// Runs fn and returns the meshtp::Error message it throws, or "" if it throws nothing.
std::string error_message(const std::function<void()>& fn);

}  // namespace meshtp::testing
