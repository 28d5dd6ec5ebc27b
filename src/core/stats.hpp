// Small statistics helpers for benchmarks: medians of repeated timings.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/simulation.hpp"

namespace meshtp {

inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  return 0.5 * (upper + *std::max_element(values.begin(), values.begin() + mid));
}

// Wall-clock seconds since an arbitrary epoch, monotonic — the simulated clock when running
// in the simulated build (core/simulation.hpp), so every timing and trace is simulated time.
inline double now_seconds() {
  if (const auto clock = simhooks::hooks().clock) return clock();
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace meshtp
