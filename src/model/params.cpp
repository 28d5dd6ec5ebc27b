#include "model/params.hpp"

#include <cmath>
#include <fmt/format.h>

#include "tensor/random.hpp"

namespace meshtp::model {
namespace {

// FNV-1a: a stable per-name stream, so a parameter's values do not depend on its position.
std::uint64_t hash_name(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::vector<ParamEntry> block_param_table(int layer, std::int64_t h) {
  using parallel::ParamShard;
  const std::string p = fmt::format("layers.{}.", layer);
  return {
      {p + "ln1.weight", {h}, ParamShard::kHidden, Init::kOnes},
      {p + "ln1.bias", {h}, ParamShard::kHidden, Init::kZeros},
      {p + "attn.qkv.weight", {3 * h, h}, ParamShard::kQkvWeight, Init::kNormal},
      {p + "attn.qkv.bias", {3 * h}, ParamShard::kQkvBias, Init::kZeros},
      {p + "attn.proj.weight", {h, h}, ParamShard::kRowFirstWeight, Init::kNormalResidual},
      {p + "attn.proj.bias", {h}, ParamShard::kRowFirstBias, Init::kZeros},
      {p + "ln2.weight", {h}, ParamShard::kHidden, Init::kOnes},
      {p + "ln2.bias", {h}, ParamShard::kHidden, Init::kZeros},
      {p + "mlp.fc1.weight", {4 * h, h}, ParamShard::kColumnFirstWeight, Init::kNormal},
      {p + "mlp.fc1.bias", {4 * h}, ParamShard::kColumnFirstBias, Init::kZeros},
      {p + "mlp.fc2.weight", {h, 4 * h}, ParamShard::kRowFirstWeight, Init::kNormalResidual},
      {p + "mlp.fc2.bias", {h}, ParamShard::kRowFirstBias, Init::kZeros},
      absent_entry(),  // kSharedFc1Weight … kSharedFc2Weight: a MoE layer's shared experts
      absent_entry(),
      absent_entry(),
  };
}

std::vector<ParamEntry> block_param_table(int layer, const layout::ModelShape& shape) {
  using parallel::ParamShard;
  std::vector<ParamEntry> table = block_param_table(layer, shape.hidden);
  if (!shape.is_moe()) {  // the layer family (model_shape.hpp): GPT's table unless it differs
    const std::int64_t h = shape.hidden, f = shape.ffn();
    const std::int64_t q = shape.kv() == shape.heads ? 3 * h : shape.qkv_width();  // heads may be 0
    table[kQkvWeight].shape = {q, h};
    if (shape.kv() != shape.heads) table[kQkvWeight].kv_heads = shape.kv();
    table[kQkvBias].shape = {q};
    table[kMlp1Weight].shape = {shape.mlp1_width(), h};
    table[kMlp1Bias].shape = {shape.mlp1_width()};
    table[kMlp2Weight].shape = {h, f};
    if (shape.activation == layout::Activation::kSwiglu) {
      table[kMlp1Weight].shard = ParamShard::kSwigluWeight;
    }
    const auto drop = [&](int k) { table[static_cast<std::size_t>(k)] = absent_entry(); };
    if (shape.norm == layout::Norm::kRmsNorm) {
      drop(kLn1Bias);
      drop(kLn2Bias);
    }
    if (!shape.has_biases()) {
      for (const int k : {kQkvBias, kProjBias, kMlp1Bias, kMlp2Bias}) drop(k);
    }
  }
  if (!shape.moe_layer(layer)) return table;
  const std::string p = fmt::format("layers.{}.moe.", layer);
  const std::int64_t h = shape.hidden, E = shape.num_experts, F = shape.expert_ffn();
  table[kMlp1Weight] = {p + "experts.fc1.weight", {E, F, h}, ParamShard::kExpertFc1,
                        Init::kNormal};
  table[kMlp1Bias] = {p + "router.weight", {E, h}, ParamShard::kHidden, Init::kNormal};
  table[kMlp2Weight] = {p + "experts.fc2.weight", {E, h, F}, ParamShard::kExpertFc2,
                        Init::kNormalResidual};
  table[kMlp2Bias] = {p + "bias", {h}, ParamShard::kHidden, Init::kZeros};
  if (shape.shared_experts > 0) {
    const std::int64_t S = shape.shared_ffn();
    table[kSharedFc1Weight] = {p + "shared.fc1.weight", {S, h}, ParamShard::kColumnFirstWeight,
                               Init::kNormal};
    table[kSharedFc1Bias] = {p + "shared.fc1.bias", {S}, ParamShard::kColumnFirstBias,
                             Init::kZeros};
    table[kSharedFc2Weight] = {p + "shared.fc2.weight", {h, S}, ParamShard::kRowFirstWeight,
                               Init::kNormalResidual};
  }
  return table;
}

std::vector<ParamEntry> stack_param_table(int layers, std::int64_t hidden, int first) {
  layout::ModelShape dense;
  dense.hidden = hidden;
  return stack_param_table(layers, dense, first);
}

std::vector<ParamEntry> stack_param_table(int layers, const layout::ModelShape& shape,
                                          int first) {
  std::vector<ParamEntry> all;
  for (int l = first; l < first + layers; ++l) {
    for (ParamEntry& e : block_param_table(l, shape)) {
      if (present(e)) all.push_back(std::move(e));
    }
  }
  return all;
}

ParamEntry absent_entry() {
  return {"", {0}, parallel::ParamShard::kHidden, Init::kZeros};
}

ParamEntry head_entry(std::int64_t vocab, std::int64_t hidden) {
  return {"lm_head.weight", {vocab, hidden}, parallel::ParamShard::kHidden, Init::kNormal};
}

ParamEntry wte_entry(std::int64_t vocab, std::int64_t hidden) {
  return {"wte", {vocab, hidden}, parallel::ParamShard::kHidden, Init::kNormal};
}

ParamEntry wpe_entry(std::int64_t seq, std::int64_t hidden) {
  return {"wpe", {seq, hidden}, parallel::ParamShard::kHidden, Init::kNormal};
}

float init_value(const ParamEntry& entry, std::uint64_t seed, int layers, std::int64_t g) {
  constexpr float kStd = 0.02f;
  switch (entry.init) {
    case Init::kZeros: return 0.0f;
    case Init::kOnes: return 1.0f;
    case Init::kNormal:
      return kStd * normal_at(seed ^ hash_name(entry.name), static_cast<std::uint64_t>(g));
    case Init::kNormalResidual:
      return kStd / std::sqrt(2.0f * static_cast<float>(layers)) *
             normal_at(seed ^ hash_name(entry.name), static_cast<std::uint64_t>(g));
  }
  return 0.0f;
}

}  // namespace meshtp::model
