// The parameters of a GPT block stack, as data: name, global shape, how it is sharded on
// the mesh (parallel/param_shard.hpp), how it is initialised. Init, load, save and gradient
// gathering all walk this table.
//
// Names and layouts follow PyTorch (nn.Linear weight is [out, in]). They are the file format
// of checkpoints and `meshtp block` (and of the PyTorch peer), so the MLP's two linears keep
// their file names mlp.fc1 / mlp.fc2; everywhere in code they are mlp1 / mlp2, as in the
// layout vocabulary (layout::Linear):
//
//   layers.{i}.ln1.weight        [h]       kHidden            ones
//   layers.{i}.ln1.bias          [h]       kHidden            zeros
//   layers.{i}.attn.qkv.weight   [3h, h]   kQkvWeight         N(0, 0.02²)   rows q | k | v
//   layers.{i}.attn.qkv.bias     [3h]      kQkvBias           zeros
//   layers.{i}.attn.proj.weight  [h, h]    kRowFirstWeight    N(0, (0.02/√(2L))²)
//   layers.{i}.attn.proj.bias    [h]       kRowFirstBias      zeros
//   layers.{i}.ln2.weight        [h]       kHidden            ones
//   layers.{i}.ln2.bias          [h]       kHidden            zeros
//   layers.{i}.mlp.fc1.weight    [4h, h]   kColumnFirstWeight N(0, 0.02²)
//   layers.{i}.mlp.fc1.bias      [4h]      kColumnFirstBias   zeros
//   layers.{i}.mlp.fc2.weight    [h, 4h]   kRowFirstWeight    N(0, (0.02/√(2L))²)
//   layers.{i}.mlp.fc2.bias      [h]       kRowFirstBias      zeros
//
// The layer family (layout/model_shape.hpp; Llama's: kv_heads g < a, SwiGLU of width f,
// RMSNorm, RoPE, an untied head) changes shapes and drops parameters; the slots stay:
//
//   attn.qkv.weight   [h + 2·g·d, h]  rows q | k | v (k, v: g heads of d = h/a)
//   mlp.fc1.weight    [2f, h]         SwiGLU: rows gate (f) | up (f), kSwigluWeight
//                     [f, h]          GeLU
//   mlp.fc2.weight    [h, f]
//   ln1.bias, ln2.bias                absent with RMSNorm
//   every linear's bias               absent with SwiGLU (no biases: ModelShape::has_biases)
// An absent slot (absent_entry: no name, shape [0]) keeps the BlockParam indices: blocks see
// an empty span there; stack_param_table, and so the stack, checkpoints and optimizers, skip
// it. RoPE has no parameters (no wpe); an untied head is lm_head.weight [V, h].
//
// A mixture-of-experts layer (layout::ModelShape num_experts E > 0, expert width F) keeps the
// attention's eight and puts its MLP's four slots to the experts (parallel/moe.hpp's layouts):
//
//   layers.{i}.moe.experts.fc1.weight  [E, F, h]  kMlp1Weight  kExpertFc1  N(0, 0.02²)
//   layers.{i}.moe.router.weight       [E, h]     kMlp1Bias    kHidden     N(0, 0.02²)
//   layers.{i}.moe.experts.fc2.weight  [E, h, F]  kMlp2Weight  kExpertFc2  N(0, (0.02/√(2L))²)
//   layers.{i}.moe.bias                [h]        kMlp2Bias    kHidden     zeros (output bias)
//
// The experts' weights lie on the experts' own mesh (ep, etp) over the attention's ranks
// (parallel/param_shard.hpp); router and bias are whole on every rank. Shared experts
// (shared_experts > 0: every token through one dense MLP of width S = shared_experts·f_e,
// Megatron-Core's shared expert) fill three slots absent elsewhere, tensor-parallel as a
// dense MLP (the output bias above serves both):
//
//   layers.{i}.moe.shared.fc1.weight   [S, h]  kSharedFc1Weight  kColumnFirstWeight
//   layers.{i}.moe.shared.fc1.bias     [S]     kSharedFc1Bias    kColumnFirstBias
//   layers.{i}.moe.shared.fc2.weight   [h, S]  kSharedFc2Weight  kRowFirstWeight
//
// The init (GPT-2's) draws element g of a tensor as normal_at(seed ⊕ hash(name), g): every
// rank computes any global element without communication, so every mesh starts from the
// same global weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layout/model_shape.hpp"
#include "parallel/param_shard.hpp"
#include "tensor/tensor.hpp"

namespace meshtp::model {

// Index of a parameter inside its block, in table order.
enum BlockParam : int {
  kLn1Weight,
  kLn1Bias,
  kQkvWeight,
  kQkvBias,
  kProjWeight,
  kProjBias,
  kLn2Weight,
  kLn2Bias,
  kMlp1Weight,
  kMlp1Bias,
  kMlp2Weight,
  kMlp2Bias,
  kSharedFc1Weight,  // a mixture of experts' shared experts (absent otherwise)
  kSharedFc1Bias,
  kSharedFc2Weight,
  kBlockParams,  // count
};

enum class Init { kZeros, kOnes, kNormal, kNormalResidual };

struct ParamEntry {
  std::string name;
  Shape shape;  // global
  parallel::ParamShard shard;
  Init init;
  // A grouped-query QKV weight's KV heads g (0: none): below the mesh's head blocks its KV
  // rows are held in copies (parallel/param_shard.hpp); pass it to the shard functions.
  std::int64_t kv_heads = 0;
};

// A slot the model does not have (see above), and whether an entry is not one.
ParamEntry absent_entry();
inline bool present(const ParamEntry& e) { return !e.name.empty(); }

// The kBlockParams entries of block `layer`, in BlockParam order: a dense GPT block's of
// hidden h, or of a model of this shape (a MoE block's where shape.moe_layer(layer)).
std::vector<ParamEntry> block_param_table(int layer, std::int64_t hidden);
std::vector<ParamEntry> block_param_table(int layer, const layout::ModelShape& shape);
// Every block's present entries, layer after layer: blocks first … first+layers−1 (a pipeline
// stage's share keeps the whole model's names).
std::vector<ParamEntry> stack_param_table(int layers, std::int64_t hidden, int first = 0);
std::vector<ParamEntry> stack_param_table(int layers, const layout::ModelShape& shape,
                                          int first = 0);

// The embeddings' entries (model/gpt.hpp): wte [V, h] and wpe [T, h], both N(0, 0.02²).
ParamEntry wte_entry(std::int64_t vocab, std::int64_t hidden);
ParamEntry wpe_entry(std::int64_t seq, std::int64_t hidden);
// An untied head (tie_embeddings false): lm_head.weight [V, h], N(0, 0.02²).
ParamEntry head_entry(std::int64_t vocab, std::int64_t hidden);

// Global element g of a parameter under the GPT-2 init of an L-layer stack.
float init_value(const ParamEntry& entry, std::uint64_t seed, int layers, std::int64_t g);

}  // namespace meshtp::model
