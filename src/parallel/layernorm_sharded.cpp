#include "parallel/layernorm_sharded.hpp"

#include <algorithm>
#include <optional>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace meshtp::parallel {
namespace {

bool serial(const comm::Communicator* group) { return group == nullptr || group->size() == 1; }

// The sums in flight for x's rows, checked against the split: fp64 1 × norm_sum_count.
View sums_for(const char* fn, layout::Norm norm, const View& x, std::int64_t c_global,
              const comm::Communicator& group, const View& sums) {
  MESHTP_CHECK(x.cols * group.size() == c_global, "{}: {} local features × {} ranks != hidden={}",
               fn, x.cols, group.size(), c_global);
  const std::int64_t need = device::norm_sum_count(norm, x.rows);
  MESHTP_CHECK(sums.type == Element::kF64 && sums.rows == 1 && sums.cols >= need,
               "{}: scratch is {}, needs fp64 1x{} ({} per row)", fn, describe(sums), need,
               need / std::max<std::int64_t>(x.rows, 1));
  return sums.block(0, 0, 1, need);
}

void check_whole(layout::Norm norm, const View& x, std::int64_t c_global) {
  MESHTP_CHECK(x.cols == c_global, "{}: {} features held, hidden={}", layout::name(norm), x.cols,
               c_global);
}

}  // namespace

// The serial LayerNorm traces as one "layernorm" span around the op's own, the serial RMSNorm
// as the op's alone, and the sharded ones as one span around both phases (as before the seam).
void norm_sharded_forward(device::Backend& backend, layout::Norm norm, const View& y,
                          const View& mean, const View& rstd, const View& x, const View& w,
                          const View& b, std::int64_t c_global, const comm::Communicator* group,
                          const View& sums) {
  const bool layer_norm = norm == layout::Norm::kLayerNorm;
  if (serial(group)) {
    check_whole(norm, x, c_global);
    const std::optional<ScopedSpan> span =
        layer_norm ? std::optional<ScopedSpan>(std::in_place, "layernorm", SpanKind::kCompute)
                   : std::nullopt;
    backend.norm_forward(norm, y, mean, rstd, x, w, b);
    return;
  }
  const ScopedSpan span(layer_norm ? "layernorm" : "rmsnorm", SpanKind::kCompute);
  // Σx and Σx² per row over the local features (Σx² alone for RMSNorm), summed over the
  // feature shards, then the statistics and y.
  const View s = sums_for("norm_sharded_forward", norm, x, c_global, *group, sums);
  backend.norm_forward_sums(norm, s, x);
  group->all_reduce(comm::buffer_of(s), comm::ReduceOp::kSum);
  backend.norm_forward_apply(norm, y, mean, rstd, x, w, b, s, c_global);
}

void norm_sharded_backward(device::Backend& backend, layout::Norm norm, const View& dx,
                           const View& dw, const View& db, const View& dy, const View& x,
                           const View& w, const View& mean, const View& rstd, std::int64_t c_global,
                           const comm::Communicator* group, const View& sums) {
  const bool layer_norm = norm == layout::Norm::kLayerNorm;
  if (serial(group)) {
    check_whole(norm, x, c_global);
    const std::optional<ScopedSpan> span =
        layer_norm ? std::optional<ScopedSpan>(std::in_place, "layernorm", SpanKind::kCompute)
                   : std::nullopt;
    backend.norm_backward(norm, dx, dw, db, dy, x, w, mean, rstd);
    return;
  }
  const ScopedSpan span(layer_norm ? "layernorm" : "rmsnorm", SpanKind::kCompute);
  // Σg and Σg·x̂ per row (g = dy⊙w; Σg·x̂ alone for RMSNorm) over the local features, summed
  // over the feature shards, then dx.
  const View s = sums_for("norm_sharded_backward", norm, x, c_global, *group, sums);
  backend.norm_backward_sums(norm, s, dw, db, dy, x, w, mean, rstd);
  group->all_reduce(comm::buffer_of(s), comm::ReduceOp::kSum);
  backend.norm_backward_apply(norm, dx, dy, x, w, mean, rstd, s, c_global);
}

void residual_norm_sharded_forward(device::Backend& backend, layout::Norm norm, const View& sum,
                                   const View& y, const View& mean, const View& rstd, const View& a,
                                   const View& b_in, const View& w, const View& b,
                                   std::int64_t c_global, const comm::Communicator* group,
                                   const View& sums) {
  if (serial(group)) {
    check_whole(norm, sum, c_global);
    backend.residual_norm_forward(norm, sum, y, mean, rstd, a, b_in, w, b);  // fused on the CPU
    return;
  }
  backend.residual(sum, a, b_in);
  norm_sharded_forward(backend, norm, y, mean, rstd, sum, w, b, c_global, group, sums);
}

}  // namespace meshtp::parallel
