// meshtp calibrate — measure this cluster's collectives and local GeMM rate on the real
// ranks, fit the planner's ring model to them, and write a topology file the planner reads:
//
//   mpirun -np N meshtp calibrate --out my-cluster.json [--mesh d1xd2|all] [--sizes 16K,…]
//          [--base TOPOLOGY] [--name NAME] [--gemm MxNxK,…] [--elementwise RxC,…]
//          [--seconds S] [--repeats R] [--json]
//   meshtp plan --topology my-cluster.json --model … --devices N
//
// What is measured. Every group shape (P ranks, stride) of the mesh dims: mesh d1xd2 has
// (d1, stride d2) and (d2, stride 1); `--mesh all` (the default) takes every 2D mesh of N
// ranks, so each mesh the planner can pick is calibrated (for N = 4: (4,1), (2,2), (2,1)).
// For each shape, all_reduce / all_gather / reduce_scatter at every --size, with every group
// of that dim running at once (as in tensor parallelism), through bench::time_collective:
// validated, warmed up, median over iterations of the max over ranks. Then every rank runs
// the --gemm shapes at once (bench::time_local_gemm); rate = Σ FLOPs / Σ (max over ranks).
// Then every rank runs the runtime's LayerNorm and GeLU, forward and backward, over each
// --elementwise [rows, cols] at once (bench::time_local_elementwise); the elementwise rate
// is Σ bytes touched / Σ (max over ranks), bytes counted with the planner's reads + writes
// per element (plan/elementwise.hpp: LayerNorm 3 + 6, GeLU 2 + 5, × 4 bytes), so the
// planner gets back exactly the time measured here for these ops.
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
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "bench/collectives.hpp"
#include "bench/local_elementwise.hpp"
#include "bench/local_gemm.hpp"
#include "cli/commands.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/stats.hpp"
#include "mesh/device_mesh.hpp"
#include "plan/calibration_fit.hpp"
#include "plan/elementwise.hpp"
#include "plan/planner.hpp"
#include "plan/presets.hpp"

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
};

// One group shape to measure, and the mesh dim that has it.
struct GroupToMeasure {
  int size = 0, stride = 1;
  std::array<int, 2> mesh{1, 1};
  int dim = 0;
};

std::vector<GroupToMeasure> groups_of(const std::string& text, int n) {
  std::vector<std::array<int, 2>> meshes;
  if (text == "all") {
    meshes = plan::enumerate_meshes(n);
  } else {
    const std::vector<int> shape = parse_mesh_shape(text);
    MESHTP_CHECK(shape.size() == 2, "--mesh {}: calibrate takes a 2D mesh like 2x2, or all", text);
    MESHTP_CHECK(static_cast<std::int64_t>(shape[0]) * shape[1] == n,
                 "--mesh {} has {} ranks but the world has {}: choose mesh sizes whose product "
                 "is {}",
                 text, static_cast<std::int64_t>(shape[0]) * shape[1], n, n);
    meshes.push_back({shape[0], shape[1]});
  }
  std::vector<GroupToMeasure> groups;
  for (const auto& m : meshes) {
    const GroupToMeasure dims[2] = {{m[0], m[1], m, 0}, {m[1], 1, m, 1}};
    for (const GroupToMeasure& g : dims) {
      const bool seen = std::any_of(groups.begin(), groups.end(), [&](const auto& o) {
        return o.size == g.size && o.stride == g.stride;
      });
      if (g.size > 1 && !seen) groups.push_back(g);
    }
  }
  MESHTP_CHECK(!groups.empty(),
               "calibrate needs at least 2 ranks: on {} rank(s) there is no "
               "collective to measure (run it under mpirun -np N)",
               n);
  return groups;
}

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

// Host memory divided among the ranks on that host, minimum over hosts, GiB.
double memory_per_rank_gib(const comm::Communicator& world) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const auto id = static_cast<std::int64_t>(std::hash<std::string>{}(host) >> 1);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(world.size()));
  world.all_gather(std::span<const std::int64_t>(&id, 1), std::span<std::int64_t>(ids));
  const auto local = std::count(ids.begin(), ids.end(), id);
  const double bytes =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  // min over ranks = −max(−x); the same on every rank.
  double minus_gib = -bytes / static_cast<double>(local) / (1024.0 * 1024.0 * 1024.0);
  world.all_reduce(std::span<double>(&minus_gib, 1), comm::ReduceOp::kMax);
  return -minus_gib;
}

constexpr const auto& kMeasured = plan::kFitCollectives;

// The whole sweep `repeats` times, then the median per point: on a shared machine a burst of
// someone else's load then spoils one sweep's sample of a point, not the point.
std::vector<plan::CollectiveSeries> measure_collectives(const comm::Communicator& world,
                                                        const std::vector<GroupToMeasure>& groups,
                                                        const std::vector<std::int64_t>& sizes,
                                                        double seconds, int repeats) {
  bench::CollectivesOptions options;
  options.target_seconds_per_case = seconds;
  std::vector<mesh::DeviceMesh> meshes;
  for (const GroupToMeasure& g : groups) {
    meshes.emplace_back(world, std::vector{g.mesh[0], g.mesh[1]});
  }
  // times[series][size][repeat]
  std::vector<std::vector<std::vector<double>>> times(
      groups.size() * std::size(kMeasured), std::vector<std::vector<double>>(sizes.size()));
  std::vector<std::int64_t> rounded(times.size() * sizes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t c = 0; c < std::size(kMeasured); ++c) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
          const bench::CollectiveSample m = bench::time_collective(
              meshes[g].dim_comm(groups[g].dim), world, kMeasured[c], sizes[i], options);
          const std::size_t k = g * std::size(kMeasured) + c;
          times[k][i].push_back(m.median_seconds);
          rounded[k * sizes.size() + i] = m.bytes;
        }
      }
    }
  }
  std::vector<plan::CollectiveSeries> series;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (std::size_t c = 0; c < std::size(kMeasured); ++c) {
      const std::size_t k = g * std::size(kMeasured) + c;
      plan::CollectiveSeries s{.size = groups[g].size,
                               .stride = groups[g].stride,
                               .collective = kMeasured[c],
                               .samples = {}};
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        s.samples.push_back({rounded[k * sizes.size() + i], median(times[k][i])});
      }
      series.push_back(std::move(s));
    }
  }
  return series;
}

struct GemmRate {
  double tflops = 0;
  std::vector<std::pair<bench::GemmShape, double>> per_shape;  // shape, median of max over ranks
};

GemmRate measure_gemm(const comm::Communicator& world, const std::vector<bench::GemmShape>& shapes,
                      double seconds, int repeats) {
  std::vector<std::vector<double>> times(shapes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      world.barrier();
      double t = bench::time_local_gemm(shapes[i], seconds).meshtp_seconds;
      world.all_reduce(std::span<double>(&t, 1), comm::ReduceOp::kMax);
      times[i].push_back(t);
    }
  }
  GemmRate rate;
  double flops = 0, time = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const bench::GemmShape& shape = shapes[i];
    flops += 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
             static_cast<double>(shape.k);
    time += median(times[i]);
    rate.per_shape.push_back({shape, median(times[i])});
  }
  rate.tflops = flops / time / 1e12;
  return rate;
}

struct ElementwiseRate {
  double gbps = 0;
  std::vector<bench::LocalElementwiseSample> per_shape;  // medians over sweeps of max over ranks
};

// Same protocol as the GeMM: all ranks at once, max over ranks, median over sweeps.
ElementwiseRate measure_elementwise(const comm::Communicator& world,
                                    const std::vector<bench::ElementwiseShape>& shapes,
                                    double seconds, int repeats) {
  // times[shape][kernel][repeat], kernels: ln fwd, ln bwd, gelu fwd, gelu bwd
  std::vector<std::array<std::vector<double>, 4>> times(shapes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      world.barrier();
      const bench::LocalElementwiseSample s = bench::time_local_elementwise(shapes[i], seconds);
      std::array<double, 4> t{s.layernorm_forward_s, s.layernorm_backward_s, s.gelu_forward_s,
                              s.gelu_backward_s};
      world.all_reduce(std::span<double>(t), comm::ReduceOp::kMax);
      for (std::size_t k = 0; k < 4; ++k) times[i][k].push_back(t[k]);
    }
  }
  constexpr std::array<double, 4> kTouches{
      plan::kLayerNormForwardTouches, plan::kLayerNormBackwardTouches,
      plan::kGeluForwardTouches, plan::kGeluBackwardTouches};
  ElementwiseRate rate;
  double bytes = 0, time = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const double elements = static_cast<double>(shapes[i].rows) * shapes[i].cols;
    bench::LocalElementwiseSample s{.shape = shapes[i]};
    double* fields[4] = {&s.layernorm_forward_s, &s.layernorm_backward_s, &s.gelu_forward_s,
                         &s.gelu_backward_s};
    for (std::size_t k = 0; k < 4; ++k) {
      *fields[k] = median(times[i][k]);
      bytes += elements * kTouches[k] * sizeof(float);
      time += *fields[k];
    }
    rate.per_shape.push_back(s);
  }
  rate.gbps = bytes / time / 1e9;
  return rate;
}

std::string stem_of(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// x to 4 significant digits: the file is for people too, and the measurements are noisier.
double round4(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::abs(x))));
  return std::round(x * scale) / scale;
}

plan::Topology make_topology(const CalibrateArgs& a, const std::optional<plan::Topology>& base,
                             const plan::CalibrationFit& fit, double gemm_tflops,
                             double elementwise_gbps, double memory_gib, int n) {
  plan::Topology t;
  if (base) {
    t = *base;
    t.name = a.name.empty() ? base->name + "-calibrated" : a.name;
  } else {
    // The slowest link and the largest latencies: what an uncalibrated dim falls back to.
    double bw = std::numeric_limits<double>::infinity(), l_sync = 0, launch = 0;
    for (const plan::GroupCalibration& g : fit.groups) {
      for (const auto* f : {&g.all_reduce, &g.all_gather, &g.reduce_scatter}) {
        if (!*f) continue;
        bw = std::min(bw, (*f)->bw_gbps);
        l_sync = std::max(l_sync, (*f)->l_sync_us);
        launch = std::max(launch, (*f)->t_launch_us);
      }
    }
    t.name = a.name.empty() ? stem_of(a.out) : a.name;
    t.description = fmt::format(
        "measured by meshtp calibrate on {} ranks; one flat level (the "
        "slowest fitted link) for uncalibrated mesh dims",
        n);
    t.memory_gib = std::floor(memory_gib * 10) / 10;
    t.tflops = round4(gemm_tflops);
    t.elementwise_gbps = round4(elementwise_gbps);
    t.launch_us = round4(launch);
    plan::Level level;
    level.name = "rank";
    level.members = n;
    level.group_gbps = round4(bw);
    level.latency_us = round4(l_sync);
    t.levels = {level};
  }
  std::vector<plan::GroupCalibration> groups = fit.groups;
  for (plan::GroupCalibration& g : groups) {
    for (auto* f : {&g.all_reduce, &g.all_gather, &g.reduce_scatter}) {
      if (!*f) continue;
      (*f)->t_launch_us = round4((*f)->t_launch_us);
      (*f)->l_sync_us = round4((*f)->l_sync_us);
      (*f)->bw_gbps = round4((*f)->bw_gbps);
    }
  }
  t.calibration = {.source = fmt::format("meshtp calibrate --mesh {} --sizes {} --elementwise "
                                         "{} --repeats {} on {} ranks",
                                         a.mesh, a.sizes, a.elementwise, a.repeats, n),
                   .gemm_tflops = round4(gemm_tflops),
                   .elementwise_gbps = round4(elementwise_gbps),
                   .groups = std::move(groups)};
  return t;
}

void run_calibrate(const CalibrateArgs& a) {
  const comm::Communicator& w = world();
  const int n = w.size();
  // Global inputs first: every rank reaches the same verdict.
  MESHTP_CHECK(!a.out.empty(), "--out FILE is required");
  const std::vector<GroupToMeasure> groups = groups_of(a.mesh, n);
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
      measure_collectives(w, groups, sizes, a.seconds, a.repeats);
  const GemmRate gemm = measure_gemm(w, gemm_shapes, 4 * a.seconds, a.repeats);
  const ElementwiseRate elementwise =
      measure_elementwise(w, elementwise_shapes, 2 * a.seconds, a.repeats);
  const double memory_gib = memory_per_rank_gib(w);

  // Every rank holds the same samples (max over ranks), so every rank fits alike.
  const plan::CalibrationFit fit = plan::fit_calibration(series);
  const plan::Topology topology =
      make_topology(a, base, fit, gemm.tflops, elementwise.gbps, memory_gib, n);
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
    os << nlohmann::json{{"out", a.out},
                         {"topology", plan::to_json(topology)},
                         {"fits", std::move(fits)},
                         {"gemm_tflops", gemm.tflops},
                         {"elementwise_gbps", elementwise.gbps}}
              .dump()
       << '\n';
    return;
  }
  os << fmt::format(
      "calibrate: {} ranks, {} group shape(s), sizes {}; a point is the median "
      "over {} sweep(s) of the median over iterations of the max over ranks\n",
      n, groups.size(), a.sizes, a.repeats);
  os << fmt::format("{:>5} {:>6} {:<15} {:>11} {:>10} {:>10} {:>8} {:>10}  {}\n", "ranks", "stride",
                    "collective", "T_launch us", "L_sync us", "BW GB/s", "R^2", "max resid",
                    "notes");
  for (const plan::FitQuality& q : fit.quality) {
    const plan::GroupCalibration& g =
        *std::find_if(fit.groups.begin(), fit.groups.end(),
                      [&](const auto& x) { return x.size == q.size && x.stride == q.stride; });
    const auto& f = q.collective == layout::CollectiveKind::kAllReduce   ? *g.all_reduce
                    : q.collective == layout::CollectiveKind::kAllGather ? *g.all_gather
                                                                         : *g.reduce_scatter;
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
                "Topology preset or file to calibrate (its device count must match the ranks)");
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
  c->callback([args] { run_calibrate(*args); });
}

}  // namespace meshtp::cli
