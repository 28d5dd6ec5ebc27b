// What `meshtp calibrate` measures on the real ranks, returned as data (the CLI fits, writes
// and prints): every group shape of the meshes' dims timed for the collectives the planner's
// ring model is fitted to, the local GeMM rate and the elementwise (LayerNorm, GeLU) rate.
//
// Protocol, the same for all three: every rank runs at once (every group of a mesh dim at
// once, as in tensor parallelism), the time of a case is the max over ranks, and the whole
// sweep runs `repeats` times with each point the median over sweeps, so a burst of load on a
// shared machine spoils one sweep's sample of a point, not the point.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/local_elementwise.hpp"
#include "bench/local_gemm.hpp"
#include "comm/communicator.hpp"
#include "parallel/gemm2d/gemm2d.hpp"
#include "plan/calibration_fit.hpp"
#include "plan/topology.hpp"

namespace meshtp::bench {

// One group shape to measure (P ranks, rank stride), and a mesh whose dim `dim` has it.
struct CalibrationGroup {
  int size = 0, stride = 1;
  std::array<int, 2> mesh{1, 1};
  int dim = 0;
};

// The distinct group shapes of the meshes' dims, first seen first: mesh d1xd2 has (d1,
// stride d2) and (d2, stride 1). Throws when there is none (a world of 1 rank).
std::vector<CalibrationGroup> calibration_groups(const std::vector<std::array<int, 2>>& meshes,
                                                 int ranks);

// all_reduce, all_gather and reduce_scatter (plan::kFitCollectives) at every size, per group:
// one series per (group, collective), samples (bytes as sent, median seconds).
std::vector<plan::CollectiveSeries> measure_collective_series(
    const comm::Communicator& world, const std::vector<CalibrationGroup>& groups,
    const std::vector<std::int64_t>& sizes, double seconds, int repeats);

struct GemmRate {
  double tflops = 0;                                    // Σ FLOPs / Σ per-shape time
  // The slowest and the fastest sweep's Σ FLOPs / Σ time (the range calibrated_topology
  // writes for calibration.gemm_tflops).
  double low_tflops = 0, high_tflops = 0;
  std::vector<std::pair<GemmShape, double>> per_shape;  // shape, median of max over ranks
};
GemmRate measure_gemm_rate(const comm::Communicator& world, const std::vector<GemmShape>& shapes,
                           double seconds, int repeats);

struct ElementwiseRate {
  double gbps = 0;  // Σ bytes touched (the planner's reads + writes per element) / Σ time
  double low_gbps = 0, high_gbps = 0;  // the slowest and the fastest sweep's
  std::vector<LocalElementwiseSample> per_shape;  // medians over sweeps of max over ranks
};
ElementwiseRate measure_elementwise_rate(const comm::Communicator& world,
                                         const std::vector<ElementwiseShape>& shapes,
                                         double seconds, int repeats);

// The runtime's per-step cost (plan::fit_step_overhead): one MeshSlice OS 2D GeMM on `mesh`
// — each rank's output block 256×256, k = 256·d1·d2 — at S = 1, 4, 16, 64, validated against
// Collective 2D, each S timed `repeats` times (median of the max over ranks) at the runtime's
// default progress splits, and priced on `priced` (the topology calibrate is writing, before
// the overhead is set) by plan::gemm2d_estimate without it. Throws if a case's result is wrong.
struct StepMeasurement {
  parallel::Gemm2dShape shape;
  std::array<int, 2> mesh{1, 1};
  std::vector<plan::StepSample> samples = {};
};
StepMeasurement measure_step_samples(const comm::Communicator& world, std::array<int, 2> mesh,
                                     const plan::Topology& priced, double seconds, int repeats);

// Each mesh of `meshes` whose dims both have ≥ 2 ranks: an all_gather of `bytes` on dim 0
// alone, on dim 1 alone, and on both at once (every group of the mesh active; non-blocking,
// issued together), each validated once, then timed as every collective is
// (time_max_over_ranks: about `seconds` of iterations), median over `repeats` sweeps; sharing
// by plan::dim_sharing.
struct SharingMeasurement {
  std::array<int, 2> mesh{1, 1};
  double dim0_s = 0, dim1_s = 0, both_s = 0;
  double sharing = 0;
};
std::vector<SharingMeasurement> measure_dim_sharing(const comm::Communicator& world,
                                                    const std::vector<std::array<int, 2>>& meshes,
                                                    std::int64_t bytes, double seconds,
                                                    int repeats);

// The topology file calibrate writes. With `base`, that topology with its calibration
// replaced (named `name`, or base's name + "-calibrated"). Without, one flat level of n ranks
// whose group bandwidth is the slowest fitted link and whose latency the largest fitted
// l_sync (what an uncalibrated mesh dim falls back to), memory_gib per device, the measured
// GeMM and elementwise rates. Both rates also go into the calibration, where they override
// the device's; every fitted number is rounded to 4 significant digits.
struct CalibratedTopology {
  std::optional<plan::Topology> base;
  std::string name;    // required without base
  std::string source;  // how it was measured (the command line)
  // The slowest and fastest sweeps' rates, when measured: written as the sourced ranges
  // (plan/bands.hpp) of calibration.gemm_tflops and calibration.elementwise_gbps, so that a
  // step measured on this machine can be fitted (calibrate --from-step-log).
  std::optional<std::array<double, 2>> gemm_sweeps, elementwise_sweeps;
  int repeats = 0;
};
plan::Topology calibrated_topology(const CalibratedTopology& c, const plan::CalibrationFit& fit,
                                   double gemm_tflops, double elementwise_gbps, double memory_gib,
                                   int n);

// Host memory divided among the ranks on that host, minimum over hosts, GiB (every rank).
double memory_per_rank_gib(const comm::Communicator& world);

}  // namespace meshtp::bench
