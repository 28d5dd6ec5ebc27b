#include "plan/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

namespace meshtp::plan {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
}

double MemoryEstimate::total_gib() const { return total_bytes() / kGiB; }

std::ostream& operator<<(std::ostream& os, const MemoryEstimate& m) {
  return os << fmt::format("{:.2f} GiB (params {:.2f}, grads {:.2f}, optimizer {:.2f}, "
                           "activations {:.2f}, buffers {:.2f})",
                           m.total_gib(), m.params_bytes / kGiB, m.grads_bytes / kGiB,
                           m.optimizer_bytes / kGiB, m.activations_bytes / kGiB,
                           m.workspace_bytes / kGiB);
}

double layer_activation_bytes(const ModelSpec& model, ActivationLayout layout, int d1, int d2) {
  const double s = model.seq, b = model.batch, h = model.hidden, a = model.heads;
  const double n = static_cast<double>(d1) * d2;
  const double sbh = s * b * h;
  const bool keep_scores = model.recompute == Recompute::kNone;
  double bytes = 0;
  if (layout == ActivationLayout::kSequenceParallel) {
    bytes = sbh / n * (34 + (keep_scores ? 5 * a * s / h : 0));
  } else {
    bytes = sbh * (10 / static_cast<double>(d2) + 6 / n + 18 / static_cast<double>(d1)) +
            (keep_scores ? 5 * a * s * s * b / n : 0);
  }
  return bytes * model.element_bytes() / 2;
}

MemoryEstimate estimate_memory(const ModelSpec& model, ActivationLayout layout, int d1, int d2,
                               double workspace_bytes) {
  const double n = static_cast<double>(d1) * d2;
  const double params = model.total_params() / n;
  const double e = model.element_bytes();
  MemoryEstimate m;
  m.params_bytes = params * e;
  m.grads_bytes = params * e;
  // AdamW's two fp32 moments, and the fp32 master weights of mixed precision.
  m.optimizer_bytes = params * (model.precision == Precision::kFp16 ? 12 : 8);
  const double layer = layer_activation_bytes(model, layout, d1, d2);
  if (model.recompute == Recompute::kFull) {
    // Each layer's input (2·sbh in fp16), sharded like the layer input, plus the one layer
    // being recomputed. Full recomputation re-creates the attention scores, so that layer
    // is priced with them.
    ModelSpec one = model;
    one.recompute = Recompute::kNone;
    const double input_shards =
        layout == ActivationLayout::kSequenceParallel ? n : static_cast<double>(d2);
    const double inputs = 2.0 * model.seq * model.batch * model.hidden / input_shards * e / 2;
    m.activations_bytes = model.layers * inputs + layer_activation_bytes(one, layout, d1, d2);
  } else {
    m.activations_bytes = model.layers * layer;
  }
  m.workspace_bytes = workspace_bytes;
  return m;
}

void add_data_parallel(MemoryEstimate& m, int dp, int zero, int layers) {
  if (dp <= 1) return;
  m.workspace_bytes += m.grads_bytes;
  if (zero == 0) return;
  m.optimizer_bytes = m.optimizer_bytes / dp + m.params_bytes / dp;
  if (zero >= 2) m.optimizer_bytes += m.grads_bytes / dp;
  if (zero >= 3) {
    const int whole = std::min(2, std::max(layers, 1));
    m.params_bytes = m.params_bytes / dp + m.params_bytes * whole / std::max(layers, 1);
  }
}

}  // namespace meshtp::plan
