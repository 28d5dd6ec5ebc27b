// The serial GPT on one device::Backend: token + position embedding, the block stack
// (device/block_stack.hpp), a final LayerNorm, the head tied to the token embedding and
// softmax cross-entropy — the model `meshtp train` runs, on one device with no mesh. On the
// CPU backend it is tested against the serial reference GPT (tests/model/serial_gpt.hpp);
// on the GPU it is what `meshtp gpu step` times.
//
//   x      = wte[tokens] + wpe[t]                     (N × C)
//   y      = stack(x)
//   f      = layernorm(y; lnf)
//   logits = f · wteᵀ                                 (N × V, no bias)
//   loss   = mean_n (lse_n − logits[n, target_n])
//   backward: each op's backward in reverse; wte's gradient is the head's plus the
//   embedding's (tied)
//
// The vocabulary is padded to Vp = a multiple of kVocabAlignment rows of wte (zero, and they
// stay zero: their logits are never read, their dlogits are 0, so their gradient is 0 and
// AdamW keeps them at 0), so that every row of logits starts 16-byte aligned and the head's
// three GeMMs run cuBLASLt's tensor-core kernels: GPT-2's V = 50257 is odd. Megatron-LM pads
// the same way (--make-vocab-size-divisible-by, default 128). The padding changes no result:
// cross-entropy reads the first V columns only, and parameters()/gradients() return V rows.
// flops_per_step() counts V, not Vp.
//
// Element types as the stack's: wte and wpe's compute copies, activations and logits of the
// compute type, the final LayerNorm's parameters and statistics, lse and every gradient fp32.
//
// The optimizer: update() is AdamW on fp32 master weights (held apart from the compute copies
// in bf16; the compute copies themselves in fp32) with fp32 moments, weight decay on the
// matrices and embeddings only (train/adamw.hpp's rule: not LayerNorm's, not the biases), and
// rewrites the compute copies (mixed precision as Micikevicius et al. 2018 §3 has it). A
// training step is forward_backward(), clip_gradients(), update(); the learning-rate schedule
// is the caller's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "device/backend.hpp"
#include "device/block_stack.hpp"
#include "layout/model_shape.hpp"

namespace meshtp::device {

inline constexpr std::int64_t kVocabAlignment = 128;

// The model's parameters (or gradients) as fp32 host values, PyTorch layouts, model/params.hpp
// and model/gpt.hpp's names: wte [V, C], wpe [T, C] (T = the shape's seq), the blocks,
// lnf.weight and lnf.bias [C].
struct GptWeights {
  std::vector<float> wte, wpe;
  std::vector<BlockWeights> blocks;
  std::vector<float> lnf_w, lnf_b;
};

class SingleDeviceGpt {
 public:
  // shape: batch, seq, hidden, heads, layers and vocab (≥ 1). Throws meshtp::Error naming the
  // value when a size does not fit.
  SingleDeviceGpt(Backend& backend, const layout::ModelShape& shape, const GptWeights& weights,
                  Element compute);

  // The mean loss of predicting `targets` from `tokens` (B·T ids each, in [0, V)), and every
  // parameter's gradient of it (overwritten): the forward and the backward.
  double forward_backward(std::span<const std::int32_t> tokens,
                          std::span<const std::int32_t> targets);
  // The forward alone (validation): the same loss, no gradient touched.
  double loss(std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets);
  GptWeights gradients();
  // The global gradient norm ‖g‖ over every parameter (fp32 gradients, summed in double),
  // and, when max_norm > 0 and ‖g‖ > max_norm, every gradient scaled by max_norm/‖g‖ (train's
  // clipping rule, trainer.hpp). Returns ‖g‖ before clipping.
  double clip_gradients(double max_norm);
  // One AdamW step over every parameter with the last forward_backward()'s gradients;
  // step.decay applies to the matrices and embeddings, 0 to the rest.
  void update(const AdamWStep& step);
  // The fp32 master weights.
  GptWeights parameters();

  // Model FLOPs of one forward + backward: layout::ModelShape::step_flops() (the stack's and
  // the head's 6·N·C·V).
  double flops_per_step() const;
  // V rounded up to a multiple of kVocabAlignment: the rows of wte the device holds.
  std::int64_t padded_vocab() const { return padded_vocab_; }

 private:
  Array make(std::int64_t count, Element type) { return backend_.alloc(count, type); }

  Backend& backend_;
  layout::ModelShape shape_;
  Element compute_;
  std::int64_t padded_vocab_;
  BlockStack stack_;
  Array wte_, wpe_, lnf_w_, lnf_b_;      // compute copies (wte, wpe) and fp32 (lnf)
  Array dwte_, dwpe_, dlnf_w_, dlnf_b_;  // fp32
  Array x_, f_, lnf_mean_, lnf_rstd_, logits_, lse_, dlogits_, df_, dy_;
  const Array* stack_out_ = nullptr;  // the stack's output of the last forward
  // The optimizer's view: every parameter in GptWeights order, and whether it decays.
  std::vector<AdamWParam> optimizer_;
  std::vector<bool> decays_;
};

}  // namespace meshtp::device
