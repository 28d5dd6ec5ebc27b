#include "model/reference.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "ops/ops.hpp"

namespace meshtp::model {

ReferenceStack::ReferenceStack(const StackConfig& config, std::map<std::string, Tensor> weights)
    : config_(config), weights_(std::move(weights)) {
  for (const ParamEntry& e : stack_param_table(config.stack_layers(), config.block.shape.hidden)) {
    const auto it = weights_.find(e.name);
    MESHTP_CHECK(it != weights_.end(), "reference stack: missing weight '{}'", e.name);
    MESHTP_CHECK(it->second.shape() == e.shape, "reference stack: '{}' has shape {}, expected {}",
                 e.name, to_string(it->second.shape()), to_string(e.shape));
    grads_.emplace(e.name, Tensor(e.shape));
  }
}

const Tensor& ReferenceStack::w(int layer, const char* suffix) const {
  return weights_.at(fmt::format("layers.{}.{}", layer, suffix));
}

Tensor& ReferenceStack::g(int layer, const char* suffix) {
  return grads_.at(fmt::format("layers.{}.{}", layer, suffix));
}

Tensor ReferenceStack::forward(const Tensor& x_in) {
  const layout::ModelShape& c = config_.block.shape;
  const std::int64_t B = c.batch, T = c.seq, C = c.hidden, NH = c.heads, N = B * T;
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
    layernorm_forward(s.ln1.matrix(), s.ln1_mean.values(), s.ln1_rstd.values(), s.x.matrix(),
                      w(l, "ln1.weight").values(), w(l, "ln1.bias").values());
    s.qkv = Tensor({N, 3 * C});
    linear_forward(s.qkv.matrix(), s.ln1.matrix(), w(l, "attn.qkv.weight").matrix(),
                   w(l, "attn.qkv.bias").values());
    s.att = Tensor({attention_att_size(B, T, NH)});
    s.attn = Tensor({N, C});
    attention_forward(s.attn.matrix(), s.att.values(), s.qkv.matrix(), B, T, NH);
    Tensor proj({N, C});
    linear_forward(proj.matrix(), s.attn.matrix(), w(l, "attn.proj.weight").matrix(),
                   w(l, "attn.proj.bias").values());
    s.xmid = Tensor({N, C});
    residual_forward(s.xmid.matrix(), s.x.matrix(), proj.matrix());
    s.ln2 = Tensor({N, C});
    s.ln2_mean = Tensor({N});
    s.ln2_rstd = Tensor({N});
    layernorm_forward(s.ln2.matrix(), s.ln2_mean.values(), s.ln2_rstd.values(), s.xmid.matrix(),
                      w(l, "ln2.weight").values(), w(l, "ln2.bias").values());
    s.mlp1 = Tensor({N, 4 * C});
    linear_forward(s.mlp1.matrix(), s.ln2.matrix(), w(l, "mlp.fc1.weight").matrix(),
                   w(l, "mlp.fc1.bias").values());
    s.gelu = Tensor({N, 4 * C});
    gelu_forward(s.gelu.matrix(), s.mlp1.matrix());
    Tensor mlp2({N, C});
    linear_forward(mlp2.matrix(), s.gelu.matrix(), w(l, "mlp.fc2.weight").matrix(),
                   w(l, "mlp.fc2.bias").values());
    residual_forward(x.matrix(), s.xmid.matrix(), mlp2.matrix());
  }
  x.reshape(x_in.shape());
  return x;
}

Tensor ReferenceStack::backward(const Tensor& dy_in) {
  const layout::ModelShape& c = config_.block.shape;
  const std::int64_t B = c.batch, T = c.seq, C = c.hidden, NH = c.heads, N = B * T;
  MESHTP_CHECK(!saved_.empty() && dy_in.numel() == N * C,
               "reference backward: dy has shape {}, expected [{}, {}, {}] after a forward",
               to_string(dy_in.shape()), B, T, C);
  for (auto& [name, t] : grads_) t.fill(0.0f);
  Tensor dy(Shape{N, C}, std::vector<float>(dy_in.values().begin(), dy_in.values().end()));
  Tensor scratch({attention_scratch_size(T)});
  for (int l = config_.stack_layers() - 1; l >= 0; --l) {
    const Saved& s = saved_[static_cast<std::size_t>(l)];
    // y = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
    Tensor dxmid({N, C}), dmlp2({N, C});
    residual_backward(dxmid.matrix(), dmlp2.matrix(), dy.matrix());
    Tensor dgelu({N, 4 * C}), dmlp1({N, 4 * C}), dln2({N, C});
    linear_backward(dgelu.matrix(), g(l, "mlp.fc2.weight").matrix(), g(l, "mlp.fc2.bias").values(),
                    dmlp2.matrix(), s.gelu.matrix(), w(l, "mlp.fc2.weight").matrix());
    gelu_backward(dmlp1.matrix(), s.mlp1.matrix(), dgelu.matrix());
    linear_backward(dln2.matrix(), g(l, "mlp.fc1.weight").matrix(), g(l, "mlp.fc1.bias").values(),
                    dmlp1.matrix(), s.ln2.matrix(), w(l, "mlp.fc1.weight").matrix());
    layernorm_backward(dxmid.matrix(), g(l, "ln2.weight").values(), g(l, "ln2.bias").values(),
                       dln2.matrix(), s.xmid.matrix(), w(l, "ln2.weight").values(),
                       s.ln2_mean.values(), s.ln2_rstd.values());
    // x_mid = x + proj(attention(qkv(ln1(x))))
    Tensor dx({N, C}), dproj({N, C});
    residual_backward(dx.matrix(), dproj.matrix(), dxmid.matrix());
    Tensor dattn({N, C}), dqkv({N, 3 * C}), dln1({N, C});
    linear_backward(dattn.matrix(), g(l, "attn.proj.weight").matrix(),
                    g(l, "attn.proj.bias").values(), dproj.matrix(), s.attn.matrix(),
                    w(l, "attn.proj.weight").matrix());
    attention_backward(dqkv.matrix(), scratch.values(), dattn.matrix(), s.qkv.matrix(),
                       s.att.values(), B, T, NH);
    linear_backward(dln1.matrix(), g(l, "attn.qkv.weight").matrix(),
                    g(l, "attn.qkv.bias").values(), dqkv.matrix(), s.ln1.matrix(),
                    w(l, "attn.qkv.weight").matrix());
    layernorm_backward(dx.matrix(), g(l, "ln1.weight").values(), g(l, "ln1.bias").values(),
                       dln1.matrix(), s.x.matrix(), w(l, "ln1.weight").values(),
                       s.ln1_mean.values(), s.ln1_rstd.values());
    dy = std::move(dx);
  }
  dy.reshape(dy_in.shape());
  return dy;
}

}  // namespace meshtp::model
