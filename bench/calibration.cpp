#include "bench/calibration.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "bench/collectives.hpp"
#include "bench/gemm2d.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "mesh/device_mesh.hpp"
#include "plan/elementwise.hpp"
#include "plan/gemm2d_cost.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::bench {
namespace {

constexpr const auto& kMeasured = plan::kFitCollectives;
using plan::round4;

}  // namespace

std::vector<CalibrationGroup> calibration_groups(const std::vector<std::array<int, 2>>& meshes,
                                                 int ranks) {
  std::vector<CalibrationGroup> groups;
  for (const auto& m : meshes) {
    const CalibrationGroup dims[2] = {{m[0], m[1], m, 0}, {m[1], 1, m, 1}};
    for (const CalibrationGroup& g : dims) {
      const bool seen = std::any_of(groups.begin(), groups.end(), [&](const auto& o) {
        return o.size == g.size && o.stride == g.stride;
      });
      if (g.size > 1 && !seen) groups.push_back(g);
    }
  }
  MESHTP_CHECK(!groups.empty(),
               "calibrate needs at least 2 ranks: on {} rank(s) there is no "
               "collective to measure (run it under mpirun -np N)",
               ranks);
  return groups;
}

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

std::vector<plan::CollectiveSeries> measure_collective_series(
    const comm::Communicator& world, const std::vector<CalibrationGroup>& groups,
    const std::vector<std::int64_t>& sizes, double seconds, int repeats) {
  CollectivesOptions options;
  options.target_seconds_per_case = seconds;
  std::vector<mesh::DeviceMesh> meshes;
  for (const CalibrationGroup& g : groups) {
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
          const CollectiveSample m = time_collective(meshes[g].dim_comm(groups[g].dim), world,
                                                     kMeasured[c], sizes[i], options);
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

GemmRate measure_gemm_rate(const comm::Communicator& world, const std::vector<GemmShape>& shapes,
                           double seconds, int repeats) {
  std::vector<std::vector<double>> times(shapes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      world.barrier();
      double t = time_local_gemm(shapes[i], seconds).meshtp_seconds;
      world.all_reduce(std::span<double>(&t, 1), comm::ReduceOp::kMax);
      times[i].push_back(t);
    }
  }
  GemmRate rate;
  double flops = 0, time = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const GemmShape& shape = shapes[i];
    flops += 2.0 * static_cast<double>(shape.m) * static_cast<double>(shape.n) *
             static_cast<double>(shape.k);
    time += median(times[i]);
    rate.per_shape.push_back({shape, median(times[i])});
  }
  rate.tflops = flops / time / 1e12;
  rate.low_tflops = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    double sweep = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) sweep += times[i][static_cast<std::size_t>(r)];
    rate.low_tflops = std::min(rate.low_tflops, flops / sweep / 1e12);
    rate.high_tflops = std::max(rate.high_tflops, flops / sweep / 1e12);
  }
  return rate;
}

std::vector<SharingMeasurement> measure_dim_sharing(const comm::Communicator& world,
                                                    const std::vector<std::array<int, 2>>& meshes,
                                                    std::int64_t bytes, double seconds,
                                                    int repeats) {
  std::vector<SharingMeasurement> out;
  for (const auto& m : meshes) {
    if (m[0] < 2 || m[1] < 2) continue;
    const mesh::DeviceMesh mesh(world, {m[0], m[1]});
    // Per dim: this rank's share and the gathered buffer (whole floats; bytes rounded down).
    std::array<std::vector<float>, 2> send, recv;
    for (int d = 0; d < 2; ++d) {
      const std::int64_t per_rank = std::max<std::int64_t>(1, bytes / 4 / m[d]);
      send[d].assign(static_cast<std::size_t>(per_rank),
                     static_cast<float>(mesh.dim_comm(d).rank()));
      recv[d].assign(static_cast<std::size_t>(per_rank * m[d]), 0.0f);
    }
    const auto run = [&](bool dim0, bool dim1) {
      comm::Request r[2];
      if (dim0) r[0] = mesh.dim_comm(0).iall_gather<float>(send[0], recv[0]);
      if (dim1) r[1] = mesh.dim_comm(1).iall_gather<float>(send[1], recv[1]);
      if (dim0) r[0].wait();
      if (dim1) r[1].wait();
    };
    // Validation: member j's share holds j (its rank in the dim's group).
    run(true, true);
    for (int d = 0; d < 2; ++d) {
      for (std::size_t i = 0; i < recv[d].size(); ++i) {
        const auto want = static_cast<float>(i / send[d].size());
        MESHTP_CHECK(recv[d][i] == want,
                     "calibrate: mesh {}x{} dim {}: all_gather gave {} at {}, "
                     "expected {}",
                     m[0], m[1], d, recv[d][i], i, want);
      }
    }
    const CollectivesOptions limits;  // the collectives' iteration bounds
    const auto time = [&](bool dim0, bool dim1) {
      return time_max_over_ranks(
                 world, [&] { run(dim0, dim1); }, seconds, limits.min_iterations,
                 limits.max_iterations)
          .median_seconds;
    };
    std::array<std::vector<double>, 3> sweeps;
    for (int r = 0; r < repeats; ++r) {
      sweeps[0].push_back(time(true, false));
      sweeps[1].push_back(time(false, true));
      sweeps[2].push_back(time(true, true));
    }
    SharingMeasurement x{.mesh = m,
                         .dim0_s = median(sweeps[0]),
                         .dim1_s = median(sweeps[1]),
                         .both_s = median(sweeps[2])};
    x.sharing = plan::dim_sharing(x.both_s, x.dim0_s, x.dim1_s);
    out.push_back(x);
  }
  return out;
}

StepMeasurement measure_step_samples(const comm::Communicator& world, std::array<int, 2> mesh,
                                     const plan::Topology& priced, double seconds, int repeats) {
  const auto [nr, nc] = mesh;
  constexpr std::int64_t kBlock = 256;
  StepMeasurement out{.shape = {.m = kBlock * nr, .n = kBlock * nc, .k = kBlock * nr * nc},
                      .mesh = mesh};
  Gemm2dBenchOptions o{.shape = out.shape,
                       .nr = nr,
                       .nc = nc,
                       .dataflow = layout::Dataflow::kOS,
                       .algos = {layout::Algorithm::kMeshSlice},
                       .slices = {1, 4, 16, 64},
                       .progress_splits = {parallel::Gemm2dOptions{}.progress_splits},
                       .with_1d = false,
                       .with_scalapack = false,
                       .with_single_rank = false,
                       .target_seconds = seconds};
  (void)plan_gemm2d_bench(o);
  std::vector<std::vector<double>> times;
  std::vector<Gemm2dSample> cases;
  for (int r = 0; r < repeats; ++r) {
    cases = run_gemm2d_bench(world, o);
    times.resize(cases.size());
    for (std::size_t i = 0; i < cases.size(); ++i) {
      MESHTP_CHECK(!(cases[i].error > 1e-4),
                   "calibrate: MeshSlice {}x{} {} is wrong: max relative "
                   "error {} against Collective 2D",
                   nr, nc, cases[i].name, cases[i].error);
      times[i].push_back(cases[i].median_seconds);
    }
  }
  const plan::MeshLinks links = plan::mesh_links(priced, nr, nc);
  const layout::Gemm2dShape shape{.dataflow = layout::Dataflow::kOS,
                                  .m = out.shape.m,
                                  .n = out.shape.n,
                                  .k = out.shape.k,
                                  .nr = nr,
                                  .nc = nc,
                                  .element_bytes = 4};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const layout::Gemm2dParams& params = cases[i].options.params;
    const plan::PipelineEstimate e = plan::gemm2d_estimate(layout::Algorithm::kMeshSlice, shape,
                                                           params, links, priced.gemm_model());
    out.samples.push_back({.params = params,
                           .steps = e.iterations,
                           .measured_s = median(times[i]),
                           .predicted_s = e.total_s});
  }
  return out;
}

// Same protocol as the GeMM: all ranks at once, max over ranks, median over sweeps.
ElementwiseRate measure_elementwise_rate(const comm::Communicator& world,
                                         const std::vector<ElementwiseShape>& shapes,
                                         double seconds, int repeats) {
  // times[shape][kernel][repeat], kernels: ln fwd, ln bwd, gelu fwd, gelu bwd
  std::vector<std::array<std::vector<double>, 4>> times(shapes.size());
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      world.barrier();
      const LocalElementwiseSample s = time_local_elementwise(shapes[i], seconds);
      std::array<double, 4> t{s.layernorm_forward_s, s.layernorm_backward_s, s.gelu_forward_s,
                              s.gelu_backward_s};
      world.all_reduce(std::span<double>(t), comm::ReduceOp::kMax);
      for (std::size_t k = 0; k < 4; ++k) times[i][k].push_back(t[k]);
    }
  }
  constexpr std::array<double, 4> kTouches{plan::kLayerNormForwardTouches,
                                           plan::kLayerNormBackwardTouches,
                                           plan::kGeluForwardTouches, plan::kGeluBackwardTouches};
  ElementwiseRate rate;
  double bytes = 0, time = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const double elements = static_cast<double>(shapes[i].rows) * shapes[i].cols;
    LocalElementwiseSample s{.shape = shapes[i]};
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
  rate.low_gbps = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    double sweep = 0;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      for (std::size_t k = 0; k < 4; ++k) sweep += times[i][k][static_cast<std::size_t>(r)];
    }
    rate.low_gbps = std::min(rate.low_gbps, bytes / sweep / 1e9);
    rate.high_gbps = std::max(rate.high_gbps, bytes / sweep / 1e9);
  }
  return rate;
}

plan::Topology calibrated_topology(const CalibratedTopology& c, const plan::CalibrationFit& fit,
                                   double gemm_tflops, double elementwise_gbps, double memory_gib,
                                   int n) {
  const std::optional<plan::Topology>& base = c.base;
  plan::Topology t;
  if (base) {
    t = *base;
    t.name = c.name.empty() ? base->name + "-calibrated" : c.name;
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
    t.name = c.name;
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
  plan::round_fits(groups);
  t.calibration = {.source = c.source,
                   .gemm_tflops = round4(gemm_tflops),
                   .elementwise_gbps = round4(elementwise_gbps),
                   .groups = std::move(groups)};
  // The value (from the per-shape medians) need not lie between the sweeps' extremes: the
  // range spans it too. Rounded the same way (monotone), the ends still bracket it.
  const auto add_range = [&](const char* pointer, const std::array<double, 2>& sweeps,
                             double value, const char* what) {
    std::erase_if(t.ranges, [&](const plan::ConstantRange& r) { return r.constant == pointer; });
    t.ranges.push_back(
        {.constant = pointer,
         .low = round4(std::min(sweeps[0], value)),
         .high = round4(std::max(sweeps[1], value)),
         .source = fmt::format("{} and {}: the slowest and the fastest of {} sweep(s) of the {} "
                               "rate measured by {} (the value: their median)",
                               round4(std::min(sweeps[0], value)),
                               round4(std::max(sweeps[1], value)), c.repeats, what, c.source)});
  };
  if (c.gemm_sweeps) add_range("/calibration/gemm_tflops", *c.gemm_sweeps, gemm_tflops, "local GeMM");
  if (c.elementwise_sweeps) {
    add_range("/calibration/elementwise_gbps", *c.elementwise_sweeps, elementwise_gbps,
              "LayerNorm + GeLU");
  }
  return t;
}

}  // namespace meshtp::bench
