// meshtp plan — rank every tensor-parallel strategy for a model on a topology:
//
//   meshtp plan --topology NAME|FILE --model NAME|FILE [--devices N] [--batch b] [--seq s]
//               [--strategies atp,meshslice,…] [--chunks 1,2,4] [--json]
//               [--explain | --explain-rank R] [--out plan.json [--pick R]]
//   meshtp plan … --3d [--top K] [--max-tp T] [--strategies atp,tp1d] [--json] [--out plan.json]
//               [--runtime meshtp|megatron|megatron-2021|deepspeed]
//   meshtp plan … --3d --evaluate [--runtime R] (--plan FILE | [--dp D] [--pp P]
//               [--mesh d1xd2] [--strategy S] [--chunks C] [--sequence-parallel]
//               [--microbatches M] [--schedule gpipe|1f1b|interleaved:V] [--zero Z]
//               [--recompute none|selective|full]) [--json]
//   meshtp plan … [--3d [--evaluate]] --emit megatron|torchtitan|deepspeed [--emit-file FILE]
//   meshtp plan … [--3d [--evaluate]] --report DIR
//
// --3d searches (dp, pp, mesh, strategy, zero, recompute, microbatches) instead
// (plan/layout_search.hpp) and prints the K fastest layouts (feasible first); --out writes
// the fastest feasible one, pipeline, ZeRO and recompute fields included. --runtime prices
// every layout as that runtime runs it (meshtp re-runs a pipeline stage's forward, megatron
// keeps the in-flight activations). --evaluate prices one layout, not searched: the layout
// flags every command shares (cli/layout_flags.hpp; no --mesh: tp = devices/(dp·pp) as
// (tp, 1); no --schedule: the search's, 1f1b when m > 1) or a plan file; the one row the
// search prints for it, a layout that does not fit marked so (not an error).
//
// Pure computation (plan/): no communication, identical on every rank; rank 0 prints a
// table (or, with --json, one object {"candidates": […], "best": {…} | null}, plus
// "explain" when asked; each valid candidate carries its "plan"). --explain breaks the best
// candidate down per operator, --explain-rank R the R-th row of the table. --out writes the
// best feasible candidate's layout::Plan (or row R's) atomically, for `train --plan`.
//
// --emit F prints the layout (the best feasible one, row R's with --pick, --evaluate's) as
// framework F's own configuration (plan/emit.hpp) instead of the table, or writes it to
// --emit-file FILE (atomically) beside the table or --json; where F cannot run the layout, a
// comment line says so and the configuration is of the fastest layout F can run.
//
// --report DIR writes DIR/index.html, a page of plots of what --json prints (the ranked
// candidates' or layouts' time by part, their memory against the device), and that JSON as
// DIR/report.json (cli/report_dir.hpp), beside whatever else the command prints.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/flag_checks.hpp"
#include "cli/layout_flags.hpp"
#include "cli/report_dir.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/context_parallel.hpp"
#include "plan/emit.hpp"
#include "plan/layout_search.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/provenance.hpp"
#include "plan/report.hpp"

namespace meshtp::cli {
namespace {

struct PlanArgs {
  std::string topology;
  ModelFlags shape;  // --model, --batch, --seq (0: the model's)
  int devices = 0;  // 0: the topology's device count
  std::string strategies = plan::PlanQuery{}.strategies;
  std::string chunks = plan::PlanQuery{}.chunks;
  bool json = false;
  bool explain = false;
  int explain_rank = 0;
  std::string out;
  int pick = 0;  // 0: the best feasible candidate
  bool search_3d = false;
  int top = plan::kShownLayouts;
  int max_tp = plan::LayoutRequest{}.max_tp;
  // Context parallelism and uneven stages (docs/long_context.md): --evaluate's layout, and
  // what --3d searches.
  int cp = 1;
  std::string cp_comm = "ring";  // --evaluate: one mode; --3d: a comma list
  int first_stage_layers = 0, last_stage_layers = 0;
  int max_cp = 1;
  bool uneven_stages = false;
  // Mixture of experts (docs/moe.md): --evaluate's ep and etp (0: tp), what --3d searches.
  int ep = 1, etp = 0, max_ep = 0;
  double moe_imbalance = 1.0;
  std::string runtime = "meshtp";
  std::string fc_stationary = "auto";
  bool evaluate = false;
  LayoutFlags layout;  // --evaluate's layout
  std::string emit;    // --emit: a framework's configuration of the layout
  std::string emit_file;
  std::string report;  // --report DIR
};

// --report: the page of `result` (what --json prints for it); `say`: name the page on stdout
// (beside the table, not inside --json or a configuration).
void write_report(const ReportDir& report, std::string_view kind, const CLI::App& app,
                  const plan::PlanRequest& base, const nlohmann::json& result, bool say) {
  if (!report.enabled()) return;
  const std::string page =
      report.write(report_json(kind, app, base.topology, base.devices, base.model.name, result));
  if (say) out() << "report: " << page << '\n';
}

// --emit: the framework's configuration of `request.plan` (or of the fallback `best` finds
// when the framework cannot run it) to stdout, or to --emit-file. Returns whether it went to
// stdout (then nothing else is printed).
template <typename FindFallback>
bool emit_config(const PlanArgs& args, plan::Framework framework, plan::EmitRequest request,
                 FindFallback best) {
  if (plan::inexpressible(framework, request.plan, request.model)) {
    request.fallback = best();
  }
  const std::string text = plan::emit(framework, request);
  if (args.emit_file.empty()) {
    out() << text;
    return true;
  }
  if (root()) write_file_atomically(args.emit_file, text);
  return false;
}

// plan --3d --evaluate: the one layout of the layout flags (or --plan), priced as the search
// prices it.
void run_plan_evaluate(const PlanArgs& args, const plan::PlanRequest& base, layout::Runtime runtime,
                       std::optional<plan::Framework> framework, const CLI::App& app,
                       const ReportDir& report) {
  for (const char* flag : {"--top", "--max-tp", "--strategies", "--out", "--stationary", "--slices",
                           "--progress-splits", "--max-cp", "--uneven-stages", "--max-ep"}) {
    MESHTP_CHECK(app.count(flag) == 0, "{} is not available with --evaluate", flag);
  }
  LayoutFlags flags = args.layout;
  flags.priced_only = true;
  const bool context = app.count("--cp") + app.count("--cp-comm") + app.count("--first-stage-layers") +
                           app.count("--last-stage-layers") > 0;
  MESHTP_CHECK(!context || !flags.from_file(),
               "--cp, --cp-comm, --first/last-stage-layers conflict with --plan {}: the plan "
               "names the layout",
               flags.plan_file);
  MESHTP_CHECK(base.devices % args.cp == 0,
               "--cp {}: the {} devices of '{}' do not split into cp={} groups", args.cp,
               base.devices, base.topology.name, args.cp);
  if (app.count("--chunks") > 0) {
    MESHTP_CHECK(base.chunks.size() == 1,
                 "--chunks '{}': --evaluate prices one layout, give one chunk count", args.chunks);
    MESHTP_CHECK(!flags.from_file(), "--chunks conflicts with --plan {}: the plan names the layout",
                 flags.plan_file);
    flags.chunks = base.chunks[0];
  }
  MESHTP_CHECK(flags.mesh != "auto" && flags.mesh != "all",
               "--mesh {}: --evaluate prices one layout, give d1xd2", flags.mesh);
  const std::string where = fmt::format("the {} devices of '{}'", base.devices, base.topology.name);
  // The layout flags name dp, pp and the mesh of the devices/cp ranks one context slice holds.
  layout::Plan layout = flags.resolve(flags.from_file() ? base.devices : base.devices / args.cp,
                                      flags.from_file() || args.cp == 1
                                          ? where
                                          : fmt::format("{}, over --cp {}", where, args.cp),
                                      &base.model);
  if (!flags.from_file()) {
    layout = plan::with_context_parallel(layout, args.cp,
                                         layout::parse<layout::CpComm>(args.cp_comm),
                                         args.first_stage_layers, args.last_stage_layers);
  }
  if (app.count("--ep") + app.count("--etp") > 0) {
    MESHTP_CHECK(!flags.from_file(), "--ep, --etp conflict with --plan {}: the plan names the layout",
                 flags.plan_file);
    layout.ep = args.ep;
    layout.etp = args.etp;
  }
  // No --schedule: the search's for these microbatches and virtual stages.
  if (!flags.from_file() && !flags.given("--schedule")) {
    layout = plan::with_search_schedule(layout);
  }
  // A framework that cannot run the layout falls back to the best it can (emit): searched
  // with the layout's context parallelism and stage split available.
  const plan::LayoutRequest request{.topology = base.topology,
                                    .model = base.model,
                                    .devices = base.devices,
                                    .runtime = runtime,
                                    .max_cp = layout.cp,
                                    .cp_comms = {layout.cp_comm},
                                    .uneven_stages = layout.uneven(),
                                    .moe_imbalance = args.moe_imbalance};
  const plan::LayoutCandidate c = plan::evaluate_layout(request, layout);
  const std::string no_fit = plan::does_not_fit(c, base.topology.memory_gib);
  const nlohmann::json json = plan::evaluation_to_json(request, c);
  if (framework) {
    layout::Plan priced = c.plan;
    priced.provenance = layout::Provenance{.predicted_step_s = c.t_step_s};
    plan::EmitRequest emitted{
        .plan = priced, .model = base.model, .topology = base.topology.name, .runtime = runtime};
    if (!c.feasible) emitted.notes.push_back(no_fit);
    if (emit_config(args, *framework, emitted,
                    [&] { return plan::best_expressible(*framework, request); })) {
      write_report(report, "evaluate", app, base, json, false);
      return;
    }
  }
  if (args.json) {
    out() << json.dump() << '\n';
    write_report(report, "evaluate", app, base, json, false);
    return;
  }
  const plan::LayoutParts t = plan::parts(c);
  out() << fmt::format(
      "plan --3d --evaluate: {} on {} ({} devices, {} GiB each), runtime {}\n{:>3} {}\n"
      "    compute {:.4g} s, tp comm {:.4g} s, bubble {:.4g} s, p2p {:.3g} s, dp {:.3g} s, "
      "optimizer {:.3g} s; {}\n",
      fmt::streamed(base.model), base.topology.name, base.devices, base.topology.memory_gib,
      layout::name(c.runtime), 1, fmt::streamed(c), t.compute_s, t.tp_comm_s, t.bubble_s, t.p2p_s,
      t.dp_s, t.optimizer_s, fmt::streamed(c.memory));
  if (!c.feasible) out() << no_fit << '\n';
  write_report(report, "evaluate", app, base, json, true);
}

void run_plan_3d(const PlanArgs& args, const plan::PlanRequest& base, layout::Runtime runtime,
                 std::optional<plan::Framework> framework, const CLI::App& app,
                 const ReportDir& report) {
  for (const char* flag : {"--explain", "--explain-rank", "--pick", "--cp", "--first-stage-layers",
                           "--last-stage-layers", "--ep", "--etp"}) {
    MESHTP_CHECK(app.count(flag) == 0, "{} is not available with --3d (without --evaluate){}",
                 flag,
                 std::string_view(flag) == "--cp"   ? ": --max-cp N searches cp"
                 : std::string_view(flag) == "--ep" ? ": the search tries every ep (--max-ep N limits it)"
                                                    : "");
  }
  plan::LayoutRequest request{.topology = base.topology,
                              .model = base.model,
                              .devices = base.devices,
                              .chunks = base.chunks,
                              .max_tp = args.max_tp,
                              .runtime = runtime,
                              .max_cp = args.max_cp,
                              .uneven_stages = args.uneven_stages,
                              .max_ep = args.max_ep,
                              .moe_imbalance = args.moe_imbalance};
  if (app.count("--strategies") > 0) request.strategies = base.strategies;
  request.cp_comms = plan::parse_cp_comms(args.cp_comm);  // "ring,a2a"
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
    picked.provenance = plan::provenance_of(base.topology, base.model, best->t_step_s);
    if (root()) layout::save_plan(args.out, picked);
  }
  const std::size_t shown = std::min(ranked.size(), static_cast<std::size_t>(args.top));
  const nlohmann::json json = plan::to_json(search, shown);
  if (framework) {
    MESHTP_CHECK(best != nullptr, "--emit: {}", none);
    layout::Plan picked = best->plan;
    picked.provenance = layout::Provenance{.predicted_step_s = best->t_step_s};
    if (emit_config(args, *framework,
                    {.plan = picked,
                     .model = base.model,
                     .topology = base.topology.name,
                     .runtime = runtime},
                    [&] { return plan::best_expressible(*framework, request); })) {
      write_report(report, "plan-3d", app, base, json, false);
      return;
    }
  }
  if (args.json) {
    out() << json.dump() << '\n';
    write_report(report, "plan-3d", app, base, json, false);
    return;
  }
  out() << fmt::format("plan --3d: {} on {} ({} devices, {} GiB each{}): {} layouts searched\n",
                       fmt::streamed(base.model), base.topology.name, base.devices,
                       base.topology.memory_gib,
                       request.runtime == layout::Runtime::kMeshtp
                           ? ""
                           : fmt::format(", runtime {}", layout::name(request.runtime)),
                       search.searched);
  const std::vector<std::vector<int>> overlaps = plan::band_overlaps(search, shown);
  for (std::size_t i = 0; i < shown; ++i) {
    out() << fmt::format("{:>3} {}{}\n", i + 1, fmt::streamed(ranked[i]),
                         overlaps[i].empty()
                             ? ""
                             : fmt::format("; band overlaps #{}", fmt::join(overlaps[i], ", #")));
  }
  if (best == nullptr) out() << "best: none — " << none << '\n';
  write_report(report, "plan-3d", app, base, json, true);
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
  plan::PlanRequest request = plan::plan_request({.topology = args.topology,
                                                  .model = args.shape.model,
                                                  .shape = args.shape,
                                                  .devices = args.devices,
                                                  .strategies = args.strategies,
                                                  .chunks = args.chunks});
  for (const char* flag : {"--evaluate", "--runtime"}) {
    MESHTP_CHECK(args.search_3d || app.count(flag) == 0, "{} needs --3d", flag);
  }
  MESHTP_CHECK(!args.search_3d || app.count("--fc-stationary") == 0,
               "--fc-stationary prices the 2D search's linears; it is not available with --3d");
  MESHTP_CHECK(args.fc_stationary == "auto" || args.fc_stationary == "input" ||
                   args.fc_stationary == "output" || args.fc_stationary == "weight",
               "--fc-stationary '{}' is none of auto, input, output, weight", args.fc_stationary);
  if (args.fc_stationary != "auto") {
    request.stationary = layout::parse_stationary(args.fc_stationary);
  }
  // The layout flags name the one layout --evaluate prices: nothing without it.
  if (!args.evaluate) {
    MESHTP_CHECK(!args.layout.from_file() && args.layout.mesh.empty(),
                 "{} needs --3d --evaluate (it names the one layout priced)",
                 args.layout.from_file() ? "--plan" : "--mesh");
    for (const CLI::Option* o : args.layout.spelled_out) {
      MESHTP_CHECK(o->count() == 0, "{} needs --3d --evaluate (it names the one layout priced)",
                   o->get_name());
    }
  }
  // An unknown runtime or framework is an error before any work.
  layout::Runtime runtime = layout::parse_runtime(args.runtime);
  std::optional<plan::Framework> framework;
  if (app.count("--emit") > 0) {
    framework = layout::parse<plan::Framework>(args.emit);
    // The layout emitted is chosen, priced and memory-checked as the framework runs it.
    const layout::Runtime runs = plan::runtime_of(*framework);
    MESHTP_CHECK(app.count("--runtime") == 0 || runtime == runs,
                 "--runtime {} with --emit {}: the framework runs a pipeline as --runtime {} "
                 "prices it, which --emit uses; leave --runtime out",
                 args.runtime, args.emit, layout::name(runs));
    runtime = runs;
    // stdout holds one thing: the configuration, or the table / JSON beside --emit-file's.
    for (const char* flag : {"--json", "--explain", "--explain-rank"}) {
      MESHTP_CHECK(app.count(flag) == 0 || !args.emit_file.empty(),
                   "--emit {} prints the configuration, {} the planner's answer: give "
                   "--emit-file FILE for the configuration",
                   args.emit, flag);
    }
  }
  MESHTP_CHECK(app.count("--emit-file") == 0 || framework.has_value(),
               "--emit-file {} needs --emit megatron|torchtitan|deepspeed", args.emit_file);
  // Two outputs naming one file would overwrite each other: refused before any work.
  {
    std::vector<std::pair<std::string, std::string>> outputs{{"--out", args.out},
                                                             {"--emit-file", args.emit_file}};
    if (!args.report.empty()) {
      for (const char* name : {"report.json", "index.html"}) {
        outputs.emplace_back("--report", (std::filesystem::path(args.report) / name).string());
      }
    }
    check_distinct_outputs(outputs);
  }
  // --report: DIR and python3 with matplotlib are checked before any work (rank 0 writes).
  const ReportDir report =
      !args.report.empty() && root() ? ReportDir(args.report) : ReportDir();
  if (args.search_3d) {
    if (args.evaluate) {
      run_plan_evaluate(args, request, runtime, framework, app, report);
      return;
    }
    if (app.count("--chunks") == 0) request.chunks = {1};
    run_plan_3d(args, request, runtime, framework, app, report);
    return;
  }
  for (const char* flag : {"--top", "--max-tp", "--cp", "--cp-comm", "--max-cp", "--uneven-stages",
                           "--first-stage-layers", "--last-stage-layers", "--ep", "--etp",
                           "--max-ep", "--moe-imbalance"}) {
    MESHTP_CHECK(app.count(flag) == 0, "{} needs --3d", flag);
  }

  const plan::PlanResult result = plan::plan(request);

  const plan::Candidate* explained = nullptr;
  if (args.explain || args.explain_rank != 0) {
    explained = &row(result, args.explain_rank, "--explain-rank",
                     args.explain_rank ? "--explain-rank" : "--explain");
  }
  if (!args.out.empty() || args.pick != 0) {
    MESHTP_CHECK(!args.out.empty() || framework, "--pick={} needs --out FILE or --emit", args.pick);
  }
  if (!args.out.empty()) {
    const plan::Candidate& c = row(result, args.pick, "--pick", "--out");
    layout::Plan picked = plan::to_plan(c);
    picked.provenance =
        plan::provenance_of(request.topology, request.model, c.t_step_s, c.t_comm_s);
    if (root()) layout::save_plan(args.out, picked);
  }
  if (framework) {
    const plan::Candidate& c = row(result, args.pick, "--pick", "--emit");
    plan::EmitRequest emitted{.plan = plan::layout_of(c, request.model),
                              .model = request.model,
                              .topology = request.topology.name};
    if (!c.feasible) emitted.notes.push_back("the planner marks it infeasible: " + c.reason);
    if (emit_config(args, *framework, emitted,
                    [&] { return plan::best_expressible(*framework, request); })) {
      write_report(report, "plan", app, request, plan::to_json(result), false);
      return;
    }
  }

  if (args.json) {
    nlohmann::json j = plan::to_json(result);
    if (explained) j["explain"] = plan::to_json(plan::explain(request, *explained));
    out() << j.dump() << '\n';
    write_report(report, "plan", app, request, j, false);
    return;
  }
  out() << plan::format_plan(request, result);
  if (explained) {
    out() << '\n' << plan::format_explanation(request, plan::explain(request, *explained));
  }
  write_report(report, "plan", app, request, plan::to_json(result), true);
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
  p->add_option("--cp", args->cp,
                "With --3d --evaluate: context parallelism, each of N ranks holds seq/N tokens "
                "(ranks ordered [tp, cp, pp, dp]; docs/long_context.md)")
      ->check(integer_at_least(1));
  p->add_option("--cp-comm", args->cp_comm,
                "With --3d: context parallelism's exchange, ring, a2a, a2a+ring or all_gather "
                "(the Llama 3 paper's; --evaluate: one; the search: a comma list of those "
                "tried)")
      ->capture_default_str();
  p->add_option("--first-stage-layers", args->first_stage_layers,
                "With --3d --evaluate: the first pipeline stage's layers (Megatron-LM's "
                "--decoder-first-pipeline-num-layers; 0: even stages)")
      ->check(integer_at_least(0));
  p->add_option("--last-stage-layers", args->last_stage_layers,
                "With --3d --evaluate: the last pipeline stage's layers (0: even stages)")
      ->check(integer_at_least(0));
  p->add_option("--max-cp", args->max_cp,
                "With --3d: the largest context-parallel group tried (default 1: none)")
      ->check(integer_at_least(1));
  p->add_flag("--uneven-stages", args->uneven_stages,
              "With --3d: also try uneven pipeline stages where the layers do not split evenly "
              "(the first and last stage shorter)");
  p->add_option("--ep", args->ep,
                "With --3d --evaluate: expert parallelism, a MoE model's experts split over N "
                "ranks of a stage (docs/moe.md)")
      ->check(integer_at_least(1));
  p->add_option("--etp", args->etp,
                "With --3d --evaluate: each expert tensor-parallel over N ranks (default: the "
                "attention's tp, Megatron-LM's default)")
      ->check(integer_at_least(1));
  p->add_option("--max-ep", args->max_ep,
                "With --3d: the largest expert-parallel group tried (default: every ep dividing "
                "num_experts)")
      ->check(integer_at_least(1));
  p->add_option("--moe-imbalance", args->moe_imbalance,
                "With --3d: routing imbalance F, the slowest expert rank gets F times the mean "
                "tokens (default 1: balanced, as benchmarks force it)")
      ->capture_default_str();
  p->add_option("--runtime", args->runtime,
                "With --3d: price layouts as this runtime runs them: meshtp (re-runs a "
                "pipeline stage's forward), megatron (Megatron-LM as Korthikanti et al. 2023 "
                "ran it: keeps in-flight activations), megatron-2021 (or megatron:2021: as "
                "Narayanan et al. 2021 ran it, no sequence parallelism, no selective "
                "recomputation, no distributed optimizer) or deepspeed (Megatron-DeepSpeed on "
                "DeepSpeed's pipeline engine: blocking send and receive, tied-embedding "
                "all-reduce at the flush, no interleaving, ZeRO 0-1 with a pipeline)")
      ->capture_default_str();
  p->add_option("--fc-stationary", args->fc_stationary,
                "2D GeMM strategies: the operand every linear keeps — auto (the larger of input "
                "and output), input, output, or weight (MeshSlice's default dataflow: priced "
                "only, the runtime keeps input or output)")
      ->capture_default_str();
  p->add_flag("--evaluate", args->evaluate,
              "With --3d: price the one layout of the layout flags below (or --plan FILE) "
              "instead of searching");
  p->add_option("--emit", args->emit,
                "Print the chosen layout as a framework's configuration instead of the table: "
                "megatron (a bash array of arguments), torchtitan (TOML) or deepspeed (JSON); "
                "with --3d the layouts are priced as the framework runs them (--runtime "
                "megatron)");
  p->add_option("--emit-file", args->emit_file,
                "With --emit: write the configuration to this file; the table (or --json) "
                "is printed as without --emit");
  p->add_option("--report", args->report,
                "Also write DIR/index.html, a page of plots (the ranked layouts' time by part, "
                "their memory against the device; matplotlib) and DIR/report.json");
  args->layout.add_to(p, LayoutFlags::kReplicas | LayoutFlags::kPipeline | LayoutFlags::kNoChunks);
  p->callback([args, p] { run_plan(*args, *p); });
}

}  // namespace meshtp::cli
