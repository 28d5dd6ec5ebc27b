// meshtp plan — rank every tensor-parallel strategy for a model on a topology:
//
//   meshtp plan --topology NAME|FILE --model NAME|FILE [--devices N] [--batch b] [--seq s]
//               [--strategies atp,meshslice,…] [--chunks 1,2,4] [--json]
//               [--explain | --explain-rank R] [--out plan.json [--pick R]]
//   meshtp plan … --3d [--top K] [--max-tp T] [--strategies atp,tp1d] [--json] [--out plan.json]
//
// --3d searches (dp, pp, mesh, strategy, zero, recompute, microbatches) instead
// (plan/layout_search.hpp) and prints the K fastest layouts (feasible first); --out writes
// the fastest feasible one, pipeline, ZeRO and recompute fields included.
//
// Pure computation (plan/): no communication, identical on every rank; rank 0 prints a
// table (or, with --json, one object {"candidates": […], "best": {…} | null}, plus
// "explain" when asked; each valid candidate carries its "plan"). --explain breaks the best
// candidate down per operator, --explain-rank R the R-th row of the table. --out writes the
// best feasible candidate's layout::Plan (or row R's) atomically, for `train --plan`.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/layout_flags.hpp"
#include "cli/flag_checks.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/layout_search.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/report.hpp"

namespace meshtp::cli {
namespace {

struct PlanArgs {
  std::string topology;
  ModelFlags shape;  // --model, --batch, --seq (0: the model's)
  int devices = 0;  // 0: the topology's device count
  std::string strategies = "all";
  std::string chunks = "1,2,4";
  bool json = false;
  bool explain = false;
  int explain_rank = 0;
  std::string out;
  int pick = 0;  // 0: the best feasible candidate
  bool search_3d = false;
  int top = 10;
  int max_tp = 256;
};

void run_plan_3d(const PlanArgs& args, const plan::PlanRequest& base, const CLI::App& app) {
  for (const char* flag : {"--explain", "--explain-rank", "--pick"}) {
    MESHTP_CHECK(app.count(flag) == 0, "{} is not available with --3d", flag);
  }
  plan::LayoutRequest request{.topology = base.topology, .model = base.model,
                              .devices = base.devices, .chunks = base.chunks,
                              .max_tp = args.max_tp};
  if (app.count("--strategies") > 0) request.strategies = base.strategies;
  // Only the rows printed are ranked in full; the rest are bounded out (layout_search.hpp).
  const plan::LayoutSearch search =
      plan::search_layouts(request, static_cast<std::size_t>(args.top));
  const std::vector<plan::LayoutCandidate>& ranked = search.ranked;
  const plan::LayoutCandidate* best =
      !ranked.empty() && ranked.front().feasible ? &ranked.front() : nullptr;
  const std::string none =
      ranked.empty()
          ? fmt::format(
                "no layout splits model '{}' over {} devices: dp must divide the batch "
                "({}), pp the layers ({}), tp (at most --max-tp {}) the devices, and for "
                "atp, megatron and tp1d also the heads ({})",
                base.model.name, base.devices, base.model.batch, base.model.layers, args.max_tp,
                base.model.heads)
          : fmt::format("no layout of '{}' fits {} GiB per device on '{}'", base.model.name,
                        base.topology.memory_gib, base.topology.name);
  if (!args.out.empty()) {
    MESHTP_CHECK(best != nullptr, "--out: {}", none);
    layout::Plan picked = best->plan;
    picked.provenance =
        layout::Provenance{.topology = base.topology.name,
                           .model = base.model.name,
                           .shape = static_cast<const layout::ModelShape&>(base.model),
                           .predicted_step_s = best->t_step_s};
    if (world().rank() == 0) layout::save_plan(args.out, picked);
  }
  const std::size_t shown = std::min(ranked.size(), static_cast<std::size_t>(args.top));
  if (args.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i) rows.push_back(plan::to_json(ranked[i]));
    out() << nlohmann::json{{"layouts", rows},
                            {"searched", search.searched},
                            {"priced", search.priced},
                            {"best", best ? plan::to_json(*best) : nlohmann::json()}}
                 .dump()
          << '\n';
    return;
  }
  out() << fmt::format("plan --3d: {} on {} ({} devices, {} GiB each): {} layouts searched\n",
                       fmt::streamed(base.model), base.topology.name, base.devices,
                       base.topology.memory_gib, search.searched);
  for (std::size_t i = 0; i < shown; ++i) {
    out() << fmt::format("{:>3} {}\n", i + 1, fmt::streamed(ranked[i]));
  }
  if (best == nullptr) out() << "best: none — " << none << '\n';
}

// Row `rank` (1-based) of the table, given by `flag`; when rank is 0, the best feasible
// candidate, for `user` (the flag that asked for it), which `flag` can overrule.
const plan::Candidate& row(const plan::PlanResult& result, int rank, const char* flag,
                           const char* user) {
  if (rank == 0) {
    if (result.best_candidate() == nullptr) {
      const plan::Candidate* first = result.candidates.empty() ? nullptr : &result.candidates[0];
      fail("{}: no candidate is feasible{}; name a row of the table with {} R", user,
           first ? fmt::format(" (the first, {} {}x{}: {})", layout::name(first->strategy),
                               first->mesh[0], first->mesh[1], first->reason)
                 : "",
           flag);
    }
    return *result.best_candidate();
  }
  MESHTP_CHECK(rank >= 1 && rank <= static_cast<int>(result.candidates.size()),
               "{}={} is not a row of the table (1 … {})", flag, rank, result.candidates.size());
  return result.candidates[static_cast<std::size_t>(rank - 1)];
}

void run_plan(const PlanArgs& args, const CLI::App& app) {
  plan::PlanRequest request;
  request.topology = plan::load_topology(args.topology);
  request.model = args.shape.apply(plan::load_model(args.shape.model));
  MESHTP_CHECK(args.devices >= 0, "--devices={} must be positive", args.devices);
  request.devices = args.devices > 0 ? args.devices : request.topology.device_count();
  request.model.validate();
  request.strategies = plan::parse_strategies(args.strategies);
  request.chunks = parse_positive_ints(args.chunks, "--chunks");
  if (args.search_3d) {
    if (app.count("--chunks") == 0) request.chunks = {1};
    run_plan_3d(args, request, app);
    return;
  }
  for (const char* flag : {"--top", "--max-tp"}) {
    MESHTP_CHECK(app.count(flag) == 0, "{} needs --3d", flag);
  }

  const plan::PlanResult result = plan::plan(request);

  const plan::Candidate* explained = nullptr;
  if (args.explain || args.explain_rank != 0) {
    explained = &row(result, args.explain_rank, "--explain-rank",
                     args.explain_rank ? "--explain-rank" : "--explain");
  }
  if (!args.out.empty() || args.pick != 0) {
    MESHTP_CHECK(!args.out.empty(), "--pick={} needs --out FILE", args.pick);
    layout::Plan picked = plan::to_plan(row(result, args.pick, "--pick", "--out"));
    picked.provenance->topology = request.topology.name;
    picked.provenance->model = request.model.name;
    picked.provenance->shape = static_cast<const layout::ModelShape&>(request.model);
    if (world().rank() == 0) layout::save_plan(args.out, picked);
  }

  if (args.json) {
    nlohmann::json j = plan::to_json(result);
    if (explained) j["explain"] = plan::to_json(plan::explain(request, *explained));
    out() << j.dump() << '\n';
    return;
  }
  out() << plan::format_plan(request, result);
  if (explained) {
    out() << '\n' << plan::format_explanation(request, plan::explain(request, *explained));
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* p = app.add_subcommand(
      "plan", "Predict and rank every tensor-parallel strategy of a model on a topology");
  p->add_option("--topology", args->topology,
                "Topology preset or JSON file (e.g. pcie-8xa100, nvlink-network-64)")
      ->required();
  args->shape
      .add_to(p, ModelFlags::kBatch | ModelFlags::kSeq,
              "Model preset or JSON file (e.g. atp-m4, gpt3-175b)")
      ->required();
  p->add_option("--devices", args->devices,
                "Number of devices; must match the topology (default: the topology's)")
      ->check(integer_at_least(1));
  p->add_option("--strategies", args->strategies,
                "Comma-separated: atp, megatron, tp1d, meshslice, collective, wang, summa, "
                "cannon, or all (default)");
  p->add_option("--chunks", args->chunks, "ATP chunk counts to try (default 1,2,4)");
  p->add_flag("--json", args->json, "Print one JSON object instead of the table");
  p->add_flag("--explain", args->explain, "Break the best candidate down per operator");
  p->add_option("--explain-rank", args->explain_rank,
                "Break down the candidate in this row of the table instead");
  p->add_option("--out", args->out,
                "Write the best feasible candidate's plan (for train/block/bench layer --plan)");
  p->add_option("--pick", args->pick, "With --out: write the plan of this row of the table");
  p->add_flag("--3d", args->search_3d,
              "Search data × pipeline × tensor parallelism with ZeRO, recomputation and "
              "microbatches (default strategies atp,tp1d)");
  p->add_option("--top", args->top, "With --3d: print this many layouts")
      ->check(integer_at_least(1));
  p->add_option("--max-tp", args->max_tp, "With --3d: the largest tensor-parallel group tried")
      ->check(integer_at_least(1));
  p->callback([args, p] { run_plan(*args, *p); });
}

}  // namespace meshtp::cli
