// The --metrics file: one JSON object per step, appended and flushed as the run goes.
//
// Two faults it must survive:
//   - a write that fails (full disk, I/O error) is an error naming the file and the
//     system's reason, not a silently shorter file;
//   - a run that crashed after its last checkpoint wrote steps that the resumed run trains
//     again: on resume the file is first rewritten (atomically) without the lines past the
//     checkpoint's step, so no step appears twice.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "train/step_report.hpp"

namespace meshtp::train {

class MetricsLog {
 public:
  // A fresh run truncates `path`; a resumed one (resumed_step set) keeps the lines with
  // "step" ≤ resumed_step. Throws naming the path when it cannot be opened or rewritten.
  MetricsLog(std::string path, std::optional<std::int64_t> resumed_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends `line` and a newline; throws naming the path, the step and the reason.
  void append(const std::string& line, std::int64_t step);
  // Appends the step's line: {"step", "loss", "lr", "grad_norm", "step_s", "comm_s",
  // "tokens_per_s", "tflops_per_rank"[, "val_loss"]}.
  void append(const StepReport& report);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace meshtp::train
