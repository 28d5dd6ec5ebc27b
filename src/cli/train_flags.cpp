#include "cli/train_flags.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cli/flag_checks.hpp"

namespace meshtp::cli {

void add_training_flags(CLI::App* t, train::TrainConfig& c) {
  t->add_option("--data", c.data,
                "Text file or directory to train on (default: Debian's fortunes)");
  t->add_option("--steps", c.steps, "Training steps")->capture_default_str();
  t->add_option("--lr", c.lr, "Peak learning rate")->capture_default_str();
  t->add_option("--min-lr", c.min_lr,
                "Final learning rate of the cosine decay (default: --lr / 10)");
  t->add_option("--warmup", c.warmup, "Warmup steps")->capture_default_str();
  t->add_option("--weight-decay", c.adamw.weight_decay, "AdamW weight decay")
      ->capture_default_str();
  t->add_option("--beta1", c.adamw.beta1, "AdamW β1")->capture_default_str();
  t->add_option("--beta2", c.adamw.beta2, "AdamW β2")->capture_default_str();
  t->add_option("--eps", c.adamw.eps, "AdamW ε")->capture_default_str();
  t->add_option("--grad-clip", c.grad_clip, "Global gradient-norm clip (0: off)")
      ->capture_default_str();
  t->add_option("--seed", c.seed, "Seed of the weights and the data order")
      ->capture_default_str()
      ->check(integer_at_least(0));
  t->add_option("--val-fraction", c.validation_fraction, "Held-out share of the data")
      ->capture_default_str();
  t->add_option("--eval-every", c.eval_every, "Validation every N steps (0: at the end)")
      ->capture_default_str();
  t->add_option("--eval-batches", c.eval_batches, "Batches per validation")->capture_default_str();
  t->add_option("--skip-nonfinite", c.skip_nonfinite,
                "Skip the update of up to N steps whose loss or gradient norm is NaN/inf "
                "(default 0: stop at the first)")
      ->capture_default_str();
  t->add_option("--stop-after", c.stop_after,
                "Stop after N steps of this run (simulates an interruption)");
  t->add_option("--metrics", c.metrics_path, "JSON lines, one per step");
}

std::string duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const auto s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

std::string step_line(const train::StepReport& r, std::int64_t steps) {
  std::string line = fmt::format(
      "step {:>5}/{}  loss {:.4f}  lr {:.2e}  |g| {:.3f}  {:>8.0f} tok/s  {:.3f} TFLOP/s/rank  "
      "comm {:>3.0f}%  eta {}",
      r.step, steps, r.loss, r.lr, r.grad_norm, r.tokens_per_s, r.tflops_per_rank,
      100.0 * r.comm_seconds / std::max(r.step_seconds, 1e-30), duration(r.eta_seconds));
  if (r.validation_loss) line += fmt::format("  val {:.4f}", *r.validation_loss);
  return line;
}

}  // namespace meshtp::cli
