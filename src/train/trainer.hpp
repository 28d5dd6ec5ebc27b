// The training loop of `meshtp train`: a GPT on a (dp, pp, d1, d2) mesh — tensor parallelism
// (ATP mesh (d1, d2)) inside each of pp pipeline stages (train/pipeline_model.hpp: m
// microbatches per step, one schedule), inside each of dp data-parallel replicas.
//
//   per step t:
//     tokens      rows [r·B/dp, (r+1)·B/dp) of the global batch t (byte_corpus.hpp)
//     forward     loss_r = model(tokens)                         mean over the replica's tokens
//     backward    ∂(loss_r/dp)/∂θ; after block i finishes, its gradients start a non-blocking
//                 all_reduce over the dp group, overlapping blocks i−1 … 0 (with pipeline
//                 stages: both per microbatch, in the schedule's order)
//     clip        g ← g · min(1, clip/‖g‖), ‖g‖ over the whole world, every element once
//     update      AdamW with lr(t) (warmup + cosine)
//
// The loss reported is the global batch's mean (= mean over replicas), identical on every
// rank; so is everything else the loop decides, so no rank takes another path:
//
//   non-finite   a NaN/inf loss or gradient norm (both global) stops the run before the
//                update, naming the step — or skips the update, up to --skip-nonfinite
//                times; nothing non-finite is ever saved, so the last good checkpoint stays
//   stop         hooks.stop_signal() (a SIGTERM/SIGINT the CLI caught) is read once per step
//                and max-reduced with the step's timings — one all-reduce that already
//                exists — so every rank stops after the same step, saves a checkpoint if a
//                directory is set, and returns with summary.stop_signal set
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "core/precision.hpp"
#include "model/gpt.hpp"
#include "train/adamw.hpp"

namespace meshtp::train {

struct TrainConfig {
  // model.batch is the GLOBAL batch; each replica runs batch/dp. model.layout is the plan:
  // dp replicas of the tensor-parallel mesh (d1, d2).
  model::GptConfig model;
  std::int64_t steps = 100;
  // fp32, or bf16 mixed precision: every GeMM's operands in bf16 (the weights' compute copy
  // and the activations and gradients they multiply), fp32 accumulation and outputs; the
  // parameters stay the fp32 master weights, and gradients, AdamW's moments, LayerNorm,
  // softmax, the loss and communication stay fp32 (tensor/gemm.hpp ScopedGemmPrecision).
  Precision precision = Precision::kFp32;
  double lr = 1e-3;
  std::optional<double> min_lr;  // the cosine decay's floor; unset: lr / 10
  double final_lr() const { return min_lr.value_or(lr / 10); }
  std::int64_t warmup = 10;
  AdamWConfig adamw;
  double grad_clip = 1.0;  // 0: off
  std::uint64_t seed = 1;
  std::string data;
  double validation_fraction = 0.05;
  std::int64_t eval_every = 50;  // 0: only at the end
  int eval_batches = 4;
  std::string checkpoint_dir;    // empty: no checkpoints
  std::int64_t checkpoint_every = 0;  // 0: only at the end
  int keep = 2;                  // checkpoints kept (checkpoint_dir.hpp)
  bool resume = false;
  std::int64_t skip_nonfinite = 0;  // steps with a NaN/inf loss or gradient norm skipped
  std::string metrics_path;      // JSON lines, one per step
  std::string trace_path;        // Chrome trace of a few steps
  std::int64_t trace_steps = 2;  // steps traced (after one warm-up step)
  // Stop after this many steps of this run (the schedule still spans `steps`): used to
  // simulate an interrupted run. 0: no limit.
  std::int64_t stop_after = 0;
};

// Throws (every rank alike) unless the configuration can run on `world_size` ranks.
void validate(const TrainConfig& config, int world_size);
std::string layout_string(const TrainConfig& config);  // "dp=2 tp=2x1"
// One line on what the precision computes in: "fp32 throughout" or bf16's split.
std::string describe_precision(Precision precision);

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

struct TrainSummary {
  std::int64_t first_step = 0;  // 0, or the resumed step
  std::int64_t last_step = 0;
  std::optional<double> validation_loss;
  std::string resumed_from;  // the checkpoint resumed from, if any
  std::string checkpoint;    // the last checkpoint written, if any
  std::string trace;         // the trace written, if any
  std::int64_t parameters = 0;
  std::int64_t skipped_steps = 0;  // non-finite steps skipped (--skip-nonfinite)
  int stop_signal = 0;             // the signal that stopped the run early, or 0
  // This rank's memory (tensor/memory.hpp): the high-water mark of tensor storage during the
  // steps (after the model is set up), above what was alive when the run started, and the
  // process's peak resident set.
  std::int64_t tensor_peak_bytes = 0;
  std::int64_t max_rss_bytes = 0;
};

struct TrainHooks {
  // Every step's report, on every rank.
  std::function<void(const StepReport&)> on_step;
  // Polled once per step on every rank: non-zero (a signal number) asks to stop after it.
  std::function<int()> stop_signal;
  // Warnings for the user (rank 0): a damaged checkpoint skipped, stale files removed, a
  // non-finite step skipped.
  std::function<void(const std::string&)> notice;
};

// Runs the loop. Collective.
TrainSummary train(const comm::Communicator& world, const TrainConfig& config,
                   const TrainHooks& hooks);
TrainSummary train(const comm::Communicator& world, const TrainConfig& config,
                   const std::function<void(const StepReport&)>& on_step);

}  // namespace meshtp::train
