// What `meshtp train` and `meshtp-gpu train` share, declared once: the flags of the optimizer,
// schedule, data, validation and logs (not the layout's or the checkpoints': only `meshtp
// train` has those), and the line each step prints.
#pragma once

#include <cstdint>
#include <string>

#include "cli/cli11.hpp"
#include "train/step_report.hpp"
#include "train/train_config.hpp"

namespace meshtp::cli {

// --data --steps --lr --min-lr --warmup --weight-decay --beta1 --beta2 --eps --grad-clip
// --seed --val-fraction --eval-every --eval-batches --skip-nonfinite --stop-after --metrics,
// into `config` (its values are the defaults shown).
void add_training_flags(CLI::App* app, train::TrainConfig& config);

// "step    10/200  loss 2.3456  lr 1.00e-03  |g| 0.532  12345 tok/s  0.012 TFLOP/s/rank
// comm   0%  eta 0m05s  val 2.4000"
std::string step_line(const train::StepReport& report, std::int64_t steps);

// 75 s → "1m15s", 2 h → "2h00m"; "?" for a negative or absurd value.
std::string duration(double seconds);

}  // namespace meshtp::cli
