// CollectiveKind benchmark: latency and bandwidth of all_reduce, all_gather, reduce_scatter and
// broadcast on each mesh dim — the raw input of the planner's calibration.
//
// Method: for each mesh dim, every group of that dim runs the collective at the same time
// (as tensor parallelism does). Each case is validated once (exact expected values), warmed
// up, then timed between barriers; one sample is the max over all ranks of the elapsed time,
// and a case reports the median sample.
//
// Message size `bytes` is the buffer a user hands over: all_reduce / broadcast the whole
// buffer, all_gather the gathered output, reduce_scatter the input. Bandwidths follow
// nccl-tests: algbw = bytes / t; busbw = algbw · f with f = 2(P−1)/P for all_reduce,
// (P−1)/P for all_gather and reduce_scatter, 1 for broadcast — busbw is comparable with the
// link bandwidth whatever the group size.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "layout/vocabulary.hpp"
#include "mesh/device_mesh.hpp"
#include "plan/calibration_fit.hpp"

namespace meshtp::bench {

using layout::CollectiveKind;
// The collectives benchmarked (and calibrated: the first three).
inline constexpr CollectiveKind kAllCollectives[] = {
    CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
    CollectiveKind::kBroadcast};

// busbw = algbw · bus_factor(collective, P): one formula, the planner's (calibration_fit).
using plan::bus_factor;

struct CollectivesOptions {
  std::vector<std::int64_t> sizes;            // bytes; default_collective_sizes() if empty
  std::vector<CollectiveKind> collectives{std::begin(kAllCollectives), std::end(kAllCollectives)};
  double target_seconds_per_case = 0.2;       // iterations chosen to take about this long
  int min_iterations = 3;
  int max_iterations = 200;
};

// 8 KiB, 32 KiB, …, ×4 … up to 64 MiB inclusive.
std::vector<std::int64_t> default_collective_sizes();

struct CollectiveSample {
  int mesh_dim = 0;
  int group_size = 1;
  CollectiveKind collective = CollectiveKind::kAllReduce;
  std::int64_t bytes = 0;  // after rounding down to a multiple of 4·group_size
  int iterations = 0;
  double median_seconds = 0.0;
  double algbw_gbps = 0.0;  // GB/s = 1e9 bytes/s
  double busbw_gbps = 0.0;
};

// CollectiveKind over the mesh. Mesh dims of size 1 are skipped (no communication).
std::vector<CollectiveSample> run_collectives(const mesh::DeviceMesh& mesh,
                                              const CollectivesOptions& options);

// The timing protocol of every communication measurement: `run` once to warm up (its time, max
// over `everyone`, sizes the count to about `target_seconds`, clamped to [min_iterations,
// max_iterations]), then that many more, each after a barrier; the median of the max over
// `everyone`'s ranks. Every rank calls it alike and gets the same answer.
struct TimedRuns {
  int iterations = 0;
  double median_seconds = 0;
};
TimedRuns time_max_over_ranks(const comm::Communicator& everyone, const std::function<void()>& run,
                              double target_seconds, int min_iterations, int max_iterations);

// Times one collective of `bytes` on `group` while every group of the mesh does the same;
// the result is the median over `iterations` of the max over `everyone`'s ranks.
// Throws if the collective's result is wrong (the validation run).
CollectiveSample time_collective(const comm::Communicator& group,
                                 const comm::Communicator& everyone, CollectiveKind collective,
                                 std::int64_t bytes, const CollectivesOptions& options);

}  // namespace meshtp::bench
