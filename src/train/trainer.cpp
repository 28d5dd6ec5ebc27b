#include "train/trainer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/trace.hpp"
#include "mesh/device_mesh.hpp"
#include "tensor/gemm.hpp"
#include "tensor/memory.hpp"
#include "train/byte_corpus.hpp"
#include "train/checkpoint.hpp"
#include "train/checkpoint_dir.hpp"
#include "train/chrome_trace.hpp"
#include "train/lr_schedule.hpp"
#include "train/metrics_log.hpp"
#include "train/pipeline_model.hpp"
#include "train/zero.hpp"

namespace meshtp::train {
namespace {

// Mean loss over `batches` validation batches of the global batch, identical on every rank.
double validation_loss(PipelineModel& model, const ByteCorpus& corpus, const TrainConfig& config,
                       std::vector<std::int32_t>& tokens, std::vector<std::int32_t>& targets) {
  const std::int64_t rows = model.replica_rows();
  double sum = 0.0;
  for (int j = 0; j < config.eval_batches; ++j) {
    corpus.sample(Split::kValidation, config.seed, j, config.model.shape.batch,
                  model.dp_rank() * rows, rows, static_cast<int>(config.model.shape.seq), tokens,
                  targets);
    sum += model.loss(tokens, targets);
  }
  return sum / config.eval_batches;
}

}  // namespace

void validate(const TrainConfig& c, int world_size) {
  const layout::Plan& plan = c.model.layout;
  const int dp = plan.dp, pp = plan.pp, m = plan.microbatches;
  plan.validate();
  MESHTP_CHECK(c.model.shape.is_moe() || (plan.ep == 1 && plan.etp == 0),
               "ep={} etp={}: expert parallelism splits a mixture of experts' experts, but the "
               "model has none (num_experts=0)",
               plan.ep, plan.etp);
  plan.require_runtime("plan", true);
  plan.check_ranks(world_size);
  MESHTP_CHECK(c.model.shape.batch % (dp * m) == 0,
               "batch={} does not split into dp={} × microbatches={}: make dp·microbatches "
               "divide the batch",
               c.model.shape.batch, dp, m);
  layout::make_schedule(plan.schedule, pp, m, plan.virtual_stages);  // throws naming the values
  // (With cp > 1 ZeRO shards over the dp·cp ranks: train/pipeline_model.hpp.)
  MESHTP_CHECK(c.model.layout.zero == 0 || dp * plan.cp > 1,
               "zero={} shards over the data-parallel replicas, but dp={}: use --dp > 1 or "
               "--zero 0",
               c.model.layout.zero, dp);
  // (A mixture of experts folded over tp·cp shards its expert buckets over the dp replicas
  // alone, the rest over dp·cp: train/zero.hpp.)
  MESHTP_CHECK(plan.cp == 1 || !layout::is_gemm2d(plan.strategy),
               "cp={}: context parallelism runs on the ATP blocks (strategies atp, megatron, "
               "tp1d), not the 2D-GeMM blocks (strategy {})",
               plan.cp, plan.strategy);
  check_flags(c);
  model::GptConfig microbatch = c.model;
  microbatch.shape.batch = c.model.shape.batch / (dp * m);
  model::validate(microbatch, {plan.mesh[0], plan.mesh[1]});
}

TrainSummary train(const comm::Communicator& world, const TrainConfig& config,
                   const std::function<void(const StepReport&)>& on_step) {
  TrainHooks hooks;
  hooks.on_step = on_step;
  return train(world, config, hooks);
}

TrainSummary train(const comm::Communicator& world, const TrainConfig& config,
                   const TrainHooks& hooks) {
  validate(config, world.size());
  // Every GeMM of the run (forward, backward, evaluation) in the run's precision; parameters,
  // gradients, AdamW and every other op stay fp32 (trainer.hpp).
  const ScopedGemmPrecision precision(config.precision);
  const std::int64_t tensors_before = tensor_bytes();
  reset_tensor_peak();
  const int dp = config.model.layout.dp;
  model::GptConfig replica = config.model;
  replica.shape.batch = config.model.shape.batch / dp;
  const auto seq = static_cast<int>(config.model.shape.seq);
  const ByteCorpus corpus = ByteCorpus::load(config.data, config.validation_fraction, seq);
  PipelineModel model(world, config.model, config.model.layout.zero, config.adamw);
  model.init(config.seed);
  const int dp_rank = model.dp_rank();
  TrainSummary summary;
  summary.parameters = model.global_parameters();
  const LrSchedule schedule{.peak = config.lr,
                            .min = config.final_lr(),
                            .warmup_steps = config.warmup,
                            .total_steps = config.steps};

  // Everything that can refuse to run does so before the first step: the checkpoint
  // directory (writable, not another run's, not someone else's checkpoints), the resume
  // point, the trace and metrics paths.
  std::optional<CheckpointDir> checkpoints;
  std::uint64_t seed = config.seed;
  if (!config.checkpoint_dir.empty()) {
    checkpoints.emplace(config.checkpoint_dir, config.keep, config.resume, world, hooks.notice);
    if (config.resume) {
      const CheckpointState state =
          checkpoints->resume(model.checkpoint_parts(false), summary.resumed_from, hooks.notice);
      model.checkpoint_done(false);
      summary.first_step = state.step;
      seed = state.seed;  // the data stream continues where it was
      MESHTP_CHECK(state.step < config.steps,
                   "--steps={} but '{}' is already at step {}: nothing left to train (raise "
                   "--steps to continue)",
                   config.steps, summary.resumed_from, state.step);
    }
  }
  // The high-water mark of the steps, not of the set-up: ZeRO-3 frees each replica's share
  // of the blocks' parameters only once they are initialised (or loaded) whole.
  reset_tensor_peak();
  TrainConfig run = config;
  run.seed = seed;
  if (!config.trace_path.empty()) {
    // Writable? The probe creates its temporary file and removes it again.
    on_rank0(world, [&] { AtomicFileWriter probe(config.trace_path); });
  }
  std::optional<MetricsLog> metrics;
  if (!config.metrics_path.empty()) {
    on_rank0(world, [&] {
      metrics.emplace(config.metrics_path,
                      config.resume ? std::optional<std::int64_t>(summary.first_step) : std::nullopt,
                      metrics_run_record(config.model.shape, config.model.layout, world.size(),
                                         config.precision, "mesh"));
    });
  }

  const std::int64_t rows = replica.shape.batch;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(rows * seq));
  std::vector<std::int32_t> targets(tokens.size());
  const double flops_per_rank = replica.shape.step_flops() * dp / static_cast<double>(world.size());
  const std::int64_t end = config.stop_after > 0
                               ? std::min(config.steps, summary.first_step + config.stop_after)
                               : config.steps;
  const std::int64_t trace_begin = summary.first_step + 1;
  double trace_origin = 0.0;
  double elapsed = 0.0;
  Tracer& tracer = Tracer::instance();

  for (std::int64_t step = summary.first_step; step < end; ++step) {
    if (!config.trace_path.empty() && step == std::min(trace_begin, end - 1)) {
      world.barrier();
      trace_origin = now_seconds();
      tracer.clear();
      tracer.enable();
    }
    {
      const ScopedSpan data("data", SpanKind::kPhase);
      corpus.sample(Split::kTrain, run.seed, step, config.model.shape.batch, dp_rank * rows, rows,
                    seq, tokens, targets);
    }
    world.barrier();  // a step starts together everywhere, so its time is the step's
    const double comm_before = comm::comm_ledger().wait_seconds;
    const double start = now_seconds();
    double loss = 0.0;
    {
      const ScopedSpan span("step", SpanKind::kPhase);
      {
        const ScopedSpan fwd("pipeline", SpanKind::kPhase);
        loss = model.forward_backward(tokens, targets);
      }
      StepReport report;
      {
        const ScopedSpan opt("optimizer", SpanKind::kPhase);
        report.grad_norm = model.grad_norm(world);
        // loss and grad_norm are global, so every rank takes the same branch.
        if (config.values_meaningless || (std::isfinite(loss) && std::isfinite(report.grad_norm))) {
          model.clip(report.grad_norm, config.grad_clip);
          model.step(static_cast<float>(schedule.at(step)));
        } else {
          MESHTP_CHECK(summary.skipped_steps < config.skip_nonfinite,
                       "step {}: the loss is {} and the gradient norm {}; stopping before the "
                       "update{} (lower --lr, or let --skip-nonfinite N skip such steps{})",
                       step + 1, loss, report.grad_norm,
                       checkpoints ? fmt::format(", so the newest checkpoint in '{}' stays "
                                                 "the last good one",
                                                 config.checkpoint_dir)
                                   : "",
                       config.skip_nonfinite > 0
                           ? fmt::format("; {} skipped already", summary.skipped_steps)
                           : "");
          ++summary.skipped_steps;
          if (hooks.notice && world.rank() == 0) {
            hooks.notice(fmt::format("step {}: loss {}, gradient norm {}: update skipped ({} "
                                     "of --skip-nonfinite={})",
                                     step + 1, loss, report.grad_norm, summary.skipped_steps,
                                     config.skip_nonfinite));
          }
        }
      }
      // The step's timings and the stop request travel in one all-reduce (max over ranks).
      std::array<double, 3> times{now_seconds() - start,
                                  comm::comm_ledger().wait_seconds - comm_before,
                                  hooks.stop_signal ? static_cast<double>(hooks.stop_signal()) : 0};
      world.all_reduce(std::span<double>(times), comm::ReduceOp::kMax);
      summary.stop_signal = static_cast<int>(times[2]);
      report.step = step + 1;
      report.loss = loss;
      report.lr = schedule.at(step);
      report.step_seconds = times[0];
      report.comm_seconds = times[1];
      report.tokens_per_s = static_cast<double>(config.model.shape.batch * seq) / times[0];
      report.tflops_per_rank = flops_per_rank / times[0] / 1e12;
      elapsed += times[0];
      report.eta_seconds = elapsed / static_cast<double>(step + 1 - summary.first_step) *
                           static_cast<double>(end - step - 1);
      const bool last = step + 1 == end;
      const bool stopping = summary.stop_signal != 0;  // save, but do not validate: be quick
      if ((config.eval_every > 0 && (step + 1) % config.eval_every == 0 && !stopping) || last) {
        const ScopedSpan eval("validation", SpanKind::kPhase);
        report.validation_loss = validation_loss(model, corpus, run, tokens, targets);
        summary.validation_loss = report.validation_loss;
      }
      if (checkpoints &&
          ((config.checkpoint_every > 0 && (step + 1) % config.checkpoint_every == 0) || last ||
           stopping)) {
        const ScopedSpan save("checkpoint", SpanKind::kPhase);
        summary.checkpoint = checkpoints->save(
            model.checkpoint_parts(true),
            {.step = step + 1, .seed = run.seed, .layout = layout_string(config)},
            model.checkpoint_gather_rank(), model.pipeline_group());
        model.checkpoint_done(true);
      }
      if (checkpoints) checkpoints->heartbeat();
      if (metrics) metrics->append(report);
      if (hooks.on_step) hooks.on_step(report);
    }
    // After the step's scope, so the last traced step's own span is recorded too.
    if (!config.trace_path.empty() && tracer.enabled() &&
        step + 1 >= std::min(trace_begin, end - 1) + config.trace_steps) {
      tracer.disable();
    }
    summary.last_step = step + 1;
    if (summary.stop_signal != 0) break;
  }
  if (!config.trace_path.empty()) {
    tracer.disable();
    write_chrome_trace(config.trace_path, world, trace_origin);
    tracer.clear();
    summary.trace = config.trace_path;
  }
  const std::int64_t device_peak =
      config.model.backend != nullptr ? config.model.backend->peak_bytes_in_use() : -1;
  summary.tensor_peak_bytes = device_peak >= 0 ? device_peak : tensor_peak_bytes() - tensors_before;
  summary.max_rss_bytes = max_rss_bytes();
  return summary;
}

}  // namespace meshtp::train
