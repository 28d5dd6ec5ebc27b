#include "device/single_device_gpt.hpp"

#include "core/error.hpp"

namespace meshtp::device {

namespace {

Array upload(Backend& backend, const std::vector<float>& values, std::int64_t expected,
             ElementType type, const char* name) {
  MESHTP_CHECK(static_cast<std::int64_t>(values.size()) == expected,
               "gpt: {} has {} values, expected {}", name, values.size(), expected);
  Array a = backend.alloc(expected, type);
  backend.upload(a, values);
  return a;
}

const layout::ModelShape& checked(const layout::ModelShape& shape) {
  MESHTP_CHECK(shape.vocab >= 1, "gpt: vocab={} must be at least 1", shape.vocab);
  return shape;
}

}  // namespace

SingleDeviceGpt::SingleDeviceGpt(Backend& backend, const layout::ModelShape& shape,
                                 const GptWeights& weights, ElementType compute)
    : backend_(backend),
      shape_(checked(shape)),
      compute_(compute),
      stack_(backend, shape, weights.blocks, compute) {
  const std::int64_t C = shape_.hidden, T = shape_.seq, V = shape_.vocab;
  const std::int64_t N = shape_.tokens();
  const ElementType f32 = ElementType::kF32;
  wte_ = upload(backend_, weights.wte, V * C, compute_, "wte");
  wpe_ = upload(backend_, weights.wpe, T * C, compute_, "wpe");
  lnf_w_ = upload(backend_, weights.lnf_w, C, f32, "lnf.weight");
  lnf_b_ = upload(backend_, weights.lnf_b, C, f32, "lnf.bias");
  dwte_ = make(V * C, f32);
  dwpe_ = make(T * C, f32);
  dlnf_w_ = make(C, f32);
  dlnf_b_ = make(C, f32);
  x_ = make(N * C, compute_);
  f_ = make(N * C, compute_);
  lnf_mean_ = make(N, f32);
  lnf_rstd_ = make(N, f32);
  logits_ = make(N * V, compute_);
  lse_ = make(N, f32);
  dlogits_ = make(N * V, compute_);
  df_ = make(N * C, compute_);
  dy_ = make(N * C, compute_);
}

double SingleDeviceGpt::forward_backward(std::span<const std::int32_t> tokens,
                                         std::span<const std::int32_t> targets) {
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, V = shape_.vocab;
  const std::int64_t N = B * T;
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == N &&
                   static_cast<std::int64_t>(targets.size()) == N,
               "gpt: {} tokens and {} targets, expected batch {} x seq {} = {} each", tokens.size(),
               targets.size(), B, T, N);
  // forward
  backend_.embedding_forward(x_, tokens, B, T, wte_, V, wpe_, C);
  const Array& y = stack_.forward(x_);
  backend_.layernorm_forward(f_, lnf_mean_, lnf_rstd_, y, lnf_w_, lnf_b_, N, C);
  backend_.linear_forward(logits_, f_, wte_, Array(), N, C, V);
  const double loss = backend_.cross_entropy_forward(lse_, logits_, targets, N, V);
  // backward
  for (Array* a : {&dlogits_, &df_, &dy_, &dwte_, &dwpe_, &dlnf_w_, &dlnf_b_}) backend_.zero(*a);
  backend_.cross_entropy_backward(dlogits_, logits_, lse_, targets, N, V);
  Array no_bias;
  backend_.linear_backward(df_, dwte_, no_bias, dlogits_, f_, wte_, N, C, V);
  backend_.layernorm_backward(dy_, dlnf_w_, dlnf_b_, df_, y, lnf_w_, lnf_mean_, lnf_rstd_, N, C);
  const Array& dx = stack_.backward(dy_);
  backend_.embedding_backward(dwte_, dwpe_, dx, tokens, B, T, V, C);
  return loss;
}

GptWeights SingleDeviceGpt::gradients() {
  return GptWeights{.wte = backend_.download(dwte_),
                    .wpe = backend_.download(dwpe_),
                    .blocks = stack_.gradients(),
                    .lnf_w = backend_.download(dlnf_w_),
                    .lnf_b = backend_.download(dlnf_b_)};
}

double SingleDeviceGpt::flops_per_step() const {
  return stack_.flops_per_step() + 6.0 * static_cast<double>(shape_.tokens()) *
                                       static_cast<double>(shape_.hidden) *
                                       static_cast<double>(shape_.vocab);
}

}  // namespace meshtp::device
