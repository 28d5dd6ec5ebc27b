// The serial GPT block stack on one device::Backend: model::ReferenceStack's math (one process,
// no mesh), with its activations, weights' compute copies and gradients in the backend's
// arrays. On the CPU backend it is tested against ReferenceStack (tests/device/); on the GPU it
// runs inside device::SingleDeviceGpt, which `meshtp gpu step` times.
//
//   for each layer l:  x_mid = x + proj(attention(qkv(ln1(x))))
//                      y     = x_mid + mlp2(gelu(mlp1(ln2(x_mid))))
//   backward: the same ops' backwards in exactly the reverse order, one per line
//
// Shape letters: N = B·T tokens, C hidden, NH heads, HD = C/NH.
//
// Element types. Activations, their gradients and the weights' compute copies are `compute`
// (bf16 or fp32); LayerNorm's weights and statistics, and every parameter gradient, are fp32:
// a bf16 GeMM accumulates into its fp32 dW (CUBLAS_COMPUTE_32F). The stack keeps one set of
// activations per layer for the backward (no recomputation) and reuses every buffer across
// steps: a step allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "device/backend.hpp"
#include "layout/model_shape.hpp"

namespace meshtp::device {

// One block's parameters (or their gradients), fp32 host values in PyTorch's layouts and
// model/params.hpp's table order: ln1 [C], qkv [3C, C] and [3C], proj [C, C] and [C], ln2
// [C], mlp1 [4C, C] and [4C], mlp2 [C, 4C] and [C].
struct BlockWeights {
  std::vector<float> ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b;
  std::vector<float> ln2_w, ln2_b, mlp1_w, mlp1_b, mlp2_w, mlp2_b;
};
// The fields in that order, and their names in the parameter table ("layers.{i}." + name):
// every walk over a block's parameters goes through these.
inline constexpr int kBlockParams = 12;
inline constexpr std::array<const char*, kBlockParams> kBlockParamNames{
    "ln1.weight",       "ln1.bias",       "attn.qkv.weight", "attn.qkv.bias",
    "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
    "mlp.fc1.weight",   "mlp.fc1.bias",   "mlp.fc2.weight",  "mlp.fc2.bias"};
template <typename Weights>  // BlockWeights or const BlockWeights
auto fields(Weights& w) {
  return std::array{&w.ln1_w, &w.ln1_b, &w.qkv_w,  &w.qkv_b,  &w.proj_w, &w.proj_b,
                    &w.ln2_w, &w.ln2_b, &w.mlp1_w, &w.mlp1_b, &w.mlp2_w, &w.mlp2_b};
}

class BlockStack {
 public:
  // shape: batch, seq, hidden, heads and layers are used (vocab is not); `weights` has one
  // entry per layer. Throws meshtp::Error naming the value when a size does not fit.
  BlockStack(Backend& backend, const layout::ModelShape& shape,
             const std::vector<BlockWeights>& weights, Element compute);

  // y = stack(x); x is N·C values of `compute` (or any type: it is converted). The result
  // lives until the next forward.
  const Array& forward(const Array& x);
  // Returns dx for dy = ∂L/∂y after a forward; gradients() then holds every parameter's
  // gradient (overwritten, not accumulated across calls).
  const Array& backward(const Array& dy);
  std::vector<BlockWeights> gradients();

  // Every parameter's compute copy and fp32 gradient, layer by layer in fields() order,
  // with whether weight decay applies (the matrices: not LayerNorm's or the biases): what
  // an optimizer updates (SingleDeviceGpt::update).
  struct ParamRef {
    Array compute, grad;
    bool decay = false;
  };
  std::vector<ParamRef> parameters();

  // Model FLOPs of one forward + backward: L · layout::ModelShape::layer_flops(), for MFU.
  double flops_per_step() const;
  std::int64_t tokens() const { return shape_.tokens(); }
  Array input_like() { return backend_.alloc(tokens() * shape_.hidden, compute_); }

 private:
  struct Params {  // compute copies (matrices, linear biases) and fp32 LayerNorm vectors
    Array ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, mlp1_w, mlp1_b, mlp2_w, mlp2_b;
  };
  struct Grads {  // fp32
    Array ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, mlp1_w, mlp1_b, mlp2_w, mlp2_b;
  };
  struct Saved {  // what layer l's backward reads; x is the layer's input
    Array x, ln1, ln1_mean, ln1_rstd, qkv, att, attn, xmid, ln2, ln2_mean, ln2_rstd, mlp1, gelu;
  };
  // Backward scratch, one set reused by every layer.
  struct Scratch {
    Array dy, dx, dxmid, dmlp1, dgelu, dln2, dattn, dqkv, dln1, attention, branch;
  };

  Array make(std::int64_t count, Element type) { return backend_.alloc(count, type); }

  Backend& backend_;
  layout::ModelShape shape_;
  Element compute_;
  std::vector<Params> params_;
  std::vector<Grads> grads_;
  std::vector<Saved> saved_;
  Scratch scratch_;
  Array y_;
  bool forward_done_ = false;
};

}  // namespace meshtp::device
