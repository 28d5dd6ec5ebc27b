#include "plan/elementwise.hpp"

#include <cmath>
#include <string_view>

#include "core/error.hpp"

namespace meshtp::plan {

const char* name(ElementwiseLayout layout) {
  switch (layout) {
    case ElementwiseLayout::kAtp:
      return "atp";
    case ElementwiseLayout::kSequenceParallel:
      return "sequence-parallel";
    case ElementwiseLayout::kFullySharded:
      return "fully-sharded";
  }
  return "?";
}

double ElementwiseEstimate::touched(bool backward) const {
  double sum = 0;
  for (const ElementwiseOp& op : ops) {
    if (op.backward == backward) sum += op.touched();
  }
  return sum;
}

double ElementwiseEstimate::layer_s(Recompute recompute) const {
  switch (recompute) {
    case Recompute::kNone:
      return forward_s + backward_s;
    case Recompute::kSelective:
      return forward_s + backward_s + softmax_forward_s;
    case Recompute::kFull:
      return 2 * forward_s + backward_s;
  }
  return forward_s + backward_s;
}

ElementwiseEstimate elementwise_estimate(const ModelSpec& m, ElementwiseLayout layout, int d1,
                                         int d2, double gbps) {
  MESHTP_CHECK(std::isfinite(gbps) && gbps > 0, "elementwise_gbps={} must be positive", gbps);
  MESHTP_CHECK(d1 >= 1 && d2 >= 1, "mesh {}x{}: sizes must be positive", d1, d2);
  MESHTP_CHECK(layout != ElementwiseLayout::kSequenceParallel || d2 == 1,
               "sequence parallelism runs on a mesh (N, 1), got {}x{}", d1, d2);
  const double n = static_cast<double>(d1) * d2;
  const double M = static_cast<double>(m.tokens());
  const double h = m.hidden, s = m.seq;

  // Per-rank elements of each tensor (the header's table); a Llama-family model's QKV and
  // MLP1 widths (h + 2·g·d, f or 2f) for GPT's 3h and 4h, its activation (SwiGLU) priced
  // as GeLU on FC1's output, and no bias ops where it has no biases. RoPE's rotation of q
  // and k is not priced.
  const double qkv_w = static_cast<double>(m.qkv_width()),
               mlp1_w = static_cast<double>(m.mlp1_width());
  double stream = M * h / n, qkv_bwd = M * qkv_w / n, mlp1 = M * mlp1_w / n;
  double row_bias_bwd = M * h / n;
  switch (layout) {
    case ElementwiseLayout::kAtp:
      stream = M * h / d2;
      qkv_bwd = M * qkv_w / d1;
      mlp1 = M * mlp1_w / d1;
      row_bias_bwd = stream;
      break;
    case ElementwiseLayout::kSequenceParallel:
      row_bias_bwd = M * h;
      break;
    case ElementwiseLayout::kFullySharded:
      break;
  }
  const double qkv_fwd = M * qkv_w / n;
  const double scores = static_cast<double>(m.batch) * m.heads * s * s / n;
  // Fused attention (ops/flash_attention.hpp) has no s×s softmax: its exponentials are in its
  // tiles, and it reads q, k, v and writes out (backward: reads q, out, dout, k, v and writes
  // the three gradients), q's b·s·h/n and k/v's b·s·g·d/n elements per rank.
  const bool fused = m.attention == Attention::kFused;
  const double attention_io =
      static_cast<double>(m.batch) * s * (h + static_cast<double>(m.kv() * m.head_dim())) / n;

  ElementwiseEstimate e;
  e.gbps = gbps;
  const double seconds_per_touch = m.element_bytes() / (gbps * 1e9);
  const bool biases = m.has_biases();
  auto add = [&](const char* op, bool backward, double elements, double factor) {
    if (!biases && std::string_view(op).ends_with(" bias")) return;
    ElementwiseOp o{.name = op, .backward = backward, .elements = elements, .factor = factor};
    o.seconds = o.touched() * seconds_per_touch;
    (backward ? e.backward_s : e.forward_s) += o.seconds;
    e.ops.push_back(std::move(o));
  };
  add("ln1", false, stream, kLayerNormForwardTouches);
  add("qkv bias", false, qkv_fwd, kBiasForwardTouches);
  if (fused) {
    add("attention io", false, attention_io, kFlashAttentionForwardTouches);
  } else {
    add("softmax", false, scores, kSoftmaxForwardTouches);
  }
  add("proj bias", false, stream, kBiasForwardTouches);
  add("residual1", false, stream, kResidualForwardTouches);
  add("ln2", false, stream, kLayerNormForwardTouches);
  add("mlp1 bias", false, mlp1, kBiasForwardTouches);
  add("gelu", false, mlp1, kGeluForwardTouches);
  add("mlp2 bias", false, stream, kBiasForwardTouches);
  add("residual2", false, stream, kResidualForwardTouches);

  add("residual2", true, stream, kResidualBackwardTouches);
  add("mlp2 bias", true, row_bias_bwd, kBiasBackwardTouches);
  add("gelu", true, mlp1, kGeluBackwardTouches);
  add("mlp1 bias", true, mlp1, kBiasBackwardTouches);
  add("ln2", true, stream, kLayerNormBackwardTouches);
  add("residual1", true, stream, kResidualBackwardTouches);
  add("proj bias", true, row_bias_bwd, kBiasBackwardTouches);
  if (fused) {
    add("attention io", true, attention_io, kFlashAttentionBackwardTouches);
  } else {
    add("softmax", true, scores, kSoftmaxBackwardTouches);
  }
  add("qkv bias", true, qkv_bwd, kBiasBackwardTouches);
  add("ln1", true, stream, kLayerNormBackwardTouches);

  // Fused attention under selective recomputation keeps its output and L (memory.cpp) and
  // re-runs nothing: its backward recomputes the probabilities in any case.
  e.softmax_forward_s = fused ? 0 : scores * kSoftmaxForwardTouches * seconds_per_touch;
  if (m.dropout) {
    // Megatron-LM: dropout on the attention probabilities (re-run with the softmax by
    // selective recomputation), and on each residual branch fused into its bias + residual
    // add, which then writes (forward) and reads (backward) one mask byte per element more.
    const double mask = kDropoutMaskBytes / m.element_bytes();  // in touches
    // (Fused attention drops out inside its tiles: no s×s mask.)
    if (!fused) add("attention dropout", false, scores, kDropoutForwardTouches + mask);
    add("proj dropout mask", false, stream, mask);
    add("mlp2 dropout mask", false, stream, mask);
    if (!fused) add("attention dropout", true, scores, kDropoutBackwardTouches + mask);
    add("proj dropout mask", true, stream, mask);
    add("mlp2 dropout mask", true, stream, mask);
    if (!fused) e.softmax_forward_s += scores * (kDropoutForwardTouches + mask) * seconds_per_touch;
  }
  return e;
}

}  // namespace meshtp::plan
