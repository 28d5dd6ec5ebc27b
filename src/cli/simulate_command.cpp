// meshtp simulate — run the real schedule on a simulated cluster (docs/simulation.md):
//
//   meshtp simulate --topology T --model M --devices N
//       [--mesh d1xd2 [--strategy S] [--chunks c] [--slices s] [--stationary …] | --plan F
//        | --top K [--strategies atp,…]]
//       [--what layer|step|pipeline|gemm2d|collectives] [--layers L] [--batch b] [--seq s]
//       [--dp D --zero Z --pp P --microbatches M --schedule S (pipeline)] [--fold-layers]
//       [--m --n --k --dataflow] [--sizes 1M,16M] [--json] [--trace F] [--keep DIR]
//       [--simulator PATH] [--smpirun PATH] [--streams E] [--values] [--predict-only]
//       [--report DIR]
//
// For each candidate (the given layout, or the planner's K best that the runtime can run)
// this writes the topology's SimGrid platform, runs the simulated meshtp (build-sim/) under
// smpirun on it (sim/launch.hpp) and prints the simulated time, the exposed communication,
// the time per collective and the planner's prediction for the same layout beside it
// (sim/predict.hpp), with the simulation's own wall time. With several candidates it says
// whether the planner's best is the simulated best.
//
// A layout given by --mesh and --strategy runs the planner's tuned knobs for it (chunks as
// given; per linear slices and stationary operand as plan::to_plan makes them) unless
// --slices or --stationary spell them out. --predict-only prints the planner's prediction for
// the same layouts and simulates nothing (scripts/reproduce-papers.sh --reprice uses it to
// price recorded simulations again after a cost-model change: simulated time does not depend
// on the planner).
//
// --report DIR writes DIR/index.html, a page of plots of what --json prints (each layout's
// simulated time by part, its memory against the device, predicted beside simulated), and that
// JSON as DIR/report.json (cli/report_dir.hpp). python3 with matplotlib is checked for before
// anything is simulated.
//
//   meshtp simulate-run --spec F --out R   (hidden) what the simulated binary runs: rank 0
//       writes R, the result of sim::run for the spec F.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/flag_checks.hpp"
#include "cli/layout_flags.hpp"
#include "cli/report_dir.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/simulation.hpp"
#include "plan/candidate.hpp"
#include "plan/layout_search.hpp"
#include "plan/memory.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "sim/launch.hpp"
#include "sim/predict.hpp"
#include "sim/run.hpp"

namespace meshtp::cli {
namespace {

struct SimulateArgs {
  ModelFlags shape;  // --model, --layers, --batch, --seq (0: the model's)
  std::string topology, what = "layer", sizes, dataflow = "os", strategies = "all";
  std::string trace, keep, simulator = MESHTP_SIM_BINARY, smpirun = "smpirun", report;
  int devices = 0, top = 0, streams = 2;
  std::int64_t m = 0, n = 0, k = 0;
  bool json = false, values = false, predict_only = false, ignore_memory = false;
  bool fold_layers = false;
  LayoutFlags layout;
};

struct Case {
  sim::RunSpec spec;
  std::string label;  // "atp 4x2 chunks=2"
  // The model's whole training step on this layout, as `meshtp plan` prices its memory (a
  // layer or step runs; not for gemm2d or collectives).
  std::optional<double> memory_gib;
  std::string does_not_fit;  // "needs 385.9 GiB per rank but the device has 80 GiB"; or empty
};

// What `meshtp plan` says a rank of layout p needs for `model` as given (its embedding and
// head included, unlike the simulation's runtime_model): its candidate's estimate (the memory
// model plus the cost model's buffers) for one stage, else the pipeline's peak rank.
double planned_memory_gib(const plan::PlanRequest& request, const plan::ModelSpec& model,
                          const layout::Plan& p) {
  plan::PlanRequest with_recompute = request;
  with_recompute.model = model;
  with_recompute.model.recompute = p.recompute;
  with_recompute.model.attention = p.attention;
  if (p.dp == 1 && p.pp == 1) {
    const plan::Candidate c =
        plan::evaluate(with_recompute, plan::candidate_strategy(p.strategy, p.mesh), p.mesh[0],
                       p.mesh[1], p.chunks);
    if (c.valid) return c.memory.total_gib();
  }
  return plan::peak_rank_memory(with_recompute.model, p, plan::HeadBuffers::kSharded).total_gib();
}

std::string label(const layout::Plan& p) {
  std::string knob, pipe;
  if (p.dp > 1 || p.pp > 1) {
    pipe = fmt::format("dp{} pp{}{} m{} ", p.dp, p.pp,
                       p.virtual_stages > 1 ? fmt::format(" v{}", p.virtual_stages) : "",
                       p.microbatches);
  }
  if (!layout::is_gemm2d(p.strategy)) {
    knob = fmt::format(" chunks={}", p.chunks);
  } else if (p.strategy == layout::Strategy::kMeshSlice || p.strategy == layout::Strategy::kSumma) {
    knob = " S=";
    for (const layout::LinearPlan& l : p.linears) knob += fmt::format("{},", l.gemm2d.slices);
    knob.pop_back();
  }
  return fmt::format("{}{} {}x{}{}", pipe, p.strategy, p.mesh[0], p.mesh[1], knob);
}

sim::RunSpec base_spec(const SimulateArgs& a, const plan::ModelSpec& m) {
  sim::RunSpec s;
  s.what = sim::parse_what(a.what);
  s.model.shape = m;
  // A pipeline step runs the embedding and the head: the model's vocabulary (bytes if it has
  // none). Elsewhere it is unused: the block stack runs.
  if (s.what != sim::What::kPipeline || m.vocab == 0) s.model.shape.vocab = model::kByteVocab;
  if (s.what == sim::What::kLayer) s.model.shape.layers = 1;
  s.fold_layers = a.fold_layers;
  // The model's precision moves its bytes; --sizes are bytes on the wire as given (fp32
  // buffers), and values mode computes and sends fp32.
  s.element_bytes = s.what == sim::What::kCollectives || a.values ? 4 : m.element_bytes();
  // gemm2d: the model's largest FC GeMM (mlp1: tokens × 4h, contraction h) unless given.
  s.m = a.m > 0 ? a.m : m.tokens();
  s.n = a.n > 0 ? a.n : 4 * static_cast<std::int64_t>(m.hidden);
  s.k = a.k > 0 ? a.k : m.hidden;
  s.dataflow = layout::parse_dataflow(a.dataflow);
  if (!a.sizes.empty()) {
    for (const std::int64_t b : parse_byte_sizes(a.sizes)) s.sizes.push_back(static_cast<double>(b));
  } else {  // one layer's fp32 activation, and a tenth of it, in whole floats per rank
    const double quantum = 4.0 * a.devices;  // of every group: a mesh dim divides the devices
    const double act = 4.0 * static_cast<double>(m.tokens()) * m.hidden;
    for (const double bytes : {act / 10, act}) {
      s.sizes.push_back(std::max(quantum, std::floor(bytes / quantum) * quantum));
    }
  }
  return s;
}

// The layout for --mesh and the layout flags (see the file comment).
layout::Plan given_layout(const SimulateArgs& a, const plan::PlanRequest& request) {
  const layout::Plan spelled = a.layout.resolve(a.devices, "--devices", &request.model);
  if (a.layout.given("--slices") || a.layout.given("--stationary")) return spelled;
  if (sim::parse_what(a.what) == sim::What::kPipeline) {
    // The 2D GeMMs' knobs as `plan --3d --evaluate` tunes them for a stage.
    if (!layout::is_gemm2d(spelled.strategy)) return spelled;
    plan::ModelSpec model = request.model;
    model.recompute = spelled.recompute;
    layout::Plan tuned = spelled;
    tuned.linears =
        plan::evaluate_layout({.topology = request.topology, .model = model, .devices = a.devices},
                              spelled)
            .plan.linears;
    return tuned;
  }
  if (spelled.dp > 1 || spelled.pp > 1) return spelled;  // sim::validate says what runs them
  const plan::Candidate c =
      plan::evaluate(request, plan::candidate_strategy(spelled.strategy, spelled.mesh),
                     spelled.mesh[0], spelled.mesh[1], spelled.chunks);
  if (!c.valid) return spelled;
  layout::Plan tuned = plan::to_plan(c);
  tuned.recompute = spelled.recompute;
  tuned.attention = spelled.attention;
  tuned.progress_splits = spelled.progress_splits;
  tuned.sequence_parallel = spelled.sequence_parallel;
  return tuned;
}

std::vector<Case> choose_cases(const SimulateArgs& a, const plan::PlanRequest& request,
                               const plan::ModelSpec& model, const sim::RunSpec& base,
                               std::vector<std::string>& skipped) {
  std::vector<layout::Plan> layouts;
  const bool given = a.layout.from_file() || !a.layout.mesh.empty();
  if (a.layout.from_file()) {
    layouts.push_back(a.layout.resolve(a.devices, "--devices", &request.model));
  } else if (given) {
    layouts.push_back(given_layout(a, request));
  } else {
    MESHTP_CHECK(base.what != sim::What::kPipeline,
                 "--what pipeline simulates one layout: give it with --mesh d1xd2 (and --dp, "
                 "--pp, --microbatches, --schedule) or --plan FILE");
    for (const CLI::Option* o : a.layout.spelled_out) {
      MESHTP_CHECK(o->count() == 0,
                   "{} needs --mesh d1xd2: without a mesh the planner chooses the whole layout",
                   o->get_name());
    }
    for (const plan::Candidate& c : plan::plan(request).candidates) {
      if (c.valid) layouts.push_back(plan::to_plan(c));
    }
  }
  std::vector<Case> out;
  for (layout::Plan& p : layouts) {
    if (static_cast<int>(out.size()) == std::max(a.top, 1)) break;
    p.provenance.reset();
    p.check_ranks(a.devices, "--devices");
    sim::RunSpec s = base;
    s.model.layout = p;
    try {
      sim::validate(s);
    } catch (const Error& e) {
      if (given) throw;
      skipped.push_back(fmt::format("{}: {}", label(p), e.what()));
      continue;
    }
    Case c{.spec = s, .label = label(p), .memory_gib = std::nullopt, .does_not_fit = ""};
    if (s.what == sim::What::kLayer || s.what == sim::What::kStep ||
        s.what == sim::What::kPipeline) {
      c.memory_gib = planned_memory_gib(request, model, p);
      if (*c.memory_gib > request.topology.memory_gib) {
        c.does_not_fit = fmt::format("needs {:.1f} GiB per rank but the device has {} GiB",
                                     *c.memory_gib, request.topology.memory_gib);
      }
    }
    if (!c.does_not_fit.empty() && !a.ignore_memory && !a.predict_only) {
      MESHTP_CHECK(!given,
                   "{} does not fit in device memory, as `meshtp plan` marks it: it {}; "
                   "--ignore-memory simulates it anyway",
                   c.label, c.does_not_fit);
      skipped.push_back(fmt::format("{}: does not fit: {}", c.label, c.does_not_fit));
      continue;
    }
    out.push_back(std::move(c));
  }
  MESHTP_CHECK(!out.empty(), "none of the planner's candidates for {} devices can be simulated{}",
               a.devices, skipped.empty() ? "" : " (the first: " + skipped.front() + ")");
  return out;
}

nlohmann::json memory_json(const Case& c) {
  if (!c.memory_gib) return nullptr;
  return {{"gib", *c.memory_gib}, {"fits", c.does_not_fit.empty()}};
}

double error_pct(double predicted, double simulated) {
  return simulated > 0 ? 100.0 * (predicted - simulated) / simulated : 0.0;
}

std::string ms_or_dash(bool available, double seconds) {
  return available ? fmt::format("{:.3f}", seconds * 1e3) : "-";
}

void print_collectives(std::ostream& os, const Case& c, const sim::RunResult& r,
                       const sim::Prediction& p) {
  os << fmt::format("  {}\n    {:>4} {:<15} {:>9} {:>12} {:>12} {:>7}\n", c.label, "dim",
                    "collective", "bytes", "sim us", "ring us", "err%");
  for (std::size_t i = 0; i < r.collectives.size(); ++i) {
    const sim::CollectiveTime& s = r.collectives[i];
    const double ring = i < p.collectives.size() ? p.collectives[i].seconds : 0;
    os << fmt::format("    {:>4} {:<15} {:>9} {:>12.2f} {:>12.2f} {:>+6.1f}%\n", s.dim, s.kind,
                      format_byte_size(static_cast<std::int64_t>(s.bytes)), s.seconds * 1e6,
                      ring * 1e6, error_pct(ring, s.seconds));
  }
}

void print_run(std::ostream& os, const Case& c, const sim::RunResult& r, const sim::Prediction& p,
               double wall_s) {
  os << fmt::format("  {:<26} {:>11.3f} {:>11} {:>7} {:>12.3f} {:>12} {:>8.1f}\n", c.label,
                    r.total_s * 1e3, ms_or_dash(p.available, p.total_s),
                    p.available ? fmt::format("{:+.1f}", error_pct(p.total_s, r.total_s)) : "-",
                    r.exposed_comm_s * 1e3, ms_or_dash(p.available, p.exposed_s), wall_s);
  std::string colls;
  for (const sim::CollectiveTime& t : r.collectives) {
    colls += fmt::format(" {} {}x {:.3f} ms;", t.kind, t.calls, t.seconds * 1e3);
  }
  if (c.spec.what == sim::What::kPipeline) {
    os << fmt::format(
        "    schedule {:.3f} opt {:.3f} ms, compute {:.3f} ms{}; collectives "
        "(start→done):{}\n",
        r.schedule_s * 1e3, r.optimizer_s * 1e3, r.compute_s * 1e3,
        c.spec.fold_layers ? " (folded layers count as compute)" : "", colls);
  } else {
    os << fmt::format(
        "    fwd {:.3f} bwd {:.3f} opt {:.3f} ms, compute {:.3f} ms; collectives "
        "(start→done):{}\n",
        r.forward_s * 1e3, r.backward_s * 1e3, r.optimizer_s * 1e3, r.compute_s * 1e3, colls);
  }
  os << "    plan: " << c.spec.model.layout << "\n";  // exactly what ran (`--plan` reads it)
  if (!p.note.empty()) os << "    planner: " << p.note << "\n";
  if (!c.does_not_fit.empty()) {
    os << "    infeasible (simulated with --ignore-memory): " << c.does_not_fit << "\n";
  }
}

nlohmann::json to_json(const sim::Prediction& p) {
  nlohmann::json pj{{"available", p.available}, {"note", p.note}};
  if (p.available) {
    pj.update({{"total_s", p.total_s}, {"comm_s", p.comm_s}, {"compute_s", p.compute_s},
               {"exposed_comm_s", p.exposed_s}});
  }
  return pj;
}

// Prints the planner's side alone (--predict-only); returns what --json prints.
nlohmann::json print_predictions(const SimulateArgs& a, const plan::Topology& topology,
                                 const plan::ModelSpec& model, const std::vector<Case>& cases,
                                 const std::vector<std::string>& skipped) {
  std::ostream& os = out();
  nlohmann::json runs = nlohmann::json::array();
  if (!a.json) {
    os << fmt::format("predict {} on '{}' ({} devices): {} — the planner only, nothing "
                      "simulated\n  {:<26} {:>11} {:>12}\n",
                      a.what, topology.name, a.devices, model.name, "layout", "plan ms",
                      "plan exp ms");
  }
  for (const Case& c : cases) {
    const sim::Prediction p = sim::predict(topology, model, a.devices, c.spec);
    runs.push_back({{"layout", c.label},
                    {"plan", layout::to_json(c.spec.model.layout)},
                    {"spec", sim::to_json(c.spec)},
                    {"predicted", to_json(p)},
                    {"memory", memory_json(c)}});
    if (!a.json) {
      os << fmt::format("  {:<26} {:>11} {:>12}{}\n", c.label, ms_or_dash(p.available, p.total_s),
                        ms_or_dash(p.available, p.exposed_s),
                        c.does_not_fit.empty() ? "" : "  infeasible: " + c.does_not_fit);
    }
  }
  nlohmann::json j{
      {"topology", topology.name}, {"model", model.name}, {"devices", a.devices}, {"what", a.what},
      {"predict_only", true},      {"runs", runs},        {"skipped", skipped}};
  if (a.json) os << j.dump() << "\n";
  return j;
}

// --report: the page of `result` (what --json prints), named on stdout beside the table.
void write_report(const SimulateArgs& a, const ReportDir& report, const CLI::App& command,
                  const plan::Topology& topology, const plan::ModelSpec& model,
                  const nlohmann::json& result) {
  if (!report.enabled()) return;
  const std::string page =
      report.write(report_json("simulate", command, topology, a.devices, model.name, result));
  if (!a.json) out() << "report: " << page << "\n";
}

void run_simulate(const SimulateArgs& a, const CLI::App& command) {
  const auto start = std::chrono::steady_clock::now();
  MESHTP_CHECK(world_size() == 1,
               "meshtp simulate launches its own simulation: run it without mpirun (got {} ranks)",
               world_size());
  MESHTP_CHECK(a.devices > 0, "--devices={} must be positive", a.devices);
  MESHTP_CHECK(a.top >= 0, "--top={} must be positive", a.top);
  MESHTP_CHECK(!(a.values && a.fold_layers),
               "--fold-layers charges a stage's later blocks the first block's time, which only "
               "charged mode does; --values computes every block: give one of them");
  MESHTP_CHECK((a.layout.mesh.empty() && !a.layout.from_file()) || a.top == 0,
               "give one layout (--mesh or --plan) or --top K, not both");
  // An earlier run's spec, log and result stay what they were.
  if (!a.keep.empty() && !a.predict_only && std::filesystem::exists(a.keep)) {
    MESHTP_CHECK(std::filesystem::is_directory(a.keep), "--keep {}: not a directory", a.keep);
    MESHTP_CHECK(std::filesystem::is_empty(a.keep),
                 "--keep {}: the directory is not empty (an earlier run?); name a new or empty "
                 "one: meshtp does not write over it",
                 a.keep);
  }
  plan::ModelSpec model = a.shape.apply(plan::load_model(a.shape.model));
  model.validate();
  const plan::Topology topology = plan::load_topology(a.topology);
  const plan::PlanRequest request{.topology = topology,
                                  .model = sim::runtime_model(model),
                                  .devices = a.devices,
                                  .strategies = plan::parse_strategies(a.strategies)};
  request.validate();  // "topology 'x' has 8 devices but --devices is 16"
  std::vector<std::string> skipped;
  std::vector<Case> cases = choose_cases(a, request, model, base_spec(a, model), skipped);
  // --report: DIR and python3 with matplotlib are checked before anything is simulated.
  const ReportDir report = a.report.empty() ? ReportDir() : ReportDir(a.report);
  if (a.predict_only) {
    write_report(a, report, command, topology, model,
                 print_predictions(a, topology, model, cases, skipped));
    return;
  }
  sim::Simulator simulator{.binary = a.simulator,
                           .smpirun = a.smpirun,
                           .streams = a.streams,
                           .values = a.values,
                           .temporary_dir = ""};
  sim::check_simulator(simulator);
  MESHTP_CHECK(a.trace.empty() || cases.size() == 1,
               "--trace records one simulation: give one layout, or --top 1");

  const bool keep = !a.keep.empty();
  const std::string root = keep ? a.keep : fmt::format("/tmp/meshtp-simulate-{}", getpid());
  // Without --keep, the simulations' files go when this returns or throws, unless a
  // simulation failed: its error names the log, which must still be there.
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ignored;
      if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
    }
  } cleanup{keep ? "" : root};
  simulator.temporary_dir = cleanup.dir;
  std::ostream& os = out();
  const sim::What what = cases.front().spec.what;
  if (!a.json) {
    os << fmt::format(
        "simulate {} on '{}' ({} devices): {} ({} layer(s) run, b={} s={} h={}); "
        "{}\n",
        a.what, topology.name, a.devices, model.name, cases.front().spec.model.shape.layers,
        model.batch, model.seq, model.hidden,
        a.values ? "values mode: values computed, times are communication only"
                 : "compute charged at the device rates, values meaningless");
    for (const std::string& s : skipped) os << "  skipped: " << s << "\n";
    if (what != sim::What::kCollectives) {
      os << fmt::format("  {:<26} {:>11} {:>11} {:>7} {:>12} {:>12} {:>8}\n", "layout",
                        "sim ms", "plan ms", "err%", "sim exp ms", "plan exp ms", "wall s");
    }
  }
  nlohmann::json runs = nlohmann::json::array();
  std::size_t sim_best = 0, plan_best = 0;
  std::vector<double> plan_t;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    sim::RunSpec& spec = cases[i].spec;
    if (!a.trace.empty()) spec.trace = std::filesystem::absolute(a.trace).string();
    const sim::Prediction p = sim::predict(topology, model, a.devices, spec);
    sim::Launched l;
    try {
      l = sim::launch(topology, spec, simulator, fmt::format("{}/{}", root, i));
    } catch (const sim::Interrupted& e) {  // Ctrl-C: nothing of the simulation is left
      os << std::flush;
      std::fprintf(stderr, "error: %s%s\n", e.what(), keep ? "" : "; its files were removed");
      set_exit_status(128 + e.signal);
      return;
    } catch (const Error&) {
      cleanup.dir.clear();
      throw;
    }
    const sim::RunResult& r = l.result;
    runs.push_back({{"layout", cases[i].label},
                    {"plan", layout::to_json(spec.model.layout)},
                    {"spec", sim::to_json(spec)},
                    {"simulated", sim::to_json(r)},
                    {"predicted", to_json(p)},
                    {"memory", memory_json(cases[i])},
                    {"wall_s", l.wall_s}});
    plan_t.push_back(p.available ? p.total_s : -1);
    if (!a.json) {
      if (what == sim::What::kCollectives) {
        print_collectives(os, cases[i], r, p);
      } else {
        print_run(os, cases[i], r, p, l.wall_s);
      }
    }
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (runs[i]["simulated"]["total_s"].get<double>() <
        runs[sim_best]["simulated"]["total_s"].get<double>()) {
      sim_best = i;
    }
    if (plan_t[i] >= 0 && (plan_t[plan_best] < 0 || plan_t[i] < plan_t[plan_best])) plan_best = i;
  }
  const bool ranked = cases.size() > 1 && what != sim::What::kCollectives;
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json j{{"topology", topology.name},
                   {"model", model.name},
                   {"devices", a.devices},
                   {"what", a.what},
                   {"mode", a.values ? "values" : "charged"},
                   {"runs", runs},
                   {"skipped", skipped},
                   {"wall_s", wall_s}};
  if (ranked) {
    j["simulated_best"] = cases[sim_best].label;
    j["predicted_best"] = cases[plan_best].label;
    j["agree"] = sim_best == plan_best;
  }
  if (a.json) {
    os << j.dump() << "\n";
    write_report(a, report, command, topology, model, j);
    return;
  }
  if (ranked) {
    os << fmt::format("simulated best: {}; planner's best: {} — {}\n", cases[sim_best].label,
                      cases[plan_best].label, sim_best == plan_best ? "they agree" : "they differ");
  }
  if (!a.trace.empty()) os << "trace: " << a.trace << "\n";
  os << fmt::format("wall time: {:.1f} s\n", wall_s);
  write_report(a, report, command, topology, model, j);
}

void run_simulate_run(const std::string& spec_path, const std::string& out_path) {
  MESHTP_CHECK(simhooks::simulated(),
               "simulate-run is what the simulated meshtp (build-sim/) runs under smpirun; use "
               "meshtp simulate");
  const sim::RunSpec spec = sim::run_spec_from_json(nlohmann::json::parse(read_file(spec_path)));
  const sim::RunResult r = sim::run(world(), spec);
  if (world().rank() == 0) write_file_atomically(out_path, sim::to_json(r).dump(2) + "\n");
  world().barrier();
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* c = app.add_subcommand(
      "simulate", "Run the real schedule on a simulated cluster (SimGrid) beside the planner");
  c->add_option("--topology", args->topology, "Topology preset or file")->required();
  args->shape.add_to(c, ModelFlags::kLayers | ModelFlags::kBatch | ModelFlags::kSeq,
                     "Model preset or file")
      ->required();
  c->add_option("--devices", args->devices, "Number of devices")->required();
  args->layout.add_to(c, LayoutFlags::kReplicas | LayoutFlags::kPipeline);
  c->add_option("--top", args->top,
                "Simulate the planner's K best candidates (default: its best, without --mesh)");
  c->add_option("--strategies", args->strategies,
                "--top: the strategies the planner ranks, like atp,meshslice (default all)");
  c->add_option("--what", args->what,
                "layer|step|pipeline|gemm2d|collectives (default layer); pipeline: a training "
                "step of the whole layout (--dp, --pp, --microbatches, --schedule)");
  c->add_flag("--fold-layers", args->fold_layers,
              "pipeline: run each stage's first block and charge the others its time");
  c->add_option("--m", args->m, "gemm2d: rows of C (default b·s)")->check(integer_at_least(1));
  c->add_option("--n", args->n, "gemm2d: columns of C (default 4h)")->check(integer_at_least(1));
  c->add_option("--k", args->k, "gemm2d: contraction (default h)")->check(integer_at_least(1));
  c->add_option("--dataflow", args->dataflow, "gemm2d: os|ls|rs (default os)");
  c->add_option("--sizes", args->sizes, "collectives: message sizes, like 1M,16M");
  c->add_flag("--json", args->json, "One JSON object");
  c->add_option("--trace", args->trace, "Chrome trace of the (one) simulated run");
  c->add_option("--keep", args->keep, "Keep platform, spec, log and result under DIR");
  c->add_option("--simulator", args->simulator, "The simulated meshtp (build-sim/src/cli/meshtp)");
  c->add_option("--smpirun", args->smpirun, "smpirun to use (default: from PATH)");
  c->add_option("--streams", args->streams, "Communication engines per device (default 2)");
  c->add_flag("--values", args->values, "Values mode: compute for real (small models only)");
  c->add_flag("--ignore-memory", args->ignore_memory,
              "Simulate layouts that do not fit in device memory (`plan` marks them infeasible)");
  c->add_flag("--predict-only", args->predict_only,
              "The planner's prediction for the same layouts; simulate nothing");
  c->add_option("--report", args->report,
                "Also write DIR/index.html, a page of plots (time by part, memory against the "
                "device, predicted beside simulated; matplotlib) and DIR/report.json");
  c->callback([args, c] { run_simulate(*args, *c); });

  auto spec = std::make_shared<std::string>();
  auto result = std::make_shared<std::string>();
  CLI::App* r = app.add_subcommand("simulate-run", "What the simulated meshtp runs");
  r->group("");  // hidden: meshtp simulate invokes it
  r->add_option("--spec", *spec)->required();
  r->add_option("--out", *result)->required();
  r->callback([spec, result] { run_simulate_run(*spec, *result); });
}

}  // namespace meshtp::cli
