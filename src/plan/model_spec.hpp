// ModelSpec: the shapes of a GPT-style transformer the planner prices, and its FLOP count.
// The formulas below are GPT's; a Llama-family model (layout/model_shape.hpp: kv_heads,
// ffn_hidden, activation, norm, position, tie_embeddings) replaces 3h by the QKV width
// h + 2·g·d, 4h by f (2f into SwiGLU), and 12h² by Σ in·out of the four linears.
//
//   L layers, hidden h, a heads (h/a per head), FFN 4h, vocabulary V (0: no embedding),
//   batch b, sequence s. Every layer: QKV h→3h, attention core, projection h→h, MLP h→4h→h.
//
//   FLOPs of one layer, forward + backward, no recomputation (ATP §5, Table 2):
//     72·b·s·h² + 12·b·s²·h         (forward is a third: 24·b·s·h² + 4·b·s²·h)
//   Parameters of one layer: 12h² + 13h (QKV 3h²+3h, proj h²+h, MLP 8h²+5h, 2 LayerNorms 4h).
//
//   precision   fp16: mixed precision (fp16 weights/activations, fp32 master + AdamW);
//               fp32: everything fp32 (the meshtp runtime). 2 or 4 bytes per element.
//   recompute   none | selective (attention core recomputed, Korthikanti et al.) | full
//               (each layer's forward re-run in backward; only layer inputs are kept).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "core/precision.hpp"
#include "layout/model_shape.hpp"
#include "layout/vocabulary.hpp"

namespace meshtp::plan {

// fp16 and bf16 are mixed precision (2-byte values on the wire and in activations, fp32
// master weights and moments); fp32 is 4 bytes throughout (core/precision.hpp).
using layout::Attention;
using layout::Recompute;
using meshtp::Precision;

// A ModelShape (layout/model_shape.hpp; batch is the global batch of a step, vocab 0 ignores
// the embedding) with its name, precision and recomputation: what the planner prices.
struct ModelSpec : layout::ModelShape {
  std::string name;
  std::string description;
  Precision precision = Precision::kFp16;
  Recompute recompute = Recompute::kNone;
  // Whether the runtime drops out (Megatron-LM: the attention probabilities and both residual
  // branches, elementwise.hpp). meshtp's runtime has no dropout; the planner sets this for
  // the megatron runtime (layout_search.hpp). Not part of a model file.
  bool dropout = false;
  // The attention core the runtime runs (layout::Plan::attention): unfused prices the full
  // s×s products and the softmax over the causal half; fused (ops/flash_attention.hpp) the
  // products over the tiles it visits and O(s) bytes (core/gemm_model.hpp
  // flash_attention_seconds, elementwise.hpp). Set from the plan; not part of a model file.
  Attention attention = Attention::kUnfused;

  int element_bytes() const { return meshtp::element_bytes(precision); }

  // The layers' FLOPs of a step (layout::ModelShape::layer_flops, no head).
  double model_flops() const { return layers_flops(); }
  // A dense layer's: 12h² + 13h (GPT); in general Σ in·out, the biases of GeLU models and
  // two norms.
  double layer_params() const;
  // A MoE layer's: attention (and its biases), two norms, the E + shared experts and the
  // router (layout::ModelShape::moe_mlp_params).
  double moe_layer_params() const;
  // Σ over the layers (dense and MoE) + V·h (twice for an untied head).
  double total_params() const;
  // What one token runs: total_params() less the E − k routed experts it skips per MoE layer.
  double active_params() const;

  // Throws meshtp::Error naming the model and the value ("model 'x': hidden=1000 is not
  // divisible by heads=3").
  void validate() const;
  using ModelShape::validate;
  friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// Whether Megatron-LM (and the runtimes priced as it) drops out on `m`'s layers: the GPT
// family (LayerNorm) does (Korthikanti et al. §4.1 count its masks); the Llama family
// (RMSNorm: Llama, Mixtral, Qwen) trains without dropout: Llama's reference model has no
// dropout layer, Megatron-LM's Llama and Mixtral recipes (examples/llama/
// train_llama3_8b_h100_fp8.sh, examples/mixtral/train_mixtral_8x7b_distributed.sh) pass
// --attention-dropout 0.0 --hidden-dropout 0.0, and PyTorch's dropout at p = 0 returns its
// input, keeping no mask.
bool megatron_drops_out(const layout::ModelShape& m);

std::ostream& operator<<(std::ostream& os, const ModelSpec& model);

nlohmann::json to_json(const ModelSpec& model);
ModelSpec model_from_json(const nlohmann::json& j, const std::string& source);

// A model's sizes overridden by the shape flags (--batch, --seq, --hidden, --heads, --layers;
// the Python module's batch=, seq=): 0 keeps the model's value.
struct ShapeOverrides {
  std::int64_t batch = 0, seq = 0, hidden = 0, heads = 0, layers = 0;
  // spec with every non-zero field; throws naming a value above 2^24 ("--batch=… is too
  // large").
  ModelSpec apply(ModelSpec spec) const;
};

}  // namespace meshtp::plan
