// The training loop of `meshtp train`: a GPT on a (dp, pp, cp, d1, d2) mesh — tensor
// parallelism (ATP mesh (d1, d2)) inside each of cp context-parallel ranks (each its zigzag
// share of every sequence: model/block.hpp) inside each of pp pipeline stages
// (train/pipeline_model.hpp: m microbatches per step, one schedule), inside each of dp
// data-parallel replicas.
//
//   per step t:
//     tokens      rows [r·B/dp, (r+1)·B/dp) of the global batch t (byte_corpus.hpp); a cp
//                 rank keeps its b·s/cp tokens of them
//     forward     loss_r = model(tokens)                         mean over the rank's tokens
//     backward    ∂(loss_r/(dp·cp))/∂θ; after block i finishes, its gradients start a
//                 non-blocking all_reduce over the dp·cp group, overlapping blocks i−1 … 0
//                 (with pipeline stages: both per microbatch, in the schedule's order)
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
#include "train/step_report.hpp"
#include "train/train_config.hpp"

namespace meshtp::train {

// Throws (every rank alike) unless the configuration can run on `world_size` ranks: its
// flags (check_flags) and its layout.
void validate(const TrainConfig& config, int world_size);

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
  // steps (after the model is set up), above what was alive when the run started — on a
  // device, its allocator's peak (device::Backend::peak_bytes_in_use) — and the process's peak
  // resident set.
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
