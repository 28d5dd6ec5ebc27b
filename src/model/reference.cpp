#include "model/reference.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "ops/ops.hpp"

namespace meshtp::model {

ReferenceStack::ReferenceStack(const StackConfig& config, std::map<std::string, Tensor> weights)
    : config_(config), weights_(std::move(weights)) {
  const layout::ModelShape& c = config.block.shape;
  for (const ParamEntry& e : stack_param_table(config.stack_layers(), c)) {
    const auto it = weights_.find(e.name);
    MESHTP_CHECK(it != weights_.end(), "reference stack: missing weight '{}'", e.name);
    MESHTP_CHECK(it->second.shape() == e.shape, "reference stack: '{}' has shape {}, expected {}",
                 e.name, to_string(it->second.shape()), to_string(e.shape));
    grads_.emplace(e.name, Tensor(e.shape));
  }
  if (c.position == layout::Position::kRope) {
    rope_ = rope_table(c.head_dim(), 0, c.seq, rope_theta_or_default(c.rope_theta));
  }
}

const Tensor& ReferenceStack::w(int layer, const char* suffix) const {
  return weights_.at(fmt::format("layers.{}.{}", layer, suffix));
}

Tensor& ReferenceStack::g(int layer, const char* suffix) {
  return grads_.at(fmt::format("layers.{}.{}", layer, suffix));
}

std::span<const float> ReferenceStack::wb(int layer, const char* suffix) const {
  const auto it = weights_.find(fmt::format("layers.{}.{}", layer, suffix));
  if (it == weights_.end() || !grads_.contains(it->first)) return {};  // absent (params.hpp)
  return it->second.values();
}

std::span<float> ReferenceStack::gb(int layer, const char* suffix) {
  const auto it = grads_.find(fmt::format("layers.{}.{}", layer, suffix));
  return it == grads_.end() ? std::span<float>() : it->second.values();
}

Tensor ReferenceStack::forward(const Tensor& x_in) {
  const layout::ModelShape& c = config_.block.shape;
  const std::int64_t B = c.batch, T = c.seq, C = c.hidden, NH = c.heads, N = B * T;
  const std::int64_t NKV = c.kv(), Q = c.qkv_width(), F = c.ffn(), F1 = c.mlp1_width();
  const bool rms = c.norm == layout::Norm::kRmsNorm;
  const bool swiglu = c.activation == layout::Activation::kSwiglu;
  MESHTP_CHECK(x_in.numel() == N * C, "reference forward: x has shape {}, expected [{}, {}, {}]",
               to_string(x_in.shape()), B, T, C);
  Tensor x(Shape{N, C}, std::vector<float>(x_in.values().begin(), x_in.values().end()));
  saved_.assign(static_cast<std::size_t>(config_.stack_layers()), {});
  for (int l = 0; l < config_.stack_layers(); ++l) {
    Saved& s = saved_[static_cast<std::size_t>(l)];
    s.x = x;
    s.ln1 = Tensor({N, C});
    s.ln1_mean = Tensor({N});
    s.ln1_rstd = Tensor({N});
    if (rms) {
      rmsnorm_forward(s.ln1.matrix(), s.ln1_rstd.values(), s.x.matrix(),
                      w(l, "ln1.weight").values());
    } else {
      layernorm_forward(s.ln1.matrix(), s.ln1_mean.values(), s.ln1_rstd.values(), s.x.matrix(),
                        w(l, "ln1.weight").values(), w(l, "ln1.bias").values());
    }
    s.qkv = Tensor({N, Q});
    linear_forward(s.qkv.matrix(), s.ln1.matrix(), w(l, "attn.qkv.weight").matrix(),
                   wb(l, "attn.qkv.bias"));
    if (rope_.len > 0) {  // q and k rotated in place: the core and its backward see them so
      rope_forward(s.qkv.matrix().block(0, 0, N, C), rope_, B, NH);
      rope_forward(s.qkv.matrix().block(0, C, N, (Q - C) / 2), rope_, B, NKV);
    }
    s.attn = Tensor({N, C});
    if (NKV == NH) {
      s.att = Tensor({attention_att_size(B, T, NH)});
      attention_forward(s.attn.matrix(), s.att.values(), s.qkv.matrix(), B, T, NH);
    } else {  // grouped-query: the fused core (ops/flash_attention.hpp), its log-sum-exps kept
      s.att = Tensor({B * NH * T});
      Tensor scratch({flash_attention_scratch_size({}, T, T, C / NH)});
      flash_attention_forward_qkv(s.attn.matrix(), s.att.values(), scratch.values(), s.qkv.matrix(),
                                  B, T, NH, NKV);
    }
    Tensor proj({N, C});
    linear_forward(proj.matrix(), s.attn.matrix(), w(l, "attn.proj.weight").matrix(),
                   wb(l, "attn.proj.bias"));
    s.xmid = Tensor({N, C});
    residual_forward(s.xmid.matrix(), s.x.matrix(), proj.matrix());
    s.ln2 = Tensor({N, C});
    s.ln2_mean = Tensor({N});
    s.ln2_rstd = Tensor({N});
    if (rms) {
      rmsnorm_forward(s.ln2.matrix(), s.ln2_rstd.values(), s.xmid.matrix(),
                      w(l, "ln2.weight").values());
    } else {
      layernorm_forward(s.ln2.matrix(), s.ln2_mean.values(), s.ln2_rstd.values(), s.xmid.matrix(),
                        w(l, "ln2.weight").values(), w(l, "ln2.bias").values());
    }
    s.mlp1 = Tensor({N, F1});
    linear_forward(s.mlp1.matrix(), s.ln2.matrix(), w(l, "mlp.fc1.weight").matrix(),
                   wb(l, "mlp.fc1.bias"));
    s.gelu = Tensor({N, F});
    if (swiglu) {  // fc1's rows gate | up: its output [gate | up]
      swiglu_forward(s.gelu.matrix(), s.mlp1.matrix());
    } else {
      gelu_forward(s.gelu.matrix(), s.mlp1.matrix());
    }
    Tensor mlp2({N, C});
    linear_forward(mlp2.matrix(), s.gelu.matrix(), w(l, "mlp.fc2.weight").matrix(),
                   wb(l, "mlp.fc2.bias"));
    residual_forward(x.matrix(), s.xmid.matrix(), mlp2.matrix());
  }
  x.reshape(x_in.shape());
  return x;
}

Tensor ReferenceStack::backward(const Tensor& dy_in) {
  const layout::ModelShape& c = config_.block.shape;
  const std::int64_t B = c.batch, T = c.seq, C = c.hidden, NH = c.heads, N = B * T;
  const std::int64_t NKV = c.kv(), Q = c.qkv_width(), F = c.ffn(), F1 = c.mlp1_width();
  const bool rms = c.norm == layout::Norm::kRmsNorm;
  const bool swiglu = c.activation == layout::Activation::kSwiglu;
  MESHTP_CHECK(!saved_.empty() && dy_in.numel() == N * C,
               "reference backward: dy has shape {}, expected [{}, {}, {}] after a forward",
               to_string(dy_in.shape()), B, T, C);
  for (auto& [name, t] : grads_) t.fill(0.0f);
  Tensor dy(Shape{N, C}, std::vector<float>(dy_in.values().begin(), dy_in.values().end()));
  Tensor scratch(
      {NKV == NH ? attention_scratch_size(T) : flash_attention_scratch_size({}, T, T, C / NH)});
  for (int l = config_.stack_layers() - 1; l >= 0; --l) {
    const Saved& s = saved_[static_cast<std::size_t>(l)];
    // y = x_mid + mlp2(act(mlp1(ln2(x_mid))))
    Tensor dxmid({N, C}), dmlp2({N, C});
    residual_backward(dxmid.matrix(), dmlp2.matrix(), dy.matrix());
    Tensor dgelu({N, F}), dmlp1({N, F1}), dln2({N, C});
    linear_backward(dgelu.matrix(), g(l, "mlp.fc2.weight").matrix(), gb(l, "mlp.fc2.bias"),
                    dmlp2.matrix(), s.gelu.matrix(), w(l, "mlp.fc2.weight").matrix());
    if (swiglu) {
      swiglu_backward(dmlp1.matrix(), s.mlp1.matrix(), dgelu.matrix());
    } else {
      gelu_backward(dmlp1.matrix(), s.mlp1.matrix(), dgelu.matrix());
    }
    linear_backward(dln2.matrix(), g(l, "mlp.fc1.weight").matrix(), gb(l, "mlp.fc1.bias"),
                    dmlp1.matrix(), s.ln2.matrix(), w(l, "mlp.fc1.weight").matrix());
    if (rms) {
      rmsnorm_backward(dxmid.matrix(), g(l, "ln2.weight").values(), dln2.matrix(), s.xmid.matrix(),
                       w(l, "ln2.weight").values(), s.ln2_rstd.values());
    } else {
      layernorm_backward(dxmid.matrix(), g(l, "ln2.weight").values(), g(l, "ln2.bias").values(),
                         dln2.matrix(), s.xmid.matrix(), w(l, "ln2.weight").values(),
                         s.ln2_mean.values(), s.ln2_rstd.values());
    }
    // x_mid = x + proj(attention(rope(qkv(ln1(x)))))
    Tensor dx({N, C}), dproj({N, C});
    residual_backward(dx.matrix(), dproj.matrix(), dxmid.matrix());
    Tensor dattn({N, C}), dqkv({N, Q}), dln1({N, C});
    linear_backward(dattn.matrix(), g(l, "attn.proj.weight").matrix(), gb(l, "attn.proj.bias"),
                    dproj.matrix(), s.attn.matrix(), w(l, "attn.proj.weight").matrix());
    if (NKV == NH) {
      attention_backward(dqkv.matrix(), scratch.values(), dattn.matrix(), s.qkv.matrix(),
                         s.att.values(), B, T, NH);
    } else {
      flash_attention_backward_qkv(dqkv.matrix(), scratch.values(), dattn.matrix(), s.qkv.matrix(),
                                   s.attn.matrix(), s.att.values(), B, T, NH, NKV);
    }
    if (rope_.len > 0) {
      rope_backward(dqkv.matrix().block(0, 0, N, C), rope_, B, NH);
      rope_backward(dqkv.matrix().block(0, C, N, (Q - C) / 2), rope_, B, NKV);
    }
    linear_backward(dln1.matrix(), g(l, "attn.qkv.weight").matrix(), gb(l, "attn.qkv.bias"),
                    dqkv.matrix(), s.ln1.matrix(), w(l, "attn.qkv.weight").matrix());
    if (rms) {
      rmsnorm_backward(dx.matrix(), g(l, "ln1.weight").values(), dln1.matrix(), s.x.matrix(),
                       w(l, "ln1.weight").values(), s.ln1_rstd.values());
    } else {
      layernorm_backward(dx.matrix(), g(l, "ln1.weight").values(), g(l, "ln1.bias").values(),
                         dln1.matrix(), s.x.matrix(), w(l, "ln1.weight").values(),
                         s.ln1_mean.values(), s.ln1_rstd.values());
    }
    dy = std::move(dx);
  }
  dy.reshape(dy_in.shape());
  return dy;
}

}  // namespace meshtp::model
