// A measured training run's log, read back for calibration (`meshtp calibrate
// --from-step-log LOG`): what the run was (model and layout) and how long its steps took, and
// one profile constant fitted so that the planner prices that step.
//
// Megatron-LM's log (megatron/training/arguments.py prints its arguments between
// "---- arguments ----" and "---- end of arguments ----", one "  name ....... value" a line;
// training.py's training_log prints "elapsed time per iteration (ms): T" every
// --log-interval iterations). Read: num_layers, hidden_size, num_attention_heads, seq_length,
// global_batch_size, micro_batch_size, tensor_model_parallel_size,
// pipeline_model_parallel_size, world_size (required); padded_vocab_size (else 0: no head),
// num_layers_per_virtual_pipeline_stage, recompute_granularity (full, selective),
// sequence_parallel, fp16 / bf16, use_distributed_optimizer (ZeRO-1). The step time is the
// median of the logged iterations, the first dropped when there are more (it holds the
// warm-up).
//
// meshtp's own `train --metrics FILE` (train/metrics_log.hpp): JSON lines, one per step, the
// first line of each run carrying "run" (format "meshtp-metrics", version 1: the model's
// shape, the plan, the ranks, the precision). The step time is the median of the lines'
// "step_s", the first dropped when there are more; the runtime is meshtp's. Refused, naming
// the file and line: a line that is not a JSON object (a truncated file), a step line without
// a positive "step_s", no step line, no "run" (a file from before version 1), another format
// or version, and runs of one file that disagree (a resumed run with another layout).
//
// The fit: one constant with a sourced range in the topology (plan/bands.hpp), the value at
// which plan --3d --evaluate --runtime megatron prices the logged layout at the measured
// step, by bisection over [low/8, 8·high] (the price is monotone in a rate); where even those
// ends do not reach it, the nearer end, with what remains as the residual. Integer constants
// (a GeMM tile) are choices, not rates: not fitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "layout/plan.hpp"
#include "plan/bands.hpp"
#include "plan/layout_search.hpp"
#include "plan/model_spec.hpp"

namespace meshtp::plan {

struct StepLog {
  std::string source;
  std::string format;  // "Megatron-LM" or "meshtp --metrics"
  layout::Runtime runtime = layout::Runtime::kMegatron;  // what ran the step
  ModelSpec model;      // batch: the global batch
  layout::Plan plan;    // the run's layout
  int world_size = 0;
  std::vector<double> iteration_ms;  // every logged iteration time, in order
  double step_s = 0;                 // the median, the first dropped when there are more
};

// Throws naming `source` and what is missing or malformed.
StepLog parse_megatron_log(std::string_view text, const std::string& source);
StepLog parse_meshtp_metrics(std::string_view text, const std::string& source);
// Either, by its first non-blank character: '{' is meshtp's metrics, anything else Megatron-LM.
StepLog parse_step_log(std::string_view text, const std::string& source);

struct ConstantFit {
  ConstantRange range;     // the constant and its sourced range
  double given = 0;        // the topology's value
  double fitted = 0;       // the value that prices the measured step (or the nearer end)
  double measured_s = 0;
  double priced_given_s = 0;   // the step priced at the given value
  double priced_fitted_s = 0;  // at the fitted value
  bool inside() const { return range.low <= fitted && fitted <= range.high; }
  double residual() const { return priced_fitted_s / measured_s - 1; }
};

// The range of `request.topology` whose constant is `constant` (a JSON pointer; empty: the
// non-integer range that moves this layout's step the most across its ends), fitted.
ConstantFit fit_step_constant(const LayoutRequest& request, const layout::Plan& plan,
                              double measured_s, const std::string& constant);

}  // namespace meshtp::plan
