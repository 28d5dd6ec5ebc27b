#include "train/single_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "model/params.hpp"
#include "train/byte_corpus.hpp"
#include "train/lr_schedule.hpp"
#include "train/metrics_log.hpp"

namespace meshtp::train {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every element of `entry` under the GPT-2 init. Each element is a pure function of its
// index, so large tensors are filled by all the cores (normal_at costs ~36 ns: an h 4096
// layer's 201M values take 7 s on one core).
std::vector<float> init_tensor(const model::ParamEntry& entry, std::uint64_t seed, int layers) {
  std::vector<float> values(static_cast<std::size_t>(numel(entry.shape)));
  const auto fill = [&](std::size_t begin, std::size_t end) {
    for (std::size_t g = begin; g < end; ++g) {
      values[g] = model::init_value(entry, seed, layers, static_cast<std::int64_t>(g));
    }
  };
  const std::size_t threads =
      values.size() < (1u << 20) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  const std::size_t share = (values.size() + threads - 1) / threads;
  for (std::size_t t = 1; t < threads; ++t) {
    workers.emplace_back(fill, std::min(values.size(), t * share),
                         std::min(values.size(), (t + 1) * share));
  }
  fill(0, std::min(values.size(), share));
  for (std::thread& w : workers) w.join();
  return values;
}

// What this loop cannot run, named by its flag.
void check_single_device(const TrainConfig& c) {
  const layout::Plan& p = c.model.layout;
  MESHTP_CHECK(p.ranks() == 1 && p.microbatches == 1,
               "one device trains without a mesh, but the layout is {} ({} devices, {} "
               "microbatches): run `meshtp train` under mpirun for a layout",
               layout_string(c), p.ranks(), p.microbatches);
  MESHTP_CHECK(p.recompute == layout::Recompute::kNone,
               "recompute={} is not implemented on one device (the device keeps every "
               "activation)",
               p.recompute);
  MESHTP_CHECK(c.checkpoint_dir.empty() && !c.resume,
               "--checkpoint-dir '{}'{}: checkpoints are not implemented on one device yet",
               c.checkpoint_dir, c.resume ? " --resume" : "");
  MESHTP_CHECK(c.trace_path.empty(), "--trace '{}': traces are not implemented on one device",
               c.trace_path);
}

}  // namespace

device::GptWeights gpt2_init(const layout::ModelShape& shape, std::uint64_t seed) {
  const auto layers = static_cast<int>(shape.layers);
  device::GptWeights w{
      .wte = init_tensor(model::wte_entry(shape.vocab, shape.hidden), seed, layers),
      .wpe = init_tensor(model::wpe_entry(shape.seq, shape.hidden), seed, layers),
      .blocks = std::vector<device::BlockWeights>(static_cast<std::size_t>(shape.layers)),
      .lnf_w = std::vector<float>(static_cast<std::size_t>(shape.hidden), 1.0f),
      .lnf_b = std::vector<float>(static_cast<std::size_t>(shape.hidden), 0.0f)};
  const std::vector<model::ParamEntry> table = model::stack_param_table(layers, shape.hidden);
  for (std::size_t i = 0; i < table.size(); ++i) {
    device::BlockWeights& block = w.blocks[i / device::kBlockParams];
    *device::fields(block)[i % device::kBlockParams] = init_tensor(table[i], seed, layers);
  }
  return w;
}

TrainSummary train_on_device(device::Backend& backend, const TrainConfig& config,
                             const TrainHooks& hooks) {
  check_flags(config);
  check_single_device(config);
  const layout::ModelShape& shape = config.model.shape;
  const auto seq = static_cast<int>(shape.seq);
  const ByteCorpus corpus = ByteCorpus::load(config.data, config.validation_fraction, seq);
  MESHTP_CHECK(shape.vocab == ByteCorpus::kVocab,
               "vocab={}, but the corpus is bytes (vocab {}): a byte-level model is needed",
               shape.vocab, ByteCorpus::kVocab);
  // Before the model's set-up (seconds for a large one): a bad --metrics path fails first.
  std::optional<MetricsLog> metrics;
  if (!config.metrics_path.empty()) {
    metrics.emplace(config.metrics_path, std::nullopt,
                    metrics_run_record(shape, layout::Plan{}, 1, config.precision,
                                       "single-device"));
  }
  TrainSummary summary;
  device::SingleDeviceGpt gpt = [&] {
    const device::GptWeights init = gpt2_init(shape, config.seed);
    summary.parameters = static_cast<std::int64_t>(init.wte.size() + init.wpe.size() +
                                                   init.lnf_w.size() + init.lnf_b.size());
    for (const device::BlockWeights& b : init.blocks)
      for (const std::vector<float>* f : device::fields(b))
        summary.parameters += static_cast<std::int64_t>(f->size());
    return device::SingleDeviceGpt(backend, shape, init, compute_element(config.precision));
  }();
  const LrSchedule schedule{.peak = config.lr,
                            .min = config.final_lr(),
                            .warmup_steps = config.warmup,
                            .total_steps = config.steps};

  const std::int64_t rows = shape.batch;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows * seq)), targets(tokens.size());
  const auto validation_loss = [&] {
    double sum = 0.0;
    for (int j = 0; j < config.eval_batches; ++j) {
      corpus.sample(Split::kValidation, config.seed, j, rows, 0, rows, seq, tokens, targets);
      sum += gpt.loss(tokens, targets);
    }
    return sum / config.eval_batches;
  };
  const double flops = gpt.flops_per_step();
  const std::int64_t end =
      config.stop_after > 0 ? std::min(config.steps, config.stop_after) : config.steps;
  double elapsed = 0.0;
  std::int64_t adam_steps = 0;
  for (std::int64_t step = 0; step < end; ++step) {
    corpus.sample(Split::kTrain, config.seed, step, rows, 0, rows, seq, tokens, targets);
    const double start = now_seconds();
    StepReport report;
    report.loss = gpt.forward_backward(tokens, targets);
    // The norm before clipping (a NaN norm clips nothing; a non-finite step's gradients are
    // never used: the next forward_backward overwrites them).
    report.grad_norm = gpt.clip_gradients(config.grad_clip);
    if (std::isfinite(report.loss) && std::isfinite(report.grad_norm)) {
      // Bias correction at the updates made, as train/adamw.hpp counts them (a skipped step
      // is not one).
      gpt.update(config.adamw.at(static_cast<float>(schedule.at(step)), ++adam_steps, true));
    } else {
      MESHTP_CHECK(summary.skipped_steps < config.skip_nonfinite,
                   "step {}: the loss is {} and the gradient norm {}; stopping before the update "
                   "(lower --lr, or let --skip-nonfinite N skip such steps)",
                   step + 1, report.loss, report.grad_norm);
      ++summary.skipped_steps;
      if (hooks.notice) {
        hooks.notice(fmt::format(
            "step {}: loss {}, gradient norm {}: update skipped ({} of "
            "--skip-nonfinite={})",
            step + 1, report.loss, report.grad_norm, summary.skipped_steps, config.skip_nonfinite));
      }
    }
    backend.synchronize();
    const double seconds = now_seconds() - start;
    elapsed += seconds;
    report.step = step + 1;
    report.lr = schedule.at(step);
    report.step_seconds = seconds;
    report.tokens_per_s = static_cast<double>(rows * seq) / seconds;
    report.tflops_per_rank = flops / seconds / 1e12;
    report.eta_seconds =
        elapsed / static_cast<double>(step + 1) * static_cast<double>(end - step - 1);
    summary.stop_signal = hooks.stop_signal ? hooks.stop_signal() : 0;
    const bool last = step + 1 == end;
    if ((config.eval_every > 0 && (step + 1) % config.eval_every == 0 &&
         summary.stop_signal == 0) ||
        last) {
      report.validation_loss = validation_loss();
      summary.validation_loss = report.validation_loss;
    }
    if (metrics) metrics->append(report);
    if (hooks.on_step) hooks.on_step(report);
    summary.last_step = step + 1;
    if (summary.stop_signal != 0) break;
  }
  return summary;
}

}  // namespace meshtp::train
