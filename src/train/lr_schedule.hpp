// Learning rate: linear warmup to the peak, then cosine decay to min_lr at the last step.
//
//   step < warmup:   lr = peak · (step + 1) / warmup
//   after:           lr = min + ½(peak − min)(1 + cos(π · progress)),
//                    progress = (step − warmup) / max(1, total − warmup) ∈ [0, 1]
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace meshtp::train {

struct LrSchedule {
  double peak = 3e-4;
  double min = 3e-5;
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;

  double at(std::int64_t step) const {
    if (step < warmup_steps) return peak * static_cast<double>(step + 1) / warmup_steps;
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_steps - warmup_steps));
    const double progress = std::clamp(static_cast<double>(step - warmup_steps) / span, 0.0, 1.0);
    return min + 0.5 * (peak - min) * (1.0 + std::cos(std::numbers::pi * progress));
  }
};

}  // namespace meshtp::train
