#include "train/metrics_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace meshtp::train {
namespace {

// The lines of `text` whose "step" is ≤ last (a torn last line, without a step, goes too).
std::string lines_up_to(const std::string& text, std::int64_t last) {
  std::string kept;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_object() && row.contains("step") && row["step"].is_number_integer() &&
        row["step"].get<std::int64_t>() <= last) {
      kept += line + '\n';
    }
  }
  return kept;
}

}  // namespace

nlohmann::json metrics_run_record(const layout::ModelShape& shape, const layout::Plan& plan,
                                  int ranks, Precision precision, const std::string& loop) {
  nlohmann::json model = nlohmann::json::object();
  layout::write_shape(model, shape);
  return {{"format", kMetricsFormat}, {"version", kMetricsVersion}, {"model", std::move(model)},
          {"plan", layout::to_json(plan)}, {"ranks", ranks}, {"precision", name(precision)},
          {"loop", loop}};
}

MetricsLog::MetricsLog(std::string path, std::optional<std::int64_t> resumed_step,
                       nlohmann::json run)
    : path_(std::move(path)), run_(std::move(run)) {
  // Appended to in place, not replaced, but written over with the same care: only a regular
  // file (not /dev/full or a FIFO, which would hang the run), not a read-only one; a
  // symlink's target. Truncating in place keeps the file's mode.
  const OutputTarget target = check_output_path(path_);
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
  if (resumed_step) {
    std::string old;
    try {
      old = read_file(path_);
    } catch (const Error&) {  // no earlier file: start one
    }
    if (!old.empty()) {
      const std::string kept = lines_up_to(old, *resumed_step);
      if (kept != old) write_file_atomically(path_, kept);
    }
  } else {
    flags |= O_TRUNC;
  }
  fd_ = ::open(target.path.c_str(), flags, 0666);
  if (fd_ < 0) fail("cannot open metrics file '{}': {}", path_, errno_text(errno));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) (void)::close(fd_);
}

void MetricsLog::append(const std::string& line, std::int64_t step) {
  const std::string text = line + '\n';
  if (const int error = write_fully(fd_, std::as_bytes(std::span<const char>(text))); error != 0) {
    fail("cannot write metrics file '{}' at step {}: {}", path_, step, errno_text(error));
  }
}

void MetricsLog::append(const StepReport& report) {
  nlohmann::json line{{"step", report.step},
                      {"loss", report.loss},
                      {"lr", report.lr},
                      {"grad_norm", report.grad_norm},
                      {"step_s", report.step_seconds},
                      {"comm_s", report.comm_seconds},
                      {"tokens_per_s", report.tokens_per_s},
                      {"tflops_per_rank", report.tflops_per_rank}};
  if (report.validation_loss) line["val_loss"] = *report.validation_loss;
  if (!run_.is_null()) line["run"] = run_;
  append(line.dump(), report.step);
  run_ = nullptr;
}

}  // namespace meshtp::train
