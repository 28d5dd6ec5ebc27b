#include "bench/local_elementwise.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "ops/gelu.hpp"
#include "ops/layernorm.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {

LocalElementwiseSample time_local_elementwise(const ElementwiseShape& shape,
                                              double target_seconds) {
  MESHTP_CHECK(shape.rows > 0 && shape.cols > 0, "elementwise shape {}x{} must be positive",
               shape.rows, shape.cols);
  MESHTP_CHECK(target_seconds > 0, "target time {} s must be positive", target_seconds);
  const Tensor x = uniform_tensor({shape.rows, shape.cols}, 11);
  const Tensor dy = uniform_tensor({shape.rows, shape.cols}, 12);
  const Tensor w = uniform_tensor({shape.cols}, 13);
  const Tensor b = uniform_tensor({shape.cols}, 14);
  Tensor y({shape.rows, shape.cols});
  Tensor dx({shape.rows, shape.cols});
  Tensor dw({shape.cols});
  Tensor db({shape.cols});
  Tensor mean({shape.rows});
  Tensor rstd({shape.rows});

  const auto ln_forward = [&] {
    layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
  };
  const auto ln_backward = [&] {
    layernorm_backward(dx.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(),
                       mean.values(), rstd.values());
  };
  const auto gelu_fwd = [&] { gelu_forward(y.matrix(), x.matrix()); };
  const auto gelu_bwd = [&] {
    std::fill(dx.values().begin(), dx.values().end(), 0.0f);
    gelu_backward(dx.matrix(), x.matrix(), dy.matrix());
  };

  // Validate once: finite outputs (a NaN would make the timing meaningless).
  ln_forward();
  ln_backward();
  gelu_fwd();
  gelu_bwd();
  MESHTP_CHECK(
      std::all_of(dx.values().begin(), dx.values().end(), [](float v) { return std::isfinite(v); }),
      "bench elementwise: non-finite GeLU gradient on {}x{}", shape.rows, shape.cols);

  double start = now_seconds();
  ln_forward();
  ln_backward();
  gelu_fwd();
  gelu_bwd();
  const double once = std::max(now_seconds() - start, 1e-6);
  const int iterations = std::clamp(static_cast<int>(target_seconds / once), 3, 1000);
  std::vector<double> t_ln_f, t_ln_b, t_gelu_f, t_gelu_b;
  const auto time = [](const auto& f, std::vector<double>& into) {
    const double t0 = now_seconds();
    f();
    into.push_back(now_seconds() - t0);
  };
  for (int i = 0; i < iterations; ++i) {  // interleaved: load drift hits all four alike
    time(ln_forward, t_ln_f);
    time(ln_backward, t_ln_b);
    time(gelu_fwd, t_gelu_f);
    time(gelu_bwd, t_gelu_b);
  }
  return {.shape = shape,
          .iterations = iterations,
          .layernorm_forward_s = median(t_ln_f),
          .layernorm_backward_s = median(t_ln_b),
          .gelu_forward_s = median(t_gelu_f),
          .gelu_backward_s = median(t_gelu_b)};
}

}  // namespace meshtp::bench
