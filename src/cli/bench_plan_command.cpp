// meshtp bench plan — validate the planner on the current ranks: plan a model on a topology
// (typically the one `meshtp calibrate` just wrote), run the top candidates the runtime can
// execute, and print predicted vs measured step and communication time per candidate, the
// communication estimate's relative error, and whether the predicted best was the best.
//
//   mpirun -np 4 meshtp bench plan --topology my-cluster.json [--model NAME|FILE]
//       [--hidden h --heads a --seq s --batch b --layers L] [--strategies all|atp,meshslice,…]
//       [--chunks 1,2] [--top K] [--seconds S] [--rounds R] [--progress-splits P] [--no-check]
//       [--json]
//
// Every strategy runs through the one GPT block stack (model::make_stack from the candidate's
// plan): atp and megatron with chunks as planned, tp1d with sequence parallelism on (N, 1),
// the 2D GeMM strategies with the planner's per-linear algorithm, stationary operand and
// slices. Their collectives are pipelined with the GeMMs (broadcasts, shifts, partial
// gathers), so they have no replay: their communication error is "-". Candidates the
// planner marks infeasible, or whose shapes the block stack rejects, are listed as skipped
// with the reason.
//
// The model. Default: L=2, h=256, a=8, b=4, s=128 — small enough for a laptop, with enough
// communication per FLOP that the mesh matters, and messages of at most 2 MiB on 2 or 4 ranks
// (cache-sized on a CPU box, where a single-line ring fit holds). --model loads a preset or file;
// the size flags override it. The runtime computes in fp32 without recomputation and without an
// embedding, so the planner is told exactly that (a note says when the file differed).
//
// Measurement (bench/plan_validation.hpp measures; this file parses and prints): per
// candidate the real run (validated, median over --rounds round-robin rounds of
// --seconds/rounds each; --progress-splits as in the runtime, default 4) and the replay of
// every collective the planner charges.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/plan_validation.hpp"
#include "cli/commands.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/validation.hpp"

namespace meshtp::cli {
namespace {

struct BenchPlanArgs {
  std::string topology;
  ModelFlags shape;  // model empty: the small default
  std::string strategies = "all";
  std::string chunks = "1,2";
  int top = 6;
  double seconds = 3.0;
  int progress_splits = 4;
  int rounds = 3;
  bool no_check = false, json = false;
};

plan::ModelSpec model_of(const BenchPlanArgs& a, std::vector<std::string>& notes) {
  plan::ModelSpec m;
  if (a.shape.model.empty()) {
    m.name = "validation-small";
    m.precision = plan::Precision::kFp32;
    m.layers = 2;
    m.hidden = 256;
    m.heads = 8;
    m.batch = 4;
    m.seq = 128;
  } else {
    m = plan::load_model(a.shape.model);
  }
  m = a.shape.apply(m);
  if (m.precision != plan::Precision::kFp32) notes.push_back("precision fp16 -> fp32 (runtime)");
  if (m.recompute != layout::Recompute::kNone) notes.push_back("recompute -> none (runtime)");
  if (m.vocab != 0) notes.push_back("vocab -> 0 (the block stack has no embedding)");
  m.precision = plan::Precision::kFp32;
  m.recompute = layout::Recompute::kNone;
  m.vocab = 0;
  m.validate();
  return m;
}

void run_bench_plan(const BenchPlanArgs& a) {
  const int n = world().size();
  MESHTP_CHECK(n >= 2,
               "bench plan needs at least 2 ranks (mpirun -np N): on 1 rank there is "
               "no communication to validate");
  MESHTP_CHECK(a.top >= 1, "--top={} must be at least 1", a.top);
  MESHTP_CHECK(a.seconds > 0 && a.seconds <= 600, "--seconds={} must be in (0, 600]", a.seconds);
  MESHTP_CHECK(a.rounds >= 1 && a.rounds <= 100, "--rounds={} must be in [1, 100]", a.rounds);
  MESHTP_CHECK(a.progress_splits >= 1, "--progress-splits={} must be at least 1",
               a.progress_splits);
  std::vector<std::string> notes;
  plan::PlanRequest request;
  request.topology = plan::load_topology(a.topology);
  MESHTP_CHECK(request.topology.device_count() == n,
               "topology '{}' has {} devices but this run "
               "has {} ranks",
               request.topology.name, request.topology.device_count(), n);
  request.model = model_of(a, notes);
  request.devices = n;
  request.strategies = plan::parse_strategies(a.strategies);
  request.chunks = parse_positive_ints(a.chunks, "--chunks");
  const plan::PlanResult result = plan::plan(request);
  const bench::RunnableCandidates runnable =
      bench::runnable_candidates(request, result, a.top, a.progress_splits);
  MESHTP_CHECK(!runnable.chosen.empty(), "bench plan: no candidate can run here:\n  {}",
               fmt::join(runnable.skipped, "\n  "));

  std::ostream& os = out();
  const plan::ModelSpec& m = request.model;
  if (!a.json) {
    os << fmt::format(
        "bench plan: {} (L={} h={} a={} b={} s={}, fp32) on topology '{}' ({} "
        "ranks); top {} runnable candidate(s), {} round(s), progress splits {}\n",
        m.name, m.layers, m.hidden, m.heads, m.batch, m.seq, request.topology.name, n,
        runnable.chosen.size(), a.rounds, a.progress_splits);
    for (const std::string& note : notes) os << "note: " << note << '\n';
    for (const std::string& s : runnable.skipped) os << "skipped: " << s << '\n';
    os.flush();
  }
  const std::vector<plan::ValidationRow> rows = bench::validate_candidates(
      world(), request, runnable.chosen,
      {.seconds = a.seconds, .rounds = a.rounds, .progress_splits = a.progress_splits,
       .check = !a.no_check});
  const plan::ValidationSummary summary = plan::summarize(rows);
  if (a.json) {
    nlohmann::json j = plan::to_json(rows, summary);
    j["topology"] = request.topology.name;
    j["model"] = plan::to_json(m);
    j["ranks"] = n;
    j["progress_splits"] = a.progress_splits;
    j["rounds"] = a.rounds;
    j["skipped"] = runnable.skipped;
    j["notes"] = notes;
    os << j.dump() << '\n';
    return;
  }
  os << plan::format_validation(rows, summary);
}

}  // namespace

void add_bench_plan_command(CLI::App& app) {
  CLI::App* bench = app.get_subcommand("bench");  // registered by add_bench_command
  auto args = std::make_shared<BenchPlanArgs>();
  CLI::App* c = bench->add_subcommand(
      "plan", "Validate the planner: run its top candidates here, predicted vs measured");
  c->add_option("--topology", args->topology,
                "Topology preset or file with as many devices as ranks (e.g. from calibrate)")
      ->required();
  args->shape.add_to(c, ~0u, "Model preset or file (default: L=2 h=256 a=8 b=4 s=128)");
  c->add_option("--strategies", args->strategies,
                "Strategies to plan, comma list, or all (default all)");
  c->add_option("--chunks", args->chunks, "ATP chunk counts to plan (default 1,2)");
  c->add_option("--top", args->top, "Run this many top runnable candidates (default 6)");
  c->add_option("--seconds", args->seconds,
                "Target timed seconds per candidate, over all rounds (default 3)");
  c->add_option("--rounds", args->rounds,
                "Run the candidates round-robin this many times; medians over rounds (default 3)");
  c->add_option("--progress-splits", args->progress_splits,
                "GeMM panels between MPI progress pokes (default 4, the runtime's; 1: none)");
  c->add_flag("--no-check", args->no_check,
              "Skip each candidate's comparison with the serial reference");
  c->add_flag("--json", args->json, "Print one JSON object");
  c->callback([args] { run_bench_plan(*args); });
}

}  // namespace meshtp::cli
