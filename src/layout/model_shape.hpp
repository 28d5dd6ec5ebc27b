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
// JSON (a model file, a plan's provenance, the simulator's spec): the keys "layers", "hidden",
// "heads", "vocab" (optional, 0), "batch", "seq".
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string_view>

namespace meshtp::layout {

struct ModelShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t layers = 0;
  std::int64_t vocab = 0;

  std::int64_t tokens() const { return batch * seq; }  // n = b·s
  // Model FLOPs of one training step (forward + backward, no recomputation), the count every
  // TFLOP/s and MFU here is reported in (ATP §5, Table 2; Megatron-LM's count): one layer
  // 72·b·s·h² + 12·b·s²·h (the attention products whole, not halved by the mask), and a step
  // the layers' plus the tied head's 6·b·s·h·V.
  double layer_flops() const;
  double step_flops() const;
  // Throws meshtp::Error naming `where` and the value unless every size is in [1, 2^31 − 1]
  // (vocab may be 0) and heads divides hidden: "model 'x': hidden=1000 is not divisible by heads=3".
  void validate(std::string_view where) const;
  bool operator==(const ModelShape&) const = default;
};

// "L=2 h=64 heads=4 V=256 b=1 s=64"
std::ostream& operator<<(std::ostream& os, const ModelShape& shape);

// The six keys; the caller lists the keys its object may hold (check_fields) and validates.
void write_shape(nlohmann::json& j, const ModelShape& shape);
ModelShape read_shape(const nlohmann::json& j, std::string_view where);

}  // namespace meshtp::layout
