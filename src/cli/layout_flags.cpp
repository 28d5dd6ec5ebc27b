#include "cli/layout_flags.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/flag_checks.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "model/gpt.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

namespace meshtp::cli {

void LayoutFlags::add_to(CLI::App* app, unsigned which) {
  app->add_option("--plan", plan_file,
                  "Layout from a plan file (meshtp plan --out); excludes the layout flags");
  std::string mesh_help = "Tensor-parallel mesh d1xd2";
  if (which & kMeshAuto) mesh_help += ", or 'auto': the planner chooses the layout on --topology";
  if (which & kMeshAll) mesh_help += ", or 'all': every 2D mesh of the ranks";
  mesh_help += mesh.empty() ? std::string(" (default: N x 1 over a stage's N ranks)")
                            : fmt::format(" (default {})", mesh);
  spelled_out.push_back(app->add_option("--mesh", mesh, mesh_help));
  if (which & kTpAlias) {
    spelled_out.push_back(
        app->add_option("--tp", mesh, "Deprecated spelling of --mesh")
            ->each([](const std::string&) {
              if (root()) {
                std::cerr << "warning: --tp is deprecated and will be removed: use --mesh\n";
              }
            }));
  }
  if (which & kMeshAuto) {
    app->add_option("--topology", topology, "Topology preset or file for --mesh auto");
    app->add_option("--strategies", strategies,
                    "With --mesh auto: the strategies the planner may choose, like "
                    "atp,megatron,tp1d (default all)");
  }
  if (which & kReplicas) {
    spelled_out.push_back(app->add_option("--dp", dp, "Data-parallel replicas")
                              ->capture_default_str()
                              ->check(integer_at_least(1)));
    spelled_out.push_back(
        app->add_option("--zero", zero,
                        "ZeRO stage over the data-parallel replicas: 0, 1 (optimizer state "
                        "sharded), 2 (and gradients reduce-scattered) or 3 (and parameters, "
                        "gathered per block)")
            ->capture_default_str());
  }
  if (which & kPipeline) {
    spelled_out.push_back(
        app->add_option("--pp", pp,
                        "Pipeline stages (contiguous layers; embedding on the first, head on the "
                        "last)")
            ->capture_default_str()
            ->check(integer_at_least(1)));
    spelled_out.push_back(app->add_option("--microbatches", microbatches,
                                          "Microbatches per step and replica (the pipeline's m)")
                              ->capture_default_str()
                              ->check(integer_at_least(1)));
    spelled_out.push_back(
        app->add_option("--schedule", schedule,
                        "Pipeline schedule: gpipe, 1f1b or interleaved[:V] (V virtual stages per "
                        "rank, default 2)")
            ->capture_default_str());
  }
  if (which & kContext) {
    runs_cp = true;
    spelled_out.push_back(
        app->add_option("--cp", cp,
                        "Context parallelism: each of cp ranks holds 2 of the 2·cp zigzag "
                        "chunks of every sequence (ATP blocks, fused attention)")
            ->capture_default_str()
            ->check(integer_at_least(1)));
    spelled_out.push_back(
        app->add_option("--cp-comm", cp_comm,
                        "Context parallelism's attention exchange: ring (key/value blocks "
                        "around the cp ranks), a2a (Ulysses all-to-all over heads) or a2a+ring")
            ->capture_default_str());
  }
  spelled_out.push_back(
      app->add_option("--strategy", strategy,
                      "atp (ATP/Megatron blocks), tp1d, or every linear a 2D GeMM: meshslice, "
                      "collective, wang, summa, cannon")
          ->capture_default_str());
  if (!(which & kNoChunks)) {
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
      app->add_option("--attention", attention,
                      "The attention core: unfused (keeps each sequence's probabilities) or "
                      "fused (flash-style, O(seq) memory; ATP blocks)")
          ->capture_default_str());
  if (which & kExperts) {
    spelled_out.push_back(
        app->add_option("--ep", ep,
                        "A mixture of experts' expert-parallel size: the experts split over ep "
                        "of the mesh N×1's ranks times the cp ranks, ep × etp = N·cp "
                        "(default: ep = N·cp, etp = 1)")
            ->capture_default_str()
            ->check(integer_at_least(1)));
    spelled_out.push_back(
        app->add_option("--etp", etp,
                        "A mixture of experts' expert tensor-parallel size: each expert's width "
                        "split over etp ranks (with --ep; ep × etp = N·cp)")
            ->check(integer_at_least(1)));
  }
  spelled_out.push_back(
      app->add_option("--slices", gemm2d.slices,
                      "2D GeMM slice count S: MeshSlice's slices, SUMMA's panels per "
                      "lcm(d1, d2) block")
          ->capture_default_str()
          ->check(integer_at_least(1)));
  spelled_out.push_back(app->add_option("--progress-splits", progress_splits,
                                        "GeMM panels between MPI progress pokes (1: none)")
                            ->capture_default_str()
                            ->check(integer_at_least(1)));
}

bool LayoutFlags::given(const std::string& flag) const {
  return std::any_of(spelled_out.begin(), spelled_out.end(),
                     [&](const CLI::Option* o) { return o->get_name() == flag && o->count() > 0; });
}

layout::Plan LayoutFlags::build(std::array<int, 2> tp_mesh) const {
  return layout::build_plan(*this, tp_mesh);
}

layout::Plan LayoutFlags::resolve(int ranks, const std::string& where,
                                  const plan::ModelSpec* model) const {
  if (from_file()) {
    for (const CLI::Option* o : spelled_out) {
      MESHTP_CHECK(o->count() == 0, "{} conflicts with --plan {}: the plan names the layout",
                   o->get_name(), plan_file);
    }
    const layout::Plan p = layout::load_plan(plan_file);
    if (!priced_only) p.require_runtime(fmt::format("--plan {}", plan_file), runs_cp);
    if (model != nullptr) {
      const std::string warning =
          layout::check_model_fit(p, *model, model->name, "--plan " + plan_file);
      if (!warning.empty() && root()) std::cerr << "warning: " << warning << "\n";
    }
    p.check_ranks(ranks, where);
    return p;
  }
  MESHTP_CHECK(!planned() && !sweep(), "--mesh {} names more than one layout here", mesh);
  return layout::build_plan(
      *this, mesh.empty() ? std::nullopt : std::optional(mesh_2d("--mesh", mesh)), ranks, where);
}

std::vector<std::array<int, 2>> LayoutFlags::meshes(int ranks) const {
  return meshes_2d("--mesh", mesh, ranks);
}

std::vector<std::array<int, 2>> meshes_2d(const char* flag, const std::string& text, int ranks) {
  if (text == "all") return plan::enumerate_meshes(ranks);
  return {mesh_2d(flag, text, ranks)};
}

}  // namespace meshtp::cli
