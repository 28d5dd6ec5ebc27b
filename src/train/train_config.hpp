// What a training run is asked to do: the model and its layout, the optimizer, the schedule,
// the data, validation, checkpoints and logs — `meshtp train`'s flags (trainer.hpp runs it) —
// and the checks of the flags that need no mesh.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
  std::string checkpoint_dir;         // empty: no checkpoints
  std::int64_t checkpoint_every = 0;  // 0: only at the end
  int keep = 2;                       // checkpoints kept (checkpoint_dir.hpp)
  bool resume = false;
  std::int64_t skip_nonfinite = 0;  // steps with a NaN/inf loss or gradient norm skipped
  // One rank alone (bench rank: its collectives skipped, so what it receives is not a run's):
  // its values mean nothing, and every step updates whatever they are, so the optimizer is
  // timed too.
  bool values_meaningless = false;
  std::string metrics_path;         // JSON lines, one per step
  std::string trace_path;           // Chrome trace of a few steps
  std::int64_t trace_steps = 2;     // steps traced (after one warm-up step)
  // Stop after this many steps of this run (the schedule still spans `steps`): used to
  // simulate an interrupted run. 0: no limit.
  std::int64_t stop_after = 0;
};

// Throws naming the flag and its value unless every number is in its range (steps ≥ 1, lr
// finite and > 0, β in [0, 1), …) and the flags agree (--resume needs --checkpoint-dir, the
// precision is fp32 or bf16). The layout is the loop's to check.
void check_flags(const TrainConfig& config);
std::string layout_string(const TrainConfig& config);  // "dp=2 tp=2x1"
// One line on what the precision computes in: "fp32 throughout" or bf16's split.
std::string describe_precision(Precision precision);

}  // namespace meshtp::train
