// ModelFlags: --model and the shape overrides --batch, --seq, --hidden, --heads, --layers,
// declared once for every command that runs a model (`meshtp train`, `bench …`, `meshtp gpu
// train`; layout_flags.hpp has the layout's flags). Its own file so that meshtp-gpu, which
// links no MPI, compiles it too.
#pragma once

#include <string>
#include <utility>

#include "cli/cli11.hpp"
#include "plan/model_spec.hpp"
#include "plan/presets.hpp"

namespace meshtp::cli {

// A command registers the shape flags it takes (ModelFlags::kBatch | …). A field's value
// before add_to is the command's default ("(default 1024)" in the help); 0 means the model's.
// The shape fields and apply() (every non-zero field) are plan::ShapeOverrides'.
struct ModelFlags : plan::ShapeOverrides {
  // kMoeForceBalance: --moe-force-balance, a mixture of experts' forced balanced routing
  // (layout/model_shape.hpp moe_force_balance; refused for a dense model).
  enum Flag : unsigned {
    kBatch = 1, kSeq = 2, kHidden = 4, kHeads = 8, kLayers = 16, kMoeForceBalance = 32
  };
  explicit ModelFlags(std::string default_model = "") : model(std::move(default_model)) {}
  std::string model;
  bool moe_force_balance = false;

  // --model (skipped when model_help is empty: then nullptr is returned, else --model) and
  // the shape flags in `which`.
  CLI::Option* add_to(CLI::App* app, unsigned which, const std::string& model_help = "");
  // --model loaded and the flags applied.
  plan::ModelSpec load() const;
  // What the runtime trains: load(), byte-level (vocab 256; a model file with another vocab
  // is an error naming it), fp32, no recomputation priced (the plan's recompute runs). A
  // mixture of experts only where the command's runtime has the expert layer (kAllowed:
  // train, bench train, bench rank), else refused naming num_experts. The Llama family's
  // fields (kv_heads, ffn_hidden, activation, norm, position, tie_embeddings) only where the
  // runtime is the ATP blocks' (Layers::kFamily: train, bench train; the blocks refuse what
  // they do not run, naming the values), else a GPT (refused naming the first non-GPT field:
  // ModelShape::require_gpt).
  enum class Experts { kRefused, kAllowed };
  enum class Layers { kGpt, kFamily };
  plan::ModelSpec runtime_model(Experts experts = Experts::kRefused,
                                Layers layers = Layers::kGpt) const;
};

}  // namespace meshtp::cli
