#include "bench/elementwise_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "ops/adamw.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/gelu.hpp"
#include "ops/kernels.hpp"
#include "ops/layernorm.hpp"
#include "ops/residual.hpp"
#include "plan/elementwise.hpp"
#include "tensor/random.hpp"

namespace meshtp::bench {
namespace {

struct KernelCase {
  const char* op;
  double touches;
  std::function<void()> reference, fast;
  std::function<double()> error;  // run both into separate outputs and compare
};

double timed(const std::function<void()>& f) {
  const double t0 = now_seconds();
  f();
  return now_seconds() - t0;
}

}  // namespace

std::vector<ElementwiseKernelSample> time_elementwise_kernels(std::int64_t rows, std::int64_t cols,
                                                              double target_seconds) {
  MESHTP_CHECK(rows > 0 && cols > 0 && target_seconds > 0,
               "bench elementwise: {}x{} and {} s must be positive", rows, cols, target_seconds);
  const Shape shape{rows, cols};
  const Tensor x = uniform_tensor(shape, 41), x2 = uniform_tensor(shape, 42),
               dy = uniform_tensor(shape, 43), w = uniform_tensor({cols}, 44),
               b = uniform_tensor({cols}, 45);
  Tensor y(shape), y_ref(shape), dx(shape), dx_ref(shape), mean({rows}), rstd({rows}),
      dw({cols}), db({cols}), lse({rows}), lse_ref({rows});
  Tensor p = uniform_tensor(shape, 46), m(shape), v(shape), p_ref = p, m_ref(shape), v_ref(shape);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) targets[static_cast<std::size_t>(r)] = static_cast<std::int32_t>((r * 7) % cols);
  const kernels::AdamWStep adam{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                .decay = 0.1f, .bias1 = 0.1f, .bias2 = 0.05f};
  const auto ln_fwd = [&](auto f, Tensor& out) {
    return [&, f] { f(out.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values()); };
  };
  const auto ln_bwd = [&](auto f, Tensor& out) {
    return [&, f] {
      f(out.matrix(), dw.values(), db.values(), dy.matrix(), x.matrix(), w.values(), mean.values(),
        rstd.values());
    };
  };
  layernorm_forward(y.matrix(), mean.values(), rstd.values(), x.matrix(), w.values(), b.values());
  std::vector<KernelCase> cases = {
      {"layernorm fwd", plan::kLayerNormForwardTouches, ln_fwd(layernorm_forward_reference, y_ref),
       ln_fwd(layernorm_forward, y), [&] { return max_relative_error(y.values(), y_ref.values()); }},
      {"layernorm bwd", plan::kLayerNormBackwardTouches,
       ln_bwd(layernorm_backward_reference, dx_ref), ln_bwd(layernorm_backward, dx),
       [&] { return max_relative_error(dx.values(), dx_ref.values()); }},
      {"gelu fwd", plan::kGeluForwardTouches, [&] { gelu_forward_reference(y_ref.matrix(), x.matrix()); },
       [&] { gelu_forward(y.matrix(), x.matrix()); },
       [&] { return max_relative_error(y.values(), y_ref.values()); }},
      {"gelu bwd", plan::kGeluBackwardTouches,
       [&] { gelu_backward_reference(dx_ref.matrix(), x.matrix(), dy.matrix()); },
       [&] { gelu_backward(dx.matrix(), x.matrix(), dy.matrix()); },
       [&] { return max_relative_error(dx.values(), dx_ref.values()); }},
      {"residual fwd", plan::kResidualForwardTouches,
       [&] { residual_forward_reference(y_ref.matrix(), x.matrix(), x2.matrix()); },
       [&] { residual_forward(y.matrix(), x.matrix(), x2.matrix()); },
       [&] { return max_relative_error(y.values(), y_ref.values()); }},
      {"xent fwd", 1, [&] { cross_entropy_forward_reference(lse_ref.values(), x.matrix(), targets); },
       [&] { cross_entropy_forward(lse.values(), x.matrix(), targets); },
       [&] { return max_relative_error(lse.values(), lse_ref.values()); }},
      {"xent bwd", 3,
       [&] { cross_entropy_backward_reference(dx_ref.matrix(), x.matrix(), lse.values(), targets); },
       [&] { cross_entropy_backward(dx.matrix(), x.matrix(), lse.values(), targets); },
       [&] { return max_relative_error(dx.values(), dx_ref.values()); }},
      {"adamw", 7,
       // AdamW has one host implementation (core/adamw_step.hpp): its reference is the
       // portable kernel, the naive loop is the tests' oracle only.
       [&] {
         kernels::table(kernels::Isa::kPortable)
             .adamw(p_ref.data(), dy.data(), m_ref.data(), v_ref.data(), p_ref.numel(), adam);
       },
       [&] { adamw_update(p.values(), dy.values(), m.values(), v.values(), adam); },
       [&] { return max_relative_error(p.values(), p_ref.values()); }},
  };
  const kernels::Isa selected = kernels::selected();
  std::vector<ElementwiseKernelSample> out;
  for (const KernelCase& c : cases) {
    // Validate: one run of each from equal states (the accumulating ops start from zero).
    dx.fill(0.0f);
    dx_ref.fill(0.0f);
    c.reference();
    c.fast();
    const double error = c.error();
    MESHTP_CHECK(error <= 1e-5, "bench elementwise: {} ({}) differs from its reference by {}",
                 c.op, kernels::fast().name, error);
    const double once = std::max(timed(c.fast), 1e-7);
    const int iterations = std::clamp(static_cast<int>(target_seconds / (3 * once)), 3, 200);
    std::vector<double> t_ref;
    std::array<std::vector<double>, std::size(kernels::kIsas)> t_isa;
    for (int i = 0; i < iterations; ++i) {
      t_ref.push_back(timed(c.reference));
      for (const kernels::Isa isa : kernels::kIsas) {
        if (!kernels::available(isa)) continue;
        kernels::select(isa);
        t_isa[static_cast<std::size_t>(isa)].push_back(timed(c.fast));
      }
      kernels::select(selected);
    }
    ElementwiseKernelSample s{.op = c.op, .touches = c.touches, .elements = rows * cols,
                              .reference_s = median(t_ref), .isa_s = {}, .error = error};
    for (std::size_t k = 0; k < t_isa.size(); ++k) {
      s.isa_s[k] = t_isa[k].empty() ? 0.0 : median(t_isa[k]);
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace meshtp::bench
