// What one training step reports: `meshtp train`'s loop (trainer.hpp) fills it, the CLI prints
// it and the --metrics file records it (metrics_log.hpp).
#pragma once

#include <cstdint>
#include <optional>

namespace meshtp::train {

struct StepReport {
  std::int64_t step = 0;  // 1-based: steps completed after this one
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double step_seconds = 0.0;  // max over ranks
  double comm_seconds = 0.0;  // max over ranks of time blocked in communication
  double tokens_per_s = 0.0;
  double tflops_per_rank = 0.0;
  double eta_seconds = 0.0;
  std::optional<double> validation_loss;
};

}  // namespace meshtp::train
