#include "cli/layout_flags.hpp"

#include <fmt/format.h>

#include "cli/flag_checks.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/planner.hpp"

namespace meshtp::cli {

void LayoutFlags::add_to(CLI::App* app, bool with_chunks) {
  app->add_option("--plan", plan_file,
                  "Layout from a plan file (meshtp plan --out); excludes the layout flags");
  spelled_out.push_back(
      app->add_option("--strategy", strategy,
                      "atp (ATP/Megatron blocks), tp1d, or every linear a 2D GeMM: meshslice, "
                      "collective, wang, summa, cannon")
          ->capture_default_str());
  if (with_chunks) {
    spelled_out.push_back(app->add_option("--chunks", chunks, "ATP batch chunks (overlap)")
                              ->capture_default_str()
                              ->check(integer_at_least(1)));
  }
  spelled_out.push_back(app->add_flag("--sequence-parallel", sequence_parallel,
                                      "Sequence parallelism (mesh Nx1; ATP blocks)"));
  spelled_out.push_back(
      app->add_option("--stationary", stationary,
                      "2D GeMM: the operand every linear keeps — auto (the larger activation), "
                      "input or output")
          ->capture_default_str());
  spelled_out.push_back(
      app->add_option("--recompute", recompute,
                      "Activation recomputation: none, selective (attention core) or full "
                      "(every block's forward again before its backward)")
          ->capture_default_str());
  spelled_out.push_back(
      app->add_option("--slices", slices, "2D GeMM: MeshSlice's S, SUMMA's panels per block")
          ->capture_default_str()
          ->check(integer_at_least(1)));
}

layout::Plan LayoutFlags::load(const std::vector<const CLI::Option*>& others) const {
  std::vector<const CLI::Option*> excluded = spelled_out;
  excluded.insert(excluded.end(), others.begin(), others.end());
  for (const CLI::Option* o : excluded) {
    MESHTP_CHECK(o->count() == 0, "{} conflicts with --plan {}: the plan names the layout",
                 o->get_name(), plan_file);
  }
  return layout::load_plan(plan_file);
}

layout::Plan LayoutFlags::build(std::array<int, 2> mesh, int dp) const {
  layout::Plan p{.dp = dp,
                 .recompute = layout::parse_recompute(recompute),
                 .mesh = mesh,
                 .strategy = layout::parse_strategy(strategy),
                 .chunks = chunks,
                 .sequence_parallel = sequence_parallel || strategy == "tp1d"};
  if (layout::is_gemm2d(p.strategy)) {
    const layout::LinearPlan l{
        .stationary = stationary == "auto" ? std::nullopt
                                           : std::optional(layout::parse_stationary(stationary)),
        .slices = slices};
    p.linears.fill(l);
  } else {
    MESHTP_CHECK(stationary == "auto" && slices == 1,
                 "--stationary {} / --slices {} apply to the 2D GeMM strategies, not --strategy {}",
                 stationary, slices, strategy);
  }
  p.validate();
  return p;
}

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
  return model_option;
}

plan::ModelSpec ModelFlags::apply(plan::ModelSpec spec) const {
  constexpr std::int64_t kMax = std::int64_t{1} << 24;
  const std::pair<const char*, std::int64_t> given[] = {{"--batch", batch},
                                                        {"--seq", seq},
                                                        {"--hidden", hidden},
                                                        {"--heads", heads},
                                                        {"--layers", layers}};
  for (const auto& [name, value] : given) {
    MESHTP_CHECK(value <= kMax, "{}={} is too large (at most {})", name, value, kMax);
  }
  if (batch > 0) spec.batch = static_cast<int>(batch);
  if (seq > 0) spec.seq = static_cast<int>(seq);
  if (hidden > 0) spec.hidden = static_cast<int>(hidden);
  if (heads > 0) spec.heads = static_cast<int>(heads);
  if (layers > 0) spec.layers = static_cast<int>(layers);
  return spec;
}

std::array<int, 2> mesh_2d(const char* flag, const std::string& text, int ranks) {
  const std::vector<int> shape = parse_mesh_shape(text);
  MESHTP_CHECK(shape.size() == 2, "{} {} is not a 2D mesh: expected d1xd2, like 2x2", flag, text);
  const std::int64_t size = static_cast<std::int64_t>(shape[0]) * shape[1];
  MESHTP_CHECK(ranks <= 0 || size == ranks, "{} {} has {} ranks but the world has {}", flag, text,
               size, ranks);
  return {shape[0], shape[1]};
}

std::vector<std::array<int, 2>> meshes_2d(const char* flag, const std::string& text, int ranks) {
  if (text == "all") return plan::enumerate_meshes(ranks);
  return {mesh_2d(flag, text, ranks)};
}

}  // namespace meshtp::cli
