// The serial mixture-of-experts layer, written once over the ops (ops/moe.hpp): logits,
// route, dispatch, permute, experts, combine, and the reverse. The oracle the ops' finite
// differences and the expert-parallel layer's tests compare against.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/moe.hpp"
#include "tensor/gemm.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::testing {

struct SerialMoe {
  std::int64_t N = 0, h = 0, E = 0, F = 0, k = 0;
  double cf = 0, alpha = 0;
  bool force_balance = false;
  Tensor x{}, wr{}, w1{}, w2{};
  MoeRouting routing{};
  MoeDispatch dispatch{};
  Tensor logits{}, xp{}, pre{}, act{}, yp{}, y{};

  double forward() {
    logits = Tensor({N, E});
    gemm(x.matrix(), Trans::kNo, wr.matrix(), Trans::kYes, logits.matrix());
    routing = moe_route(logits.matrix(), k, cf, force_balance);
    dispatch = moe_dispatch(routing);
    const std::int64_t rows = dispatch.rows();
    xp = Tensor({rows, h});
    pre = Tensor({rows, F});
    act = Tensor({rows, F});
    yp = Tensor({rows, h});
    y = Tensor({N, h});
    moe_permute(xp.matrix(), x.matrix(), dispatch);
    expert_mlp_forward(yp.matrix(), pre.matrix(), act.matrix(), xp.matrix(), w1.matrix(),
                       w2.matrix(), dispatch.offsets);
    moe_combine(y.matrix(), yp.matrix(), routing, dispatch);
    return moe_aux_loss(routing, routing.counts, N, alpha);
  }
  // Gradients of L = Σ dy⊙y + aux.
  void backward(const Tensor& dy, Tensor& dx, Tensor& dwr, Tensor& dw1, Tensor& dw2) const {
    const std::int64_t rows = dispatch.rows();
    Tensor dyp({rows, h}), dxp({rows, h}), dact({rows, F}), dpre({rows, F}), dlogits({N, E});
    std::vector<float> dgate(static_cast<std::size_t>(N * k));
    moe_combine_backward(dyp.matrix(), dgate, dy.matrix(), yp.matrix(), routing, dispatch);
    expert_mlp_backward(dxp.matrix(), dw1.matrix(), dw2.matrix(), dact.matrix(), dpre.matrix(),
                        dyp.matrix(), xp.matrix(), pre.matrix(), act.matrix(), w1.matrix(),
                        w2.matrix(), dispatch.offsets);
    moe_permute_backward(dx.matrix(), dxp.matrix(), dispatch);
    moe_router_backward(dlogits.matrix(), routing, dgate, routing.counts, N, alpha, 1.0);
    gemm(dlogits.matrix(), Trans::kNo, wr.matrix(), Trans::kNo, dx.matrix(), 1.0f, 1.0f);
    gemm(dlogits.matrix(), Trans::kYes, x.matrix(), Trans::kNo, dwr.matrix(), 1.0f, 1.0f);
  }
};

}  // namespace meshtp::testing
