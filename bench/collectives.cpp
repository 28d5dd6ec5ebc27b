#include "bench/collectives.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/simulation.hpp"
#include "core/stats.hpp"

namespace meshtp::bench {
namespace {

using comm::Communicator;

// Buffers of one case, sized once; every iteration reuses them.
struct Buffers {
  std::vector<float> send;
  std::vector<float> recv;
};

Buffers make_buffers(CollectiveKind c, std::int64_t elements, int p) {
  const auto n = static_cast<std::size_t>(elements);
  const auto per_rank = n / static_cast<std::size_t>(p);
  switch (c) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kBroadcast: return {std::vector<float>(n), {}};
    case CollectiveKind::kAllGather: return {std::vector<float>(per_rank), std::vector<float>(n)};
    case CollectiveKind::kReduceScatter:
      return {std::vector<float>(n), std::vector<float>(per_rank)};
    default: fail("bench: {} is not benchmarked", c);
  }
}

void run_once(const Communicator& group, CollectiveKind c, Buffers& b) {
  switch (c) {
    case CollectiveKind::kAllReduce: group.all_reduce(std::span<float>(b.send)); return;
    case CollectiveKind::kBroadcast: group.broadcast(std::span<float>(b.send), 0); return;
    case CollectiveKind::kAllGather:
      group.all_gather(std::span<const float>(b.send), std::span<float>(b.recv));
      return;
    case CollectiveKind::kReduceScatter:
      group.reduce_scatter(std::span<const float>(b.send), std::span<float>(b.recv));
      return;
    default: fail("bench: {} is not benchmarked", c);
  }
}

// Fill with rank + 1 everywhere, run once, check the exact result.
void validate(const Communicator& group, CollectiveKind c, Buffers& b) {
  const float mine = static_cast<float>(group.rank() + 1);
  std::fill(b.send.begin(), b.send.end(), mine);
  run_once(group, c, b);
  const int p = group.size();
  const float sum = static_cast<float>(p * (p + 1) / 2);
  bool ok = true;
  switch (c) {
    case CollectiveKind::kAllReduce:
      ok = std::all_of(b.send.begin(), b.send.end(), [&](float v) { return v == sum; });
      break;
    case CollectiveKind::kBroadcast:
      ok = std::all_of(b.send.begin(), b.send.end(), [](float v) { return v == 1.0f; });
      break;
    case CollectiveKind::kReduceScatter:
      ok = std::all_of(b.recv.begin(), b.recv.end(), [&](float v) { return v == sum; });
      break;
    case CollectiveKind::kAllGather: {
      const std::size_t per_rank = b.send.size();
      for (std::size_t i = 0; i < b.recv.size() && ok; ++i) {
        ok = b.recv[i] == static_cast<float>(i / per_rank + 1);
      }
      break;
    }
    default: ok = false;
  }
  MESHTP_CHECK(ok, "bench: {} on a group of {} returned wrong values: the MPI installation is "
               "broken", name(c), p);
}

double max_over(const Communicator& everyone, double seconds) {
  everyone.all_reduce(std::span<double>(&seconds, 1), comm::ReduceOp::kMax);
  return seconds;
}

}  // namespace

std::vector<std::int64_t> default_collective_sizes() {
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = 8 << 10; s < (64 << 20); s *= 4) sizes.push_back(s);
  sizes.push_back(64 << 20);
  return sizes;
}

TimedRuns time_max_over_ranks(const Communicator& everyone, const std::function<void()>& run,
                              double target_seconds, int min_iterations, int max_iterations) {
  everyone.barrier();
  double start = now_seconds();
  run();  // warm-up, also sizes the iteration count
  const double warm = max_over(everyone, now_seconds() - start);
  TimedRuns t;
  t.iterations = std::clamp(static_cast<int>(std::ceil(target_seconds / std::max(warm, 1e-7))),
                            min_iterations, max_iterations);
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(t.iterations));
  for (int it = 0; it < t.iterations; ++it) {
    everyone.barrier();
    start = now_seconds();
    run();
    samples.push_back(max_over(everyone, now_seconds() - start));
  }
  t.median_seconds = median(samples);
  return t;
}

CollectiveSample time_collective(const Communicator& group, const Communicator& everyone,
                                 CollectiveKind collective, std::int64_t bytes,
                                 const CollectivesOptions& options) {
  const int p = group.size();
  // Whole float elements, divisible by the group size.
  const std::int64_t unit = 4 * static_cast<std::int64_t>(p);
  const std::int64_t rounded = std::max(unit, bytes / unit * unit);
  Buffers buffers = make_buffers(collective, rounded / 4, p);

  // Simulated devices in charged mode move no values (core/simulation.hpp): nothing to check.
  if (!simhooks::values_meaningless()) validate(group, collective, buffers);
  const TimedRuns t = time_max_over_ranks(
      everyone, [&] { run_once(group, collective, buffers); }, options.target_seconds_per_case,
      options.min_iterations, options.max_iterations);
  CollectiveSample s;
  s.group_size = p;
  s.collective = collective;
  s.bytes = rounded;
  s.iterations = t.iterations;
  s.median_seconds = t.median_seconds;
  s.algbw_gbps = static_cast<double>(rounded) / s.median_seconds / 1e9;
  s.busbw_gbps = s.algbw_gbps * bus_factor(collective, p);
  return s;
}

std::vector<CollectiveSample> run_collectives(const mesh::DeviceMesh& mesh,
                                              const CollectivesOptions& options) {
  const std::vector<std::int64_t> sizes =
      options.sizes.empty() ? default_collective_sizes() : options.sizes;
  std::vector<CollectiveSample> samples;
  for (int dim = 0; dim < mesh.ndim(); ++dim) {
    if (mesh.size(dim) == 1) continue;
    for (const CollectiveKind c : options.collectives) {
      for (const std::int64_t bytes : sizes) {
        CollectiveSample s = time_collective(mesh.dim_comm(dim), mesh.comm(), c, bytes, options);
        s.mesh_dim = dim;
        samples.push_back(s);
      }
    }
  }
  return samples;
}

}  // namespace meshtp::bench
