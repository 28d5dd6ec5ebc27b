#include "device/block_stack.hpp"

#include <string>
#include <utility>

#include "core/error.hpp"

namespace meshtp::device {

namespace {

// Uploads one host vector of `expected` values into a new array of `type`.
Array upload_param(Backend& backend, const std::vector<float>& values, std::int64_t expected,
                   Element type, int layer, const char* name) {
  MESHTP_CHECK(static_cast<std::int64_t>(values.size()) == expected,
               "block stack: layer {} {} has {} values, expected {}", layer, name, values.size(),
               expected);
  Array a = backend.alloc(expected, type);
  backend.upload(a, values);
  return a;
}

}  // namespace

BlockStack::BlockStack(Backend& backend, const layout::ModelShape& shape,
                       const std::vector<BlockWeights>& weights, Element compute)
    : backend_(backend), shape_(shape), compute_(compute) {
  layout::ModelShape checked = shape_;
  checked.vocab = 0;  // not used here
  checked.validate("block stack");
  MESHTP_CHECK(static_cast<std::int64_t>(weights.size()) == shape_.layers,
               "block stack: {} layers of weights for a stack of {}", weights.size(),
               shape_.layers);
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, NH = shape_.heads;
  const std::int64_t N = B * T;
  const Element f32 = Element::kF32;
  for (int l = 0; l < static_cast<int>(shape_.layers); ++l) {
    const BlockWeights& w = weights[static_cast<std::size_t>(l)];
    Params p;
    p.ln1_w = upload_param(backend_, w.ln1_w, C, f32, l, "ln1.weight");
    p.ln1_b = upload_param(backend_, w.ln1_b, C, f32, l, "ln1.bias");
    p.qkv_w = upload_param(backend_, w.qkv_w, 3 * C * C, compute_, l, "attn.qkv.weight");
    p.qkv_b = upload_param(backend_, w.qkv_b, 3 * C, compute_, l, "attn.qkv.bias");
    p.proj_w = upload_param(backend_, w.proj_w, C * C, compute_, l, "attn.proj.weight");
    p.proj_b = upload_param(backend_, w.proj_b, C, compute_, l, "attn.proj.bias");
    p.ln2_w = upload_param(backend_, w.ln2_w, C, f32, l, "ln2.weight");
    p.ln2_b = upload_param(backend_, w.ln2_b, C, f32, l, "ln2.bias");
    p.mlp1_w = upload_param(backend_, w.mlp1_w, 4 * C * C, compute_, l, "mlp.fc1.weight");
    p.mlp1_b = upload_param(backend_, w.mlp1_b, 4 * C, compute_, l, "mlp.fc1.bias");
    p.mlp2_w = upload_param(backend_, w.mlp2_w, 4 * C * C, compute_, l, "mlp.fc2.weight");
    p.mlp2_b = upload_param(backend_, w.mlp2_b, C, compute_, l, "mlp.fc2.bias");
    params_.push_back(std::move(p));
    grads_.push_back(Grads{.ln1_w = make(C, f32),
                           .ln1_b = make(C, f32),
                           .qkv_w = make(3 * C * C, f32),
                           .qkv_b = make(3 * C, f32),
                           .proj_w = make(C * C, f32),
                           .proj_b = make(C, f32),
                           .ln2_w = make(C, f32),
                           .ln2_b = make(C, f32),
                           .mlp1_w = make(4 * C * C, f32),
                           .mlp1_b = make(4 * C, f32),
                           .mlp2_w = make(4 * C * C, f32),
                           .mlp2_b = make(C, f32)});
    saved_.push_back(Saved{.x = make(N * C, compute_),
                           .ln1 = make(N * C, compute_),
                           .ln1_mean = make(N, f32),
                           .ln1_rstd = make(N, f32),
                           .qkv = make(N * 3 * C, compute_),
                           .att = make(B * NH * T * T, compute_),
                           .attn = make(N * C, compute_),
                           .xmid = make(N * C, compute_),
                           .ln2 = make(N * C, compute_),
                           .ln2_mean = make(N, f32),
                           .ln2_rstd = make(N, f32),
                           .mlp1 = make(N * 4 * C, compute_),
                           .gelu = make(N * 4 * C, compute_)});
  }
  scratch_ = Scratch{.dy = make(N * C, compute_),
                     .dx = make(N * C, compute_),
                     .dxmid = make(N * C, compute_),
                     .dmlp1 = make(N * 4 * C, compute_),
                     .dgelu = make(N * 4 * C, compute_),
                     .dln2 = make(N * C, compute_),
                     .dattn = make(N * C, compute_),
                     .dqkv = make(N * 3 * C, compute_),
                     .dln1 = make(N * C, compute_),
                     .attention = make(backend_.attention_scratch(B, T, NH), compute_),
                     .branch = make(N * C, compute_)};
  y_ = make(N * C, compute_);
}

const Array& BlockStack::forward(const Array& x) {
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, NH = shape_.heads;
  const std::int64_t N = B * T, HD = C / NH;
  MESHTP_CHECK(x.count() == N * C, "block stack forward: x has {} values, expected {} x {}",
               x.count(), N, C);
  backend_.copy(saved_.front().x, x);
  const int L = static_cast<int>(shape_.layers);
  for (int l = 0; l < L; ++l) {
    const Params& p = params_[static_cast<std::size_t>(l)];
    Saved& s = saved_[static_cast<std::size_t>(l)];
    Array& out = l + 1 < L ? saved_[static_cast<std::size_t>(l) + 1].x : y_;
    Array& branch = scratch_.branch;
    // x_mid = x + proj(attention(qkv(ln1(x))))
    backend_.layernorm_forward(s.ln1, s.ln1_mean, s.ln1_rstd, s.x, p.ln1_w, p.ln1_b, N, C);
    backend_.linear_forward(s.qkv, s.ln1, p.qkv_w, p.qkv_b, N, C, 3 * C);
    backend_.attention_forward(s.attn, s.att, s.qkv, B, T, NH, HD);
    backend_.linear_forward(branch, s.attn, p.proj_w, p.proj_b, N, C, C);
    backend_.residual_forward(s.xmid, s.x, branch, N * C);
    // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
    backend_.layernorm_forward(s.ln2, s.ln2_mean, s.ln2_rstd, s.xmid, p.ln2_w, p.ln2_b, N, C);
    backend_.linear_forward(s.mlp1, s.ln2, p.mlp1_w, p.mlp1_b, N, C, 4 * C);
    backend_.gelu_forward(s.gelu, s.mlp1, N * 4 * C);
    backend_.linear_forward(branch, s.gelu, p.mlp2_w, p.mlp2_b, N, 4 * C, C);
    backend_.residual_forward(out, s.xmid, branch, N * C);
  }
  forward_done_ = true;
  return y_;
}

const Array& BlockStack::backward(const Array& dy_in) {
  const std::int64_t B = shape_.batch, T = shape_.seq, C = shape_.hidden, NH = shape_.heads;
  const std::int64_t N = B * T, HD = C / NH;
  MESHTP_CHECK(forward_done_ && dy_in.count() == N * C,
               "block stack backward: dy has {} values, expected {} x {} after a forward",
               dy_in.count(), N, C);
  for (Grads& g : grads_) {
    for (Array* a : {&g.ln1_w, &g.ln1_b, &g.qkv_w, &g.qkv_b, &g.proj_w, &g.proj_b, &g.ln2_w,
                     &g.ln2_b, &g.mlp1_w, &g.mlp1_b, &g.mlp2_w, &g.mlp2_b}) {
      backend_.zero(*a);
    }
  }
  Scratch& d = scratch_;
  backend_.copy(d.dy, dy_in);
  for (int l = static_cast<int>(shape_.layers) - 1; l >= 0; --l) {
    const Params& p = params_[static_cast<std::size_t>(l)];
    const Saved& s = saved_[static_cast<std::size_t>(l)];
    Grads& g = grads_[static_cast<std::size_t>(l)];
    // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid)))): dy goes to x_mid and into the branch
    backend_.copy(d.dxmid, d.dy);
    backend_.zero(d.dgelu);
    backend_.linear_backward(d.dgelu, g.mlp2_w, g.mlp2_b, d.dy, s.gelu, p.mlp2_w, N, 4 * C, C);
    backend_.zero(d.dmlp1);
    backend_.gelu_backward(d.dmlp1, s.mlp1, d.dgelu, N * 4 * C);
    backend_.zero(d.dln2);
    backend_.linear_backward(d.dln2, g.mlp1_w, g.mlp1_b, d.dmlp1, s.ln2, p.mlp1_w, N, C, 4 * C);
    backend_.layernorm_backward(d.dxmid, g.ln2_w, g.ln2_b, d.dln2, s.xmid, p.ln2_w, s.ln2_mean,
                                s.ln2_rstd, N, C);
    // x_mid = x + proj(attention(qkv(ln1(x)))): dx_mid goes to x and into the branch
    backend_.copy(d.dx, d.dxmid);
    backend_.zero(d.dattn);
    backend_.linear_backward(d.dattn, g.proj_w, g.proj_b, d.dxmid, s.attn, p.proj_w, N, C, C);
    backend_.zero(d.dqkv);
    backend_.attention_backward(d.dqkv, d.attention, d.dattn, s.qkv, s.att, B, T, NH, HD);
    backend_.zero(d.dln1);
    backend_.linear_backward(d.dln1, g.qkv_w, g.qkv_b, d.dqkv, s.ln1, p.qkv_w, N, C, 3 * C);
    backend_.layernorm_backward(d.dx, g.ln1_w, g.ln1_b, d.dln1, s.x, p.ln1_w, s.ln1_mean,
                                s.ln1_rstd, N, C);
    std::swap(d.dy, d.dx);  // layer l's dx is layer l−1's dy
  }
  return d.dy;
}

std::vector<BlockWeights> BlockStack::gradients() {
  std::vector<BlockWeights> out;
  std::size_t layer_param = 0;
  const std::vector<ParamRef> params = parameters();
  for (std::size_t l = 0; l < grads_.size(); ++l) {
    BlockWeights w;
    for (std::vector<float>* v : fields(w)) *v = backend_.download(params[layer_param++].grad);
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<BlockStack::ParamRef> BlockStack::parameters() {
  std::vector<ParamRef> out;
  for (std::size_t l = 0; l < params_.size(); ++l) {
    const Params& p = params_[l];
    const Grads& g = grads_[l];
    out.push_back({p.ln1_w, g.ln1_w, false});
    out.push_back({p.ln1_b, g.ln1_b, false});
    out.push_back({p.qkv_w, g.qkv_w, true});
    out.push_back({p.qkv_b, g.qkv_b, false});
    out.push_back({p.proj_w, g.proj_w, true});
    out.push_back({p.proj_b, g.proj_b, false});
    out.push_back({p.ln2_w, g.ln2_w, false});
    out.push_back({p.ln2_b, g.ln2_b, false});
    out.push_back({p.mlp1_w, g.mlp1_w, true});
    out.push_back({p.mlp1_b, g.mlp1_b, false});
    out.push_back({p.mlp2_w, g.mlp2_w, true});
    out.push_back({p.mlp2_b, g.mlp2_b, false});
  }
  return out;
}

double BlockStack::flops_per_step() const {
  return static_cast<double>(shape_.layers) * shape_.layer_flops();
}

}  // namespace meshtp::device
