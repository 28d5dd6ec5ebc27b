#include "device/single_device_gpt.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace meshtp::device {

namespace {

Array upload(Backend& backend, const std::vector<float>& values, std::int64_t expected,
             Element type, const char* name) {
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

// wte's rows padded with zero rows to `padded_rows` (the device's layout).
std::vector<float> padded(const std::vector<float>& wte, std::int64_t rows,
                          std::int64_t padded_rows, std::int64_t cols) {
  MESHTP_CHECK(static_cast<std::int64_t>(wte.size()) == rows * cols,
               "gpt: wte has {} values, expected {}", wte.size(), rows * cols);
  std::vector<float> out(static_cast<std::size_t>(padded_rows * cols), 0.0f);
  std::copy(wte.begin(), wte.end(), out.begin());
  return out;
}

// The first `count` values of a device array.
std::vector<float> leading(std::vector<float> values, std::int64_t count) {
  values.resize(static_cast<std::size_t>(count));
  return values;
}

}  // namespace

SingleDeviceGpt::SingleDeviceGpt(Backend& backend, const layout::ModelShape& shape,
                                 const GptWeights& weights, Element compute)
    : backend_(backend),
      shape_(checked(shape)),
      compute_(compute),
      padded_vocab_((shape_.vocab + kVocabAlignment - 1) / kVocabAlignment * kVocabAlignment),
      stack_(backend, shape, weights.blocks, compute) {
  const std::int64_t C = shape_.hidden, T = shape_.seq, V = shape_.vocab, Vp = padded_vocab_;
  const std::int64_t N = shape_.tokens();
  const Element f32 = Element::kF32;
  const std::vector<float> wte_padded = padded(weights.wte, V, Vp, C);
  wte_ = upload(backend_, wte_padded, Vp * C, compute_, "wte");
  wpe_ = upload(backend_, weights.wpe, T * C, compute_, "wpe");
  lnf_w_ = upload(backend_, weights.lnf_w, C, f32, "lnf.weight");
  lnf_b_ = upload(backend_, weights.lnf_b, C, f32, "lnf.bias");
  dwte_ = make(Vp * C, f32);
  dwpe_ = make(T * C, f32);
  dlnf_w_ = make(C, f32);
  dlnf_b_ = make(C, f32);
  x_ = make(N * C, compute_);
  f_ = make(N * C, compute_);
  lnf_mean_ = make(N, f32);
  lnf_rstd_ = make(N, f32);
  logits_ = make(N * Vp, compute_);
  lse_ = make(N, f32);
  dlogits_ = make(N * Vp, compute_);
  df_ = make(N * C, compute_);
  dy_ = make(N * C, compute_);

  // The optimizer's tensors, in GptWeights order: a master per compute copy (the copy itself
  // when it is fp32), and zeroed moments.
  auto add = [&](const Array& compute, const Array& grad, bool decay,
                 const std::vector<float>& host) {
    AdamWParam t{.p = compute,
                 .g = grad,
                 .m = make(compute.count(), f32),
                 .v = make(compute.count(), f32),
                 .p_compute = compute};
    if (compute.type() != f32) {
      t.p = make(compute.count(), f32);
      backend_.upload(t.p, host);
    }
    backend_.zero(t.m);
    backend_.zero(t.v);
    optimizer_.push_back(std::move(t));
    decays_.push_back(decay);
  };
  add(wte_, dwte_, true, wte_padded);
  add(wpe_, dwpe_, true, weights.wpe);
  const std::vector<BlockStack::ParamRef> block_params = stack_.parameters();
  for (std::size_t i = 0; i < block_params.size(); ++i) {
    const auto host = fields(weights.blocks[i / kBlockParams]);
    add(block_params[i].compute, block_params[i].grad, block_params[i].decay,
        *host[i % kBlockParams]);
  }
  add(lnf_w_, dlnf_w_, false, weights.lnf_w);
  add(lnf_b_, dlnf_b_, false, weights.lnf_b);
}

double SingleDeviceGpt::clip_gradients(double max_norm) {
  double sum = 0;
  for (const AdamWParam& t : optimizer_) sum += backend_.sum_of_squares(t.g);
  const double norm = std::sqrt(sum);
  if (max_norm > 0 && norm > max_norm) {
    const auto factor = static_cast<float>(max_norm / norm);
    for (AdamWParam& t : optimizer_) backend_.scale(t.g, factor);
  }
  return norm;
}

void SingleDeviceGpt::update(const AdamWStep& step) {
  std::vector<AdamWParam> decayed, plain;
  for (std::size_t i = 0; i < optimizer_.size(); ++i) {
    (decays_[i] ? decayed : plain).push_back(optimizer_[i]);
  }
  AdamWStep no_decay = step;
  no_decay.decay = 0;
  backend_.adamw_update(decayed, step);
  backend_.adamw_update(plain, no_decay);
}

GptWeights SingleDeviceGpt::parameters() {
  std::size_t i = 0;
  auto next = [&] { return backend_.download(optimizer_[i++].p); };
  GptWeights out;
  out.wte = leading(next(), shape_.vocab * shape_.hidden);
  out.wpe = next();
  for (std::int64_t l = 0; l < shape_.layers; ++l) {
    BlockWeights b;
    for (std::vector<float>* v : fields(b)) *v = next();
    out.blocks.push_back(std::move(b));
  }
  out.lnf_w = next();
  out.lnf_b = next();
  return out;
}

double SingleDeviceGpt::forward_backward(std::span<const std::int32_t> tokens,
                                         std::span<const std::int32_t> targets) {
  const double value = loss(tokens, targets);
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, V = shape_.vocab;
  const std::int64_t N = B * T, Vp = padded_vocab_;
  const Array& y = *stack_out_;
  for (Array* a : {&dlogits_, &df_, &dy_, &dwte_, &dwpe_, &dlnf_w_, &dlnf_b_}) backend_.zero(*a);
  backend_.cross_entropy_backward(dlogits_, logits_, lse_, targets, N, V, Vp);
  Array no_bias;
  backend_.linear_backward(df_, dwte_, no_bias, dlogits_, f_, wte_, N, C, Vp);
  backend_.layernorm_backward(dy_, dlnf_w_, dlnf_b_, df_, y, lnf_w_, lnf_mean_, lnf_rstd_, N, C);
  const Array& dx = stack_.backward(dy_);
  backend_.embedding_backward(dwte_, dwpe_, dx, tokens, B, T, V, C);
  return value;
}

double SingleDeviceGpt::loss(std::span<const std::int32_t> tokens,
                             std::span<const std::int32_t> targets) {
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, V = shape_.vocab;
  const std::int64_t N = B * T, Vp = padded_vocab_;
  MESHTP_CHECK(static_cast<std::int64_t>(tokens.size()) == N &&
                   static_cast<std::int64_t>(targets.size()) == N,
               "gpt: {} tokens and {} targets, expected batch {} x seq {} = {} each", tokens.size(),
               targets.size(), B, T, N);
  backend_.embedding_forward(x_, tokens, B, T, wte_, V, wpe_, C);
  stack_out_ = &stack_.forward(x_);
  backend_.layernorm_forward(f_, lnf_mean_, lnf_rstd_, *stack_out_, lnf_w_, lnf_b_, N, C);
  backend_.linear_forward(logits_, f_, wte_, Array(), N, C, Vp);
  return backend_.cross_entropy_forward(lse_, logits_, targets, N, V, Vp);
}

GptWeights SingleDeviceGpt::gradients() {
  return GptWeights{.wte = leading(backend_.download(dwte_), shape_.vocab * shape_.hidden),
                    .wpe = backend_.download(dwpe_),
                    .blocks = stack_.gradients(),
                    .lnf_w = backend_.download(dlnf_w_),
                    .lnf_b = backend_.download(dlnf_b_)};
}

double SingleDeviceGpt::flops_per_step() const { return shape_.step_flops(); }

}  // namespace meshtp::device
