#include "cli/layout_flags.hpp"

#include "cli/flag_checks.hpp"
#include "core/error.hpp"

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
    spelled_out.push_back(
        app->add_option("--chunks", chunks, "ATP batch chunks (overlap)")
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

}  // namespace meshtp::cli
