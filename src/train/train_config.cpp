#include "train/train_config.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <cmath>

#include "core/error.hpp"

namespace meshtp::train {

std::string layout_string(const TrainConfig& c) {
  const layout::Plan& p = c.model.layout;
  std::string s = fmt::format("dp={} tp={}x{}", p.dp, p.mesh[0], p.mesh[1]);
  if (p.cp > 1) s += fmt::format(" cp={} {}", p.cp, p.cp_comm);
  if (p.pp > 1 || p.microbatches > 1) {
    s += fmt::format(" pp={} microbatches={} {}", p.pp, p.microbatches, p.schedule);
    if (p.virtual_stages > 1) s += fmt::format(":{}", p.virtual_stages);
  }
  if (p.zero > 0) s += fmt::format(" zero={}", p.zero);
  if (p.recompute != layout::Recompute::kNone) s += fmt::format(" recompute={}", p.recompute);
  return s;
}

void check_flags(const TrainConfig& c) {
  // One message per flag, naming its value.
  const auto at_least = [](const char* flag, std::int64_t value, std::int64_t min) {
    MESHTP_CHECK(value >= min, "--{}={} must be ≥ {}", flag, value, min);
  };
  const auto finite_in = [](const char* flag, double value, double lo, double hi, bool hi_open) {
    MESHTP_CHECK(std::isfinite(value) && value >= lo && (hi_open ? value < hi : value <= hi),
                 "--{}={} must be a finite number in [{}, {}{}", flag, value, lo, hi,
                 hi_open ? ")" : "]");
  };
  at_least("steps", c.steps, 1);
  at_least("warmup", c.warmup, 0);
  MESHTP_CHECK(std::isfinite(c.lr) && c.lr > 0, "--lr={} must be a finite number > 0", c.lr);
  if (c.min_lr) {
    MESHTP_CHECK(std::isfinite(*c.min_lr) && *c.min_lr >= 0 && *c.min_lr <= c.lr,
                 "--min-lr={} must be a finite number in [0, {}] (at most --lr)", *c.min_lr, c.lr);
  }
  finite_in("beta1", c.adamw.beta1, 0, 1, true);
  finite_in("beta2", c.adamw.beta2, 0, 1, true);
  MESHTP_CHECK(std::isfinite(c.adamw.eps) && c.adamw.eps > 0,
               "--eps={} must be a finite number > 0", c.adamw.eps);
  finite_in("weight-decay", c.adamw.weight_decay, 0, 1e6, false);
  finite_in("grad-clip", c.grad_clip, 0, 1e30, false);
  finite_in("val-fraction", c.validation_fraction, 0, 1, true);
  at_least("eval-batches", c.eval_batches, 1);
  at_least("eval-every", c.eval_every, 0);
  at_least("checkpoint-every", c.checkpoint_every, 0);
  at_least("keep", c.keep, 1);
  at_least("stop-after", c.stop_after, 0);
  at_least("trace-steps", c.trace_steps, 1);
  at_least("skip-nonfinite", c.skip_nonfinite, 0);
  MESHTP_CHECK(!c.resume || !c.checkpoint_dir.empty(), "--resume needs --checkpoint-dir");
  MESHTP_CHECK(c.precision == Precision::kFp32 || c.precision == Precision::kBf16,
               "--precision {} is not one the runtime trains in (fp32, bf16)", name(c.precision));
}

std::string describe_precision(Precision precision) {
  if (precision == Precision::kFp32) return "fp32 throughout";
  return fmt::format(
      "{} mixed precision: every GeMM's operands in {}, fp32 accumulation and outputs; fp32 "
      "master weights, gradients, AdamW, LayerNorm, softmax, loss and communication",
      name(precision), name(precision));
}

}  // namespace meshtp::train
