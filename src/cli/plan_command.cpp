// meshtp plan — rank every tensor-parallel strategy for a model on a topology:
//
//   meshtp plan --topology NAME|FILE --model NAME|FILE [--devices N] [--batch b] [--seq s]
//               [--strategies atp,meshslice,…] [--chunks 1,2,4] [--json]
//               [--explain | --explain-rank R]
//
// Pure computation (plan/): no communication, identical on every rank; rank 0 prints a
// table (or, with --json, one object {"candidates": […], "best": {…} | null}, plus
// "explain" when asked). --explain breaks the best candidate down per operator,
// --explain-rank R the R-th row of the table.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/report.hpp"

namespace meshtp::cli {
namespace {

struct PlanArgs {
  std::string topology;
  std::string model;
  int devices = 0;  // 0: the topology's device count
  int batch = 0;    // 0: the model's
  int seq = 0;      // 0: the model's
  std::string strategies = "all";
  std::string chunks = "1,2,4";
  bool json = false;
  bool explain = false;
  int explain_rank = 0;
};

void run_plan(const PlanArgs& args) {
  plan::PlanRequest request;
  request.topology = plan::load_topology(args.topology);
  request.model = plan::load_model(args.model);
  MESHTP_CHECK(args.devices >= 0, "--devices={} must be positive", args.devices);
  request.devices = args.devices > 0 ? args.devices : request.topology.device_count();
  MESHTP_CHECK(args.batch >= 0 && args.seq >= 0, "--batch={} and --seq={} must be positive",
               args.batch, args.seq);
  if (args.batch > 0) request.model.batch = args.batch;
  if (args.seq > 0) request.model.seq = args.seq;
  request.model.validate();
  request.strategies = plan::parse_strategies(args.strategies);
  request.chunks = parse_positive_ints(args.chunks, "--chunks");

  const plan::PlanResult result = plan::plan(request);

  const plan::Candidate* explained = nullptr;
  if (args.explain_rank != 0) {
    MESHTP_CHECK(args.explain_rank >= 1 &&
                     args.explain_rank <= static_cast<int>(result.candidates.size()),
                 "--explain-rank={} is not a row of the table (1 … {})", args.explain_rank,
                 result.candidates.size());
    explained = &result.candidates[static_cast<std::size_t>(args.explain_rank - 1)];
  } else if (args.explain) {
    explained = result.best_candidate();
    MESHTP_CHECK(explained != nullptr, "--explain: there is no feasible candidate to explain; "
                 "use --explain-rank R to pick a row");
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
  p->add_option("--model", args->model, "Model preset or JSON file (e.g. atp-m4, gpt3-175b)")
      ->required();
  p->add_option("--devices", args->devices,
                "Number of devices; must match the topology (default: the topology's)");
  p->add_option("--batch", args->batch, "Batch size b (default: the model's)");
  p->add_option("--seq", args->seq, "Sequence length s (default: the model's)");
  p->add_option("--strategies", args->strategies,
                "Comma-separated: atp, megatron, tp1d, meshslice, collective, wang, summa, "
                "cannon, or all (default)");
  p->add_option("--chunks", args->chunks, "ATP chunk counts to try (default 1,2,4)");
  p->add_flag("--json", args->json, "Print one JSON object instead of the table");
  p->add_flag("--explain", args->explain, "Break the best candidate down per operator");
  p->add_option("--explain-rank", args->explain_rank,
                "Break down the candidate in this row of the table instead");
  p->callback([args] { run_plan(*args); });
}

}  // namespace meshtp::cli
