// The --metrics file: one JSON object per step, appended and flushed as the run goes.
//
// Two faults it must survive:
//   - a write that fails (full disk, I/O error) is an error naming the file and the
//     system's reason, not a silently shorter file;
//   - a run that crashed after its last checkpoint wrote steps that the resumed run trains
//     again: on resume the file is first rewritten (atomically) without the lines past the
//     checkpoint's step, so no step appears twice.
//
// The first line each run (or resumed run) writes also carries "run": what was trained, so
// that `meshtp calibrate --from-step-log FILE` can price the same step (plan/step_log.hpp
// reads it; a file without it, from before version 1, is refused there):
//
//   "run": {"format": "meshtp-metrics", "version": 1, "model": {the shape's keys},
//           "plan": {layout::to_json of the plan}, "ranks": N, "precision": "fp32"|"bf16",
//           "loop": "mesh"}
//
// Every line still has "step", so readers of the per-step lines need not know of it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/precision.hpp"
#include "layout/model_shape.hpp"
#include "layout/plan.hpp"
#include "train/step_report.hpp"

namespace meshtp::train {

inline constexpr const char* kMetricsFormat = "meshtp-metrics";
inline constexpr int kMetricsVersion = 1;

// The "run" object above. `loop`: "mesh" (train.hpp; "single-device" in files of the one-device
// loop that `meshtp gpu train` ran before it went, still read).
nlohmann::json metrics_run_record(const layout::ModelShape& shape, const layout::Plan& plan,
                                  int ranks, Precision precision, const std::string& loop);

class MetricsLog {
 public:
  // A fresh run truncates `path`; a resumed one (resumed_step set) keeps the lines with
  // "step" ≤ resumed_step. Throws naming the path when it cannot be opened or rewritten.
  // `run` (metrics_run_record; null: none) goes on the first step line this log appends.
  MetricsLog(std::string path, std::optional<std::int64_t> resumed_step,
             nlohmann::json run = nullptr);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends `line` and a newline; throws naming the path, the step and the reason.
  void append(const std::string& line, std::int64_t step);
  // Appends the step's line: {"step", "loss", "lr", "grad_norm", "step_s", "comm_s",
  // "tokens_per_s", "tflops_per_rank"[, "val_loss"][, "run" on the first]}.
  void append(const StepReport& report);

 private:
  std::string path_;
  int fd_ = -1;
  nlohmann::json run_;  // until the first step line carries it
};

}  // namespace meshtp::train
