#include "cli/model_flags.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "cli/flag_checks.hpp"
#include "core/error.hpp"
#include "model/gpt.hpp"

namespace meshtp::cli {

CLI::Option* ModelFlags::add_to(CLI::App* app, unsigned which, const std::string& model_help) {
  CLI::Option* model_option = nullptr;
  if (!model_help.empty()) {
    model_option = app->add_option("--model", model, model_help);
    if (!model.empty()) model_option->capture_default_str();
  }
  const struct {
    Flag flag;
    const char* name;
    std::int64_t* value;
    const char* what;
  } shape[] = {{kBatch, "--batch", &batch, "Batch b (sequences per step)"},
               {kSeq, "--seq", &seq, "Sequence length s"},
               {kHidden, "--hidden", &hidden, "Hidden size h"},
               {kHeads, "--heads", &heads, "Attention heads a"},
               {kLayers, "--layers", &layers, "Layers L"}};
  for (const auto& f : shape) {
    if ((which & f.flag) == 0) continue;
    const std::string by_default =
        *f.value > 0 ? fmt::format(" {}", *f.value) : std::string(": the model's");
    app->add_option(f.name, *f.value, fmt::format("{} (default{})", f.what, by_default))
        ->check(integer_at_least(1));
  }
  if ((which & kMoeForceBalance) != 0) {
    app->add_flag("--moe-force-balance", moe_force_balance,
                  "Route every token to fixed experts, evenly (a benchmark's routing, as "
                  "Megatron-LM's --moe-router-force-load-balancing): the balanced routing the "
                  "planner prices");
  }
  return model_option;
}

plan::ModelSpec ModelFlags::load() const {
  plan::ModelSpec spec = apply(plan::load_model(model));
  if (moe_force_balance) {
    MESHTP_CHECK(spec.is_moe(), "--moe-force-balance: model '{}' has no experts (num_experts=0)",
                 spec.name);
    spec.moe_force_balance = true;
  }
  return spec;
}

plan::ModelSpec ModelFlags::runtime_model(Experts experts, Layers layers) const {
  plan::ModelSpec spec = load();
  if (layers == Layers::kGpt) {
    spec.require_gpt(fmt::format("model '{}'", spec.name));  // names the first non-GPT field
  }
  if (experts == Experts::kRefused) spec.require_dense(fmt::format("model '{}'", spec.name));
  MESHTP_CHECK(spec.vocab == 0 || spec.vocab == model::kByteVocab,
               "model '{}' has vocab={}, but meshtp trains byte-level models (vocab {})", spec.name,
               spec.vocab, model::kByteVocab);
  spec.vocab = model::kByteVocab;
  spec.precision = plan::Precision::kFp32;
  spec.recompute = layout::Recompute::kNone;
  return spec;
}

}  // namespace meshtp::cli
