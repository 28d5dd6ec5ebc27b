// Training-step profile (`meshtp bench train`): the real training loop (train/trainer.hpp)
// run for a few steps with tracing on, each step's time split into phases
// (bench/phase_profile.hpp), and one pass of the BLAS baseline (bench/blas_reference.hpp)
// timed after every step on every rank, so the step's rate is quoted as a ratio to BLAS
// measured in the same run under the same load.
//
//   per rank and step:  data    the "data" span (sampling the batch; before the step barrier)
//                       window  [end of the step barrier, end of the optimizer]
//                       phases  attribute_spans(window) + data;  step = window + data
//   per step:           max over ranks of every phase and of the step
//   reported:           median over the timed steps (after the warm-up steps)
//
//   model FLOP/s per rank = replica.step_flops() · dp / ranks / step
//   ratio to BLAS         = model FLOP/s per rank / BLAS GFLOP/s on the model's linear shapes
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "bench/phase_profile.hpp"
#include "comm/communicator.hpp"
#include "train/trainer.hpp"

namespace meshtp::bench {

struct TrainBenchOptions {
  train::TrainConfig config{};  // model, layout, optimizer, data (validation/checkpoints are off)
  int warmup_steps = 2;
  int steps = 10;  // timed
};

struct TrainBenchResult {
  int ranks = 1;
  int steps = 0;
  PhaseTimes phases{};      // seconds: median over steps of the max over ranks
  double step_s = 0.0;      // the same statistic of the whole step (data included)
  double flops_per_rank = 0.0;  // per step
  double gflops_per_rank = 0.0;
  double blas_gflops = 0.0;     // one rank's BLAS on the model's linear shapes (all ranks at once)
  double ratio_to_blas = 0.0;
  std::vector<double> losses;   // every step's loss, warm-up included
  // This rank's tensor high-water mark over the steps (train::TrainSummary::tensor_peak_bytes:
  // what plan/memory.hpp's rank_memory predicts) and its process's peak resident set.
  std::int64_t tensor_peak_bytes = 0;
  std::int64_t max_rss_bytes = 0;
};

// Collective over `world`; throws meshtp::Error for a configuration the trainer rejects.
// `on_step`, when set, also sees every step's report (after the profile has taken it).
TrainBenchResult run_train_bench(const comm::Communicator& world, const TrainBenchOptions& options,
                                 const std::function<void(const train::StepReport&)>& on_step = {});

}  // namespace meshtp::bench
