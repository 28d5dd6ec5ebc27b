// meshtp calibrate — measure this cluster's collectives and local GeMM rate on the real
// ranks, fit the planner's ring model to them, and write a topology file the planner reads:
//
//   mpirun -np N meshtp calibrate --out my-cluster.json [--mesh d1xd2|all] [--sizes 16K,…]
//          [--base TOPOLOGY] [--name NAME] [--gemm MxNxK,…] [--elementwise RxC,…]
//          [--seconds S] [--repeats R] [--json]
//   meshtp plan --topology my-cluster.json --model … --devices N
//
// What is measured (bench/calibration.hpp measures; this file parses, fits and prints). Every
// group shape (P ranks, stride) of the mesh dims: mesh d1xd2 has (d1, stride d2) and (d2,
// stride 1); `--mesh all` (the default) takes every 2D mesh of N ranks, so each mesh
// the planner can pick is calibrated (for N = 4: (4,1), (2,2), (2,1)).
// For each shape, all_reduce / all_gather / reduce_scatter at every --size, with every group
// of that dim running at once (as in tensor parallelism), through bench::time_collective:
// validated, warmed up, median over iterations of the max over ranks. Then every rank runs
// the --gemm shapes at once (bench::time_local_gemm); rate = Σ FLOPs / Σ (max over ranks).
// Then every rank runs the runtime's LayerNorm and GeLU, forward and backward, over each
// --elementwise [rows, cols] at once (bench::time_local_elementwise); the elementwise rate
// is Σ bytes touched / Σ (max over ranks), bytes counted with the planner's reads + writes
// per element (plan/elementwise.hpp: LayerNorm 3 + 6, GeLU 2 + 5, × 4 bytes), so the
// planner gets back exactly the time measured here for these ops.
// Then, on each mesh whose dims both have ≥ 2 ranks, an all_gather of the largest size on
// each dim alone and on both at once (bench::measure_dim_sharing): how much the two dims
// slow each other (plan::dim_sharing, calibration.meshes), which the planner adds where both
// dims' collectives run at once (MeshLinks::concurrent).
// Last, the runtime's cost per 2D GeMM step (bench::measure_step_samples): MeshSlice at S =
// 1, 4, 16, 64 on the squarest mesh, priced with everything fitted above; the time the price
// misses per step (plan::fit_step_overhead) goes into the calibration (step_overhead_us),
// which the planner and the simulator charge once per local GeMM call of a 2D GeMM.
// The whole sweep runs --repeats times and each point is the median over the sweeps, so a
// burst of load on a shared machine spoils one sweep's sample of a point, not the point.
//
// The fit (plan/calibration_fit.hpp): per shape and collective, least squares on
// T = t_launch + n·(l_sync + (bytes/P)/bw), n = P−1 (gather, scatter) or 2(P−1) (all_reduce);
// its header says how t_launch and l_sync are split. Fit quality (R², max relative residual)
// is printed per line.
//
// The file. With --base, the base topology (its device count must be N) with its
// calibration replaced. Without, one flat level of N ranks whose group bandwidth is the
// slowest fitted link and whose latency the largest fitted l_sync (what an uncalibrated
// mesh dim falls back to), device memory = host memory / ranks on the host, device TFLOP/s
// = the measured GeMM rate. Both measured rates also go into the calibration, where they
// override the device's (calibration.gemm_tflops, calibration.elementwise_gbps). Written by
// rank 0 atomically (core/atomic_file.hpp) after it
// has parsed back as a valid topology; --out is checked before anything is measured.
//
// `--from-nccl-tests FILE… --base TOPOLOGY` fits the same model to nccl-tests logs instead of
// measuring (calibrate_nccl_tests.cpp); the measuring flags are refused with it.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "bench/calibration.hpp"
#include "cli/calibrate_nccl_tests.hpp"
#include "cli/commands.hpp"
#include "cli/layout_flags.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/parse.hpp"
#include "plan/calibration_fit.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"
#include "plan/step_log.hpp"

namespace meshtp::cli {
namespace {

// Rows x cols of the LayerNorm / GeLU buffers: 16 MiB per tensor, 5 tensors, beyond the
// last-level cache of a CPU box (here 2 MiB L2 per core, 32 MiB L3). These kernels are
// arithmetic-bound on a CPU (tanh, double sums), so the rate moves little with the size
// (here ~5.6 GB/s at this shape, ~7 GB/s for cache-resident 512x256).
constexpr const char* kElementwiseDefault = "4096x1024";

struct CalibrateArgs {
  std::string out;
  std::string mesh = "all";
  // The messages of the models the runtime trains here (bench plan's default sends 128K-2M),
  // and where a CPU box's shared-memory transport is still linear; pass the sizes of your
  // model's messages otherwise (a line across the cache cliff fits neither side).
  std::string sizes = "16K,64K,128K,256K,512K,1M,2M";
  std::string base;
  std::string name;
  std::string gemm = "512x512x512,1024x1024x1024,2048x512x1024";
  std::string elementwise = kElementwiseDefault;
  double seconds = 0.1;
  int repeats = 3;
  bool json = false;
  std::vector<std::string> nccl_tests;  // --from-nccl-tests: fit these logs, measure nothing
  std::string step_log;  // --from-step-log: fit one constant to this run's step time
  std::string fit;       // --fit: that constant (a JSON pointer of the base's ranges)
  std::string min_bytes;
  double memory_gib = 0, tflops = 0;  // --from-nccl-tests: the device, overriding
  std::vector<CLI::Option*> measuring;  // the flags that only measuring uses
  CLI::Option* min_bytes_option = nullptr;
  CLI::Option* memory_option = nullptr;
  CLI::Option* tflops_option = nullptr;
};



// "512x512x512,1024x…" → one list of `rank` positive sizes per item.
std::vector<std::vector<int>> parse_shape_list(const std::string& text, const char* flag,
                                               std::size_t rank, const char* example) {
  std::vector<std::vector<int>> shapes;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    std::vector<int> dims;
    try {
      dims = parse_mesh_shape(item);
    } catch (const Error&) {
      dims.clear();
    }
    MESHTP_CHECK(dims.size() == rank, "bad {} item '{}': expected {}", flag, item, example);
    shapes.push_back(std::move(dims));
    if (comma == std::string::npos) return shapes;
    start = comma + 1;
  }
}

std::vector<bench::GemmShape> parse_gemm_list(const std::string& text) {
  std::vector<bench::GemmShape> shapes;
  for (const auto& d : parse_shape_list(text, "--gemm", 3, "MxNxK, like 1024x1024x1024")) {
    shapes.push_back({d[0], d[1], d[2]});
  }
  return shapes;
}

std::vector<bench::ElementwiseShape> parse_elementwise_list(const std::string& text) {
  std::vector<bench::ElementwiseShape> shapes;
  for (const auto& d : parse_shape_list(text, "--elementwise", 2, "ROWSxCOLS, like 4096x1024")) {
    shapes.push_back({d[0], d[1]});
  }
  return shapes;
}

// Runs `check` on rank 0 only (e.g. a filesystem check) and makes every rank throw rank 0's
// error, so all ranks agree before the next collective.
void agree_with_rank0(const comm::Communicator& world, const std::function<void()>& check) {
  std::string reason;
  if (world.rank() == 0) {
    try {
      check();
    } catch (const std::exception& e) {
      reason = e.what();
      if (reason.empty()) reason = "unknown error on rank 0";
    }
  }
  std::int64_t length = static_cast<std::int64_t>(reason.size());
  world.broadcast(std::span<std::int64_t>(&length, 1), 0);
  if (length == 0) return;
  std::vector<unsigned char> text(reason.begin(), reason.end());
  text.resize(static_cast<std::size_t>(length));
  world.broadcast(std::span<unsigned char>(text), 0);
  throw Error(std::string(text.begin(), text.end()));
}

std::string stem_of(const std::string& path) { return std::filesystem::path(path).stem().string(); }


// `calibrate --from-step-log LOG --base TOPOLOGY --out FILE [--fit CONSTANT]`: the run's
// layout and step from its log (plan/step_log.hpp), one constant of the base's sourced ranges
// fitted so that plan --3d --evaluate --runtime megatron prices that step; the base with the
// fitted value written to --out (its range kept when the value lies inside, dropped when not).
void run_calibrate_from_step_log(const CalibrateArgs& a) {
  MESHTP_CHECK(!a.base.empty(),
               "--from-step-log needs --base TOPOLOGY: the cluster the run ran on, with the "
               "sourced ranges ('ranges') of the constants to fit");
  plan::Topology base = plan::load_topology(a.base);
  (void)check_output_path(a.out);  // before the work
  const plan::StepLog log = plan::parse_step_log(read_file(a.step_log), a.step_log);
  const plan::LayoutRequest request{.topology = base,
                                    .model = log.model,
                                    .devices = log.world_size,
                                    .runtime = log.runtime};
  const plan::ConstantFit fit = plan::fit_step_constant(request, log.plan, log.step_s, a.fit);
  plan::Topology bare = base;
  bare.ranges.clear();
  plan::Topology fitted = plan::topology_from_json(
      plan::with_constant(plan::to_json(bare), fit.range, fit.fitted), a.base);
  fitted.ranges = base.ranges;
  if (!fit.inside()) {
    std::erase_if(fitted.ranges,
                  [&](const plan::ConstantRange& r) { return r.constant == fit.range.constant; });
  }
  if (!a.name.empty()) fitted.name = a.name;
  fitted.description += fmt::format(
      " {} = {:.6g} fitted to the step of {} ({}; meshtp calibrate --from-step-log: median {:.6g} ms "
      "of {} logged iterations; source range {:.6g}…{:.6g}{}).",
      fit.range.constant, fit.fitted, a.step_log, log.format, log.step_s * 1e3, log.iteration_ms.size(),
      fit.range.low, fit.range.high, fit.inside() ? "" : ", the fit outside it: range dropped");
  const std::string text = plan::to_json(fitted).dump(2) + "\n";
  plan::parse_topology(text, a.out);
  if (root()) write_file_atomically(a.out, text);
  if (a.json) {
    out() << nlohmann::json{{"out", a.out},
                            {"log", a.step_log},
                            {"format", log.format},
                            {"runtime", layout::name(log.runtime)},
                            {"plan", layout::to_json(log.plan)},
                            {"measured_s", fit.measured_s},
                            {"iterations", log.iteration_ms.size()},
                            {"constant", fit.range.constant},
                            {"given", fit.given},
                            {"fitted", fit.fitted},
                            {"source_low", fit.range.low},
                            {"source_high", fit.range.high},
                            {"source", fit.range.source},
                            {"inside", fit.inside()},
                            {"priced_given_s", fit.priced_given_s},
                            {"priced_fitted_s", fit.priced_fitted_s},
                            {"residual", fit.residual()}}
                 .dump()
          << '\n';
    return;
  }
  const layout::Plan& p = log.plan;
  out() << fmt::format(
      "calibrate --from-step-log {}: {}, {} devices: dp={} pp={}{} tp={} m={} "
      "recompute={}{}; step {:.6g} s (median of {} logged iterations{})\n"
      "  priced with {} = {:.6g}: {:.6g} s ({:+.1f}%)\n"
      "  fitted {} = {:.6g} (source range {:.6g} … {:.6g}: {}); priced {:.6g} s, residual "
      "{:+.2f}%\n"
      "  wrote {}\n",
      a.step_log, log.format, log.world_size, p.dp, p.pp,
      p.virtual_stages > 1 ? fmt::format(" v={}", p.virtual_stages) : "",
      p.mesh[1] > 1 ? fmt::format("{}x{}", p.mesh[0], p.mesh[1]) : std::to_string(p.mesh[0]),
      p.microbatches, layout::name(p.recompute), p.sequence_parallel ? " sequence-parallel" : "",
      log.step_s, log.iteration_ms.size(), log.iteration_ms.size() > 1 ? ", the first dropped" : "",
      fit.range.constant, fit.given, fit.priced_given_s,
      100 * (fit.priced_given_s / fit.measured_s - 1), fit.range.constant, fit.fitted,
      fit.range.low, fit.range.high, fit.inside() ? "inside" : "OUTSIDE",
      fit.priced_fitted_s, 100 * fit.residual(), a.out);
}

void run_calibrate(const CalibrateArgs& a) {
  const comm::Communicator& w = world();
  const int n = w.size();
  // Global inputs first: every rank reaches the same verdict.
  MESHTP_CHECK(!a.out.empty(), "--out FILE is required");
  const std::vector<std::array<int, 2>> meshes = meshes_2d("--mesh", a.mesh, n);
  const std::vector<bench::CalibrationGroup> groups = bench::calibration_groups(meshes, n);
  // The step overhead is timed on the squarest mesh: both dims' collectives in every step.
  const std::array<int, 2> step_mesh = *std::max_element(
      meshes.begin(), meshes.end(),
      [](const auto& x, const auto& y) { return std::min(x[0], x[1]) < std::min(y[0], y[1]); });
  const std::vector<std::int64_t> sizes = parse_byte_sizes(a.sizes);
  MESHTP_CHECK(std::set<std::int64_t>(sizes.begin(), sizes.end()).size() >= 2,
               "--sizes {}: the fit needs at least 2 distinct message sizes", a.sizes);
  const std::vector<bench::GemmShape> gemm_shapes = parse_gemm_list(a.gemm);
  const std::vector<bench::ElementwiseShape> elementwise_shapes =
      parse_elementwise_list(a.elementwise);
  MESHTP_CHECK(a.seconds > 0 && a.seconds <= 60, "--seconds={} must be in (0, 60]", a.seconds);
  MESHTP_CHECK(a.repeats >= 1 && a.repeats <= 100, "--repeats={} must be in [1, 100]", a.repeats);
  std::optional<plan::Topology> base;
  if (!a.base.empty()) {
    base = plan::load_topology(a.base);
    MESHTP_CHECK(base->device_count() == n,
                 "--base topology '{}' has {} devices but this run "
                 "has {} ranks",
                 base->name, base->device_count(), n);
  }
  // The output path is rank 0's: check it now rather than after minutes of measuring.
  agree_with_rank0(w, [&] { AtomicFileWriter probe(a.out); });

  const std::vector<plan::CollectiveSeries> series =
      bench::measure_collective_series(w, groups, sizes, a.seconds, a.repeats);
  const bench::GemmRate gemm = bench::measure_gemm_rate(w, gemm_shapes, 4 * a.seconds, a.repeats);
  const bench::ElementwiseRate elementwise =
      bench::measure_elementwise_rate(w, elementwise_shapes, 2 * a.seconds, a.repeats);
  const double memory_gib = bench::memory_per_rank_gib(w);

  // Every rank holds the same samples (max over ranks), so every rank fits alike.
  const plan::CalibrationFit fit = plan::fit_calibration(series);
  plan::Topology topology = bench::calibrated_topology(
      {.base = base,
       .name = a.name.empty() && !base ? stem_of(a.out) : a.name,
       .source = fmt::format("meshtp calibrate --mesh {} --sizes {} "
                             "--elementwise {} --repeats {} on {} ranks",
                             a.mesh, a.sizes, a.elementwise, a.repeats, n),
       .gemm_sweeps = std::array<double, 2>{gemm.low_tflops, gemm.high_tflops},
       .elementwise_sweeps = std::array<double, 2>{elementwise.low_gbps, elementwise.high_gbps},
       .repeats = a.repeats},
      fit, gemm.tflops, elementwise.gbps, memory_gib, n);
  // The meshes whose two dims' collectives slow each other, at the largest size.
  const std::int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  const std::vector<bench::SharingMeasurement> sharing =
      bench::measure_dim_sharing(w, meshes, largest, 2 * a.seconds, a.repeats);
  for (const bench::SharingMeasurement& x : sharing) {
    topology.calibration.meshes.push_back({.mesh = x.mesh, .sharing = plan::round4(x.sharing)});
  }
  // Last: its prices use everything above.
  const bench::StepMeasurement steps =
      bench::measure_step_samples(w, step_mesh, topology, 2 * a.seconds, a.repeats);
  const plan::StepOverheadFit step_fit = plan::fit_step_overhead(steps.samples);
  topology.calibration.step_overhead_us = plan::round4(step_fit.step_s / plan::kUs);
  const std::string text = plan::to_json(topology).dump(2) + "\n";
  plan::parse_topology(text, a.out);  // what `meshtp plan --topology` will read
  agree_with_rank0(w, [&] { write_file_atomically(a.out, text); });

  std::ostream& os = out();
  if (a.json) {
    nlohmann::json fits = nlohmann::json::array();
    for (std::size_t i = 0; i < series.size(); ++i) {
      const plan::FitQuality& q = fit.quality[i];
      nlohmann::json samples = nlohmann::json::array();
      for (const plan::TimingSample& s : series[i].samples) {
        samples.push_back({{"bytes", s.bytes}, {"seconds", s.seconds}});
      }
      fits.push_back({{"size", q.size},
                      {"stride", q.stride},
                      {"collective", layout::name(q.collective)},
                      {"r_squared", q.r_squared},
                      {"max_rel_residual", q.max_rel_residual},
                      {"through_origin", q.through_origin},
                      {"split_identified", q.split_identified},
                      {"samples", std::move(samples)}});
    }
    nlohmann::json mesh_sharing = nlohmann::json::array();
    for (const bench::SharingMeasurement& x : sharing) {
      mesh_sharing.push_back({{"mesh", x.mesh},
                              {"dim0_s", x.dim0_s},
                              {"dim1_s", x.dim1_s},
                              {"both_s", x.both_s},
                              {"sharing", x.sharing}});
    }
    nlohmann::json step_samples = nlohmann::json::array();
    for (const plan::StepSample& x : steps.samples) {
      step_samples.push_back({{"slices", x.params.slices},
                              {"steps", x.steps},
                              {"measured_s", x.measured_s},
                              {"predicted_s", x.predicted_s}});
    }
    os << nlohmann::json{{"out", a.out},
                         {"topology", plan::to_json(topology)},
                         {"fits", std::move(fits)},
                         {"mesh_sharing", std::move(mesh_sharing)},
                         {"step_overhead",
                          {{"mesh", steps.mesh},
                           {"shape", {steps.shape.m, steps.shape.n, steps.shape.k}},
                           {"step_us", step_fit.step_s / plan::kUs},
                           {"intercept_us", step_fit.intercept_s / plan::kUs},
                           {"r_squared", step_fit.r_squared},
                           {"samples", std::move(step_samples)}}},
                         {"gemm_tflops", gemm.tflops},
                         {"elementwise_gbps", elementwise.gbps}}
              .dump()
       << '\n';
    return;
  }
  os << fmt::format(
      "calibrate: {} ranks, {} group shape(s), sizes {}; a point is the median "
      "over {} sweep(s) of the median over iterations of the max over ranks; the topology "
      "keeps each point, and the planner prices the measured times between them (the line "
      "below outside them; its residual is how far the line alone would be off)\n",
      n, groups.size(), a.sizes, a.repeats);
  os << fmt::format("{:>5} {:>6} {:<15} {:>11} {:>10} {:>10} {:>8} {:>10}  {}\n", "ranks", "stride",
                    "collective", "T_launch us", "L_sync us", "BW GB/s", "R^2", "max resid",
                    "notes");
  for (const plan::FitQuality& q : fit.quality) {
    const plan::GroupCalibration& g =
        *std::find_if(fit.groups.begin(), fit.groups.end(),
                      [&](const auto& x) { return x.size == q.size && x.stride == q.stride; });
    const plan::CollectiveFit& f = *plan::fit_slot(g, q.collective);
    std::string notes = q.split_identified ? "" : "T_launch:=0 (one step count)";
    if (q.through_origin) notes += std::string(notes.empty() ? "" : "; ") + "through origin";
    os << fmt::format("{:>5} {:>6} {:<15} {:>11.2f} {:>10.2f} {:>10.3f} {:>8.4f} {:>9.1f}%  {}\n",
                      q.size, q.stride, layout::name(q.collective), f.t_launch_us, f.l_sync_us,
                      f.bw_gbps, q.r_squared, 100 * q.max_rel_residual, notes);
  }
  os << "local GeMM (every rank at once, max over ranks):";
  for (const auto& [shape, t] : gemm.per_shape) {
    os << fmt::format(" {}x{}x{} {:.2f} ms;", shape.m, shape.n, shape.k, t * 1e3);
  }
  os << fmt::format(" {:.2f} GFLOP/s per rank\n", gemm.tflops * 1e3);
  os << "local LayerNorm + GeLU, fwd + bwd (every rank at once, max over ranks):";
  for (const bench::LocalElementwiseSample& e : elementwise.per_shape) {
    os << fmt::format(" {}x{} ln {:.2f}+{:.2f} ms, gelu {:.2f}+{:.2f} ms;", e.shape.rows,
                      e.shape.cols, e.layernorm_forward_s * 1e3, e.layernorm_backward_s * 1e3,
                      e.gelu_forward_s * 1e3, e.gelu_backward_s * 1e3);
  }
  os << fmt::format(" {:.2f} GB/s elementwise per rank\n", elementwise.gbps);
  for (const bench::SharingMeasurement& x : sharing) {
    os << fmt::format(
        "both dims at once, mesh {}x{}: all_gather of {} bytes {:.3f} ms on dim 0, "
        "{:.3f} ms on dim 1, {:.3f} ms on both: sharing {:.2f}\n",
        x.mesh[0], x.mesh[1], largest, x.dim0_s * 1e3, x.dim1_s * 1e3, x.both_s * 1e3, x.sharing);
  }
  os << fmt::format(
      "2D GeMM steps: MeshSlice OS {}x{}x{} on mesh {}x{}, measured / priced "
      "without a step cost:",
      steps.shape.m, steps.shape.n, steps.shape.k, steps.mesh[0], steps.mesh[1]);
  for (const plan::StepSample& x : steps.samples) {
    os << fmt::format(" S={} {:.2f}/{:.2f} ms;", x.params.slices, x.measured_s * 1e3,
                      x.predicted_s * 1e3);
  }
  os << fmt::format(" {:.1f} us per step (R^2 {:.3f})\n", step_fit.step_s / plan::kUs,
                    step_fit.r_squared);
  os << fmt::format(
      "wrote {}: topology '{}', {} devices, {:.3g} GiB, {:.4g} TFLOP/s and {:.4g} GB/s "
      "elementwise each, {} calibrated group(s)\nnext: meshtp plan --topology {} --devices {} "
      "--model …  |  mpirun -np {} meshtp bench plan --topology {}\n",
      a.out, topology.name, n, topology.memory_gib, topology.effective_tflops(),
      topology.effective_elementwise_gbps(), topology.calibration.groups.size(), a.out, n, n,
      a.out);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Measure collectives and GeMM on these ranks, fit the planner's ring model, "
      "write a topology file");
  c->add_option("--out", args->out, "Topology JSON file to write (atomically)")->required();
  c->add_option("--mesh", args->mesh,
                "d1xd2: calibrate that mesh's two dims; all (default): every 2D mesh of the "
                "ranks");
  c->add_option("--sizes", args->sizes,
                "Message sizes; bracket your model's messages (default 16K,64K,128K,256K,512K,"
                "1M,2M)");
  c->add_option("--base", args->base,
                "Topology preset or file to calibrate (measuring: its device count must match the "
                "ranks; required with --from-nccl-tests)");
  c->add_option("--name", args->name, "Topology name (default: --out's file stem)");
  c->add_option("--gemm", args->gemm, "Local GeMM shapes MxNxK for the FLOP rate");
  c->add_option("--elementwise", args->elementwise,
                fmt::format("Rows x cols of the LayerNorm/GeLU buffers for the elementwise rate "
                            "(default {})",
                            kElementwiseDefault));
  c->add_option("--seconds", args->seconds,
                "Target time per collective case (default 0.1; GeMM shapes get 4x)");
  c->add_option("--repeats", args->repeats,
                "Sweeps over everything; each point is the median over sweeps (default 3)");
  c->add_flag("--json", args->json, "Print one JSON object: topology, fits with samples");
  c->add_option("--from-nccl-tests", args->nccl_tests,
                "Fit nccl-tests logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
                "sendrecv_perf output) instead of measuring; needs --base. A log without its "
                "'# Collective test starting:' line must be named after the program "
                "(all_reduce_perf.log: the file's own name, not its folder's)")
      ->expected(1, -1);
  c->add_option("--from-step-log", args->step_log,
                "Fit one constant of --base's sourced ranges to a measured run's step: a "
                "Megatron-LM log (its arguments and 'elapsed time per iteration (ms)' lines) "
                "or meshtp train's --metrics file");
  c->add_option("--fit", args->fit,
                "With --from-step-log: the constant to fit, a JSON pointer of --base's ranges "
                "(default: the one that moves the step most)");
  args->min_bytes_option = c->add_option(
      "--min-bytes", args->min_bytes,
      "With --from-nccl-tests: fit the rows of this size and more (default 1M: NCCL's "
      "protocols change below)");
  args->memory_option = c->add_option(
      "--memory-gib", args->memory_gib,
      "With --from-nccl-tests: device memory, GiB (default: the base's, or the datasheet's of "
      "the GPU the logs name where the base's device does not match it)");
  args->tflops_option = c->add_option(
      "--tflops", args->tflops,
      "With --from-nccl-tests: a flat device rate, TFLOP/s (the base's GeMM model dropped; "
      "default as --memory-gib)");
  for (const char* flag :
       {"--mesh", "--sizes", "--gemm", "--elementwise", "--seconds", "--repeats"}) {
    args->measuring.push_back(c->get_option(flag));
  }
  c->callback([args] {
    // The name goes into the topology JSON and, through plan --emit, into configurations.
    if (!args->name.empty()) check_name("--name", args->name);
    for (const CLI::Option* o : {args->memory_option, args->tflops_option}) {
      MESHTP_CHECK(o->count() == 0 || !args->nccl_tests.empty(), "{} needs --from-nccl-tests",
                   o->get_name());
    }
    if (!args->step_log.empty()) {
      MESHTP_CHECK(args->nccl_tests.empty(), "--from-step-log and --from-nccl-tests fit "
                   "different things; give one");
      MESHTP_CHECK(args->min_bytes_option->count() == 0, "--min-bytes needs --from-nccl-tests");
      for (const CLI::Option* o : args->measuring) {
        MESHTP_CHECK(o->count() == 0,
                     "{} sets what calibrate measures; with --from-step-log nothing is measured",
                     o->get_name());
      }
      run_calibrate_from_step_log(*args);
      return;
    }
    MESHTP_CHECK(args->fit.empty(), "--fit needs --from-step-log");
    if (args->nccl_tests.empty()) {
      MESHTP_CHECK(args->min_bytes_option->count() == 0, "--min-bytes needs --from-nccl-tests");
      run_calibrate(*args);
      return;
    }
    for (const CLI::Option* o : args->measuring) {
      MESHTP_CHECK(o->count() == 0,
                   "{} sets what calibrate measures; with --from-nccl-tests nothing is measured",
                   o->get_name());
    }
    run_calibrate_from_nccl_tests({.logs = args->nccl_tests,
                                   .out = args->out,
                                   .base = args->base,
                                   .name = args->name,
                                   .min_bytes = args->min_bytes,
                                   .json = args->json,
                                   .memory_gib = args->memory_option->count() > 0
                                                     ? std::optional<double>(args->memory_gib)
                                                     : std::nullopt,
                                   .tflops = args->tflops_option->count() > 0
                                                 ? std::optional<double>(args->tflops)
                                                 : std::nullopt});
  });
}

}  // namespace meshtp::cli
