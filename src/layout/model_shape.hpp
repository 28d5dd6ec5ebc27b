// ModelShape: the sizes of a GPT-style transformer. One type for every layer that needs them:
// the planner's model (plan::ModelSpec is a ModelShape with a name and a precision), the
// runtime's (model::GptConfig and the block configs hold one) and the simulator's run spec
// (it holds a GptConfig). Sizes are 64-bit everywhere; a holder says whose batch it is.
//
//   batch   b  sequences: the global batch of a step in a ModelSpec or a TrainConfig, one
//              data-parallel replica's in a GptConfig, one microbatch's in a block
//   seq     s  tokens per sequence          hidden  h  model width
//   heads   a  attention heads (h/a each)   layers  L  transformer blocks
//   vocab   V  vocabulary (0: no embedding, the planner prices the layers alone)
//
// The layer family (every default is today's GPT, the only one meshtp's runtime runs):
//   kv_heads   g  key/value heads (grouped-query attention; 0: a, multi-head); a % g == 0
//   ffn_hidden f  the MLP's width (0: 4h)
//   activation    gelu (h→f→h) | swiglu (h→2f gate and up, f→h: three f×h matrices)
//   norm          layernorm (weight and bias) | rmsnorm (weight)
//   position      learned (an s×h table) | rope (rotary, no parameters)
//   rope_theta    RoPE's base θ (0: the rotary op's default, RoFormer's 10000; Llama 3 500000)
//   tie_embeddings  the head shares the embedding table (true) or has its own V×h
// Linear biases follow the activation: GeLU models have them (GPT), SwiGLU ones do not
// (Llama, Megatron-LM's --disable-bias-linear).
//
// Mixture of experts (docs/moe.md; 0 experts: dense, every default below):
//   num_experts     E  routed experts of a MoE layer's MLP (0: dense)
//   top_k           k  experts each token is routed to (1 ≤ k ≤ E)
//   moe_ffn_hidden  f_e each expert's MLP width (0: f), with the model's activation
//   shared_experts     experts every token also runs (Qwen2-MoE's shared expert), width f_e
//   moe_every          every k-th layer is MoE, layers 0, k, 2k, … (Megatron-LM's
//                      --moe-layer-freq k); 1: every layer
//   capacity_factor    tokens an expert takes, × T·k/E (0: dropless)
//   router_aux_loss    the load-balancing loss's coefficient (Switch Transformer's α)
//   moe_force_balance  route every token to fixed experts, evenly (ops/moe.hpp's forced
//                      balance: a benchmark's routing, Megatron-LM's
//                      --moe-router-force-load-balancing); false: the router's top k
// A MoE layer's MLP: the router h×E, E experts of expert_weights() each, the shared ones.
//
// JSON (a model file, a plan's provenance, the simulator's spec): the keys "layers", "hidden",
// "heads", "vocab" (optional, 0), "batch", "seq", and the family's keys (kFamilyKeys,
// optional; written only when they differ from GPT's).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layout/vocabulary.hpp"

namespace meshtp::layout {

struct ModelShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t layers = 0;
  std::int64_t vocab = 0;
  std::int64_t kv_heads = 0;    // 0: heads
  std::int64_t ffn_hidden = 0;  // 0: 4·hidden
  Activation activation = Activation::kGelu;
  Norm norm = Norm::kLayerNorm;
  Position position = Position::kLearned;
  bool tie_embeddings = true;
  double rope_theta = 0;  // 0: ops/rope.hpp's kRopeTheta
  std::int64_t num_experts = 0;     // 0: dense
  std::int64_t top_k = 0;           // 0 when dense
  std::int64_t moe_ffn_hidden = 0;  // 0: ffn()
  std::int64_t shared_experts = 0;
  std::int64_t moe_every = 1;
  double capacity_factor = 0;  // 0: dropless
  double router_aux_loss = 0;
  bool moe_force_balance = false;

  std::int64_t tokens() const { return batch * seq; }  // n = b·s
  std::int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }        // g
  std::int64_t ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }  // f
  std::int64_t head_dim() const { return hidden / heads; }                       // d = h/a
  // The linears' output widths: QKV h + 2·g·d (3h multi-head), MLP1 f (GeLU) or 2f (SwiGLU's
  // gate and up together); the projection's is h, MLP2's f → h.
  std::int64_t qkv_width() const { return hidden + 2 * kv() * head_dim(); }
  std::int64_t mlp1_width() const { return activation == Activation::kSwiglu ? 2 * ffn() : ffn(); }
  // Σ in·out of the four linears: 12h² for GPT.
  double linear_weights() const;
  // Per token, the values the MLP keeps for its backward beyond its input: FC1's output and
  // the activation's (GeLU 2f = 8h for GPT, SwiGLU 2f + f).
  std::int64_t mlp_kept_width() const { return mlp1_width() + ffn(); }
  bool has_biases() const { return activation == Activation::kGelu; }
  // Mixture of experts.
  bool is_moe() const { return num_experts > 0; }
  std::int64_t expert_ffn() const { return moe_ffn_hidden > 0 ? moe_ffn_hidden : ffn(); }  // f_e
  // The shared experts' width S = shared_experts·f_e: one dense MLP every token runs (0: none).
  std::int64_t shared_ffn() const { return shared_experts * expert_ffn(); }
  // Whether layer i (0-based) is a MoE layer: i % moe_every == 0 (none when dense).
  bool moe_layer(std::int64_t i) const { return is_moe() && i % moe_every == 0; }
  // MoE layers among the first `n` layers (⌈n/moe_every⌉), of all of them without n.
  std::int64_t moe_layers(std::int64_t n) const { return is_moe() ? (n + moe_every - 1) / moe_every : 0; }
  std::int64_t moe_layers() const { return moe_layers(layers); }
  // The shape of this model's dense layers: the mixture-of-experts fields at their dense
  // defaults (what a MoE model with moe_every > 1 runs between its MoE layers).
  ModelShape without_experts() const;
  // Σ in·out of one expert's MLP: 3·h·f_e (SwiGLU) or 2·h·f_e (GeLU).
  double expert_weights() const;
  // One expert's parameters: expert_weights() and, for GeLU models, its biases f_e + h.
  double expert_params() const;
  // Σ in·out of QKV and the projection: the linears a MoE layer keeps from a dense one.
  double attention_weights() const;
  // Σ in·out a token runs through in a MoE layer: attention, its k routed and the shared
  // experts, the router (h·E).
  double moe_token_weights() const;
  // Parameters of a MoE layer's experts (E of them and the shared) and router (h·E).
  double moe_mlp_params() const;
  // Parameters of a norm over h: 2h (LayerNorm) or h (RMSNorm).
  std::int64_t norm_params() const { return norm == Norm::kLayerNorm ? 2 * hidden : hidden; }
  // Every family field GPT's (the only layers meshtp's runtime runs; the MoE fields aside).
  bool is_gpt() const;
  // The first family field that is not GPT's, as "kv_heads=8 (heads=32)"; none for GPT.
  std::optional<std::string> non_gpt_field() const;
  // Throws naming `where` and the first field that is not GPT's: "model 'llama3-8b':
  // kv_heads=8: meshtp's runtime runs GPT layers only (…)". The MoE fields are not checked:
  // the training loop runs GPT blocks with a mixture of experts (model/block.hpp).
  void require_gpt(std::string_view where) const;
  // Throws naming `where` and num_experts for a MoE model: for the runtimes without experts
  // (the one-device GPU loop, `block`, `bench layer`).
  void require_dense(std::string_view where) const;
  // The model FLOPs of one layer's step: 6·b·s·Σ in·out + 12·b·s²·h; GPT's 72·b·s·h² + 12·b·s²·h.
  // Model FLOPs of one training step (forward + backward, no recomputation), the count every
  // TFLOP/s and MFU here is reported in (ATP §5, Table 2; Megatron-LM's count): one layer
  // 72·b·s·h² + 12·b·s²·h for GPT (the attention products whole, not halved by the mask;
  // 6·b·s·linear_weights() + 12·b·s²·h in general), and a step the layers' plus the head's
  // 6·b·s·h·V.
  // A MoE layer: 6·b·s·moe_token_weights() + 12·b·s²·h (the k experts a token runs, not E).
  double layer_flops() const;
  double moe_layer_flops() const;
  // Every layer's: dense layers layer_flops(), MoE layers moe_layer_flops().
  double layers_flops() const;
  double step_flops() const;
  // Throws meshtp::Error naming `where` and the value unless every size is in [1, 2^31 − 1]
  // (vocab, kv_heads, ffn_hidden may be 0), heads divides hidden and kv_heads divides heads:
  // "model 'x': hidden=1000 is not divisible by heads=3"; a MoE model's 1 ≤ top_k ≤
  // num_experts, the MoE fields at 0 when dense, moe_every ≥ 1, capacity_factor 0 or ≥ 1/… .
  void validate(std::string_view where) const;
  bool operator==(const ModelShape&) const = default;
};

// "L=2 h=64 heads=4 V=256 b=1 s=64"
std::ostream& operator<<(std::ostream& os, const ModelShape& shape);

// The six keys; the caller lists the keys its object may hold (check_fields) and validates.
// kFamilyKeys are the optional family keys, for the callers' key lists.
inline constexpr std::string_view kFamilyKeys[] = {
    "kv_heads",     "ffn_hidden",     "activation",     "norm",           "position",
    "tie_embeddings", "num_experts",  "top_k",          "moe_ffn_hidden", "shared_experts",
    "moe_every",    "capacity_factor", "router_aux_loss", "rope_theta", "moe_force_balance"};
// Every key read_shape reads: the sizes' and kFamilyKeys, then `extra` (a file's own keys).
std::vector<std::string_view> shape_keys(std::initializer_list<std::string_view> extra = {});
void write_shape(nlohmann::json& j, const ModelShape& shape);
ModelShape read_shape(const nlohmann::json& j, std::string_view where);

}  // namespace meshtp::layout
