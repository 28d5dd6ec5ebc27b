// The serial GPT block stack, straight from the reference ops (src/ops), one process, no
// mesh, no chunks: what every distributed layout is compared with.
//
//   for each layer:  x_mid = x + proj(attention(qkv(ln1(x))))
//                    y     = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
//
// The Llama family's fields (layout/model_shape.hpp) as the ops have them: ln1/ln2 RMSNorm,
// RoPE on q and k after qkv (ops/rope.hpp, theta 10000), grouped-query attention by the fused
// core (ops/flash_attention.hpp; multi-head models the unfused one), SwiGLU on fc1's
// [gate | up], no biases where the table has none.
//
// Weights are the global tensors of model/params.hpp's table (PyTorch names and layouts).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/stack.hpp"
#include "ops/rope.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::model {

class ReferenceStack {
 public:
  // The config's shape is used (its layout is not).
  ReferenceStack(const StackConfig& config, std::map<std::string, Tensor> weights);

  // x: [b, s, h] or [b·s, h]; returns y in the same shape.
  Tensor forward(const Tensor& x);
  // Returns dx for dy = ∂L/∂y; grads() then holds every parameter's gradient (overwritten).
  Tensor backward(const Tensor& dy);
  const std::map<std::string, Tensor>& grads() const { return grads_; }

 private:
  struct Saved {
    // att: the probabilities, or (grouped-query) the fused core's log-sum-exps.
    Tensor x, ln1, ln1_mean, ln1_rstd, qkv, att, attn, xmid, ln2, ln2_mean, ln2_rstd, mlp1, gelu;
  };
  const Tensor& w(int layer, const char* suffix) const;
  Tensor& g(int layer, const char* suffix);
  // A bias, or empty where the model has none.
  std::span<const float> wb(int layer, const char* suffix) const;
  std::span<float> gb(int layer, const char* suffix);

  StackConfig config_;
  std::map<std::string, Tensor> weights_, grads_;
  std::vector<Saved> saved_;
  RopeTable rope_;  // position rope
};

}  // namespace meshtp::model
