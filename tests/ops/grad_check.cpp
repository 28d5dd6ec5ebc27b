#include "grad_check.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "tensor/random.hpp"

namespace meshtp::testing {

Tensor test_tensor(Shape shape, std::uint64_t seed, float scale, float offset) {
  Tensor t = uniform_tensor(std::move(shape), seed, scale);
  for (float& v : t.values()) v = std::round((v + offset) * 4096.0f) / 4096.0f;
  return t;
}

double dot(std::span<const float> a, std::span<const float> b) {
  MESHTP_CHECK(a.size() == b.size(), "dot of {} and {} values", a.size(), b.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

std::ostream& operator<<(std::ostream& os, const FdResult& r) {
  return os << "error " << r.error << " (scale " << r.scale << ", worst element " << r.worst
            << ": finite difference " << r.fd_worst << " vs analytic " << r.an_worst << ")";
}

FdResult check_gradient(std::span<float> theta, std::span<const float> analytic,
                        const std::function<double()>& loss, double h) {
  MESHTP_CHECK(theta.size() == analytic.size(), "{} parameters but {} analytic gradients",
               theta.size(), analytic.size());
  FdResult r;
  double worst_diff = -1.0;
  for (std::size_t i = 0; i < theta.size(); ++i) {
    const float original = theta[i];
    const auto at = [&](double k) {
      theta[i] = static_cast<float>(original + k * h);
      return loss();
    };
    const double fd = (-at(2) + 8 * at(1) - 8 * at(-1) + at(-2)) / (12 * h);
    theta[i] = original;
    const double diff = std::abs(fd - analytic[i]);
    // NaN is the worst of all, and once seen it stays the worst.
    if (!std::isnan(worst_diff) && (std::isnan(diff) || diff > worst_diff)) {
      worst_diff = diff;
      r.worst = static_cast<std::int64_t>(i);
      r.fd_worst = fd;
      r.an_worst = analytic[i];
    }
    r.scale = std::max(r.scale, std::abs(fd));
  }
  r.error = r.scale > 0.0 ? worst_diff / r.scale : worst_diff;
  return r;
}

Tensor plus(const Tensor& a, const Tensor& b) {
  MESHTP_CHECK(a.shape() == b.shape(), "plus: shapes {} and {}", to_string(a.shape()),
               to_string(b.shape()));
  Tensor out(a.shape());
  for (std::int64_t i = 0; i < out.numel(); ++i) out[i] = a[i] + b[i];
  return out;
}

std::string error_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace meshtp::testing
