// A planned layout as a training framework's own configuration (`meshtp plan … --emit F`).
//
//   framework    megatron    Megatron-LM's command-line arguments as a bash file: "# …"
//                            comments, `export CUDA_DEVICE_MAX_CONNECTIONS=1` and one array
//                            MEGATRON_ARGS=(…) (`source FILE`, then "${MEGATRON_ARGS[@]}")
//                torchtitan  torchtitan's job config, TOML: [training], [parallelism],
//                            [activation_checkpoint]
//                deepspeed   DeepSpeed's config JSON, plus a "_meshtp" object it ignores (the
//                            layout's degrees and the comments: JSON has none)
//
// The spellings follow Megatron-LM core_v0.15.0 (megatron/training/arguments.py), torchtitan
// v0.2.2 (torchtitan/config/job_config.py, the last release read from TOML files) and
// DeepSpeed v0.16.4 (docs/_pages/config-json.md; AutoTP training's "tensor_parallel"). The
// mapping, term by term, and what each framework cannot run: docs/emit.md.
//
//   B global batch, dp·pp·d1·d2 devices, m microbatches of b = B/(dp·m) sequences, v virtual
//   stages of L/(pp·v) layers:
//     Megatron-LM   --tensor-model-parallel-size d1·d2, --pipeline-model-parallel-size pp,
//                   --num-layers-per-virtual-pipeline-stage L/(pp·v) (v > 1), --micro-batch-size
//                   b, --global-batch-size B (it derives dp and m), ZeRO-1 as its distributed
//                   optimizer
//     torchtitan    tensor_parallel_degree, pipeline_parallel_degree, data parallelism as DDP
//                   (alone, ZeRO 0: data_parallel_replicate_degree) or FSDP
//                   (data_parallel_shard_degree; resharding after the forward for ZeRO-3)
//     MoE           Megatron-LM --num-experts, --moe-router-topk, --moe-ffn-hidden-size,
//                   --expert-model-parallel-size ep, --expert-tensor-parallel-size etp,
//                   --moe-grouped-gemm (bf16), --moe-token-dispatcher-type alltoall, the aux
//                   loss; torchtitan expert_parallel_degree, expert_tensor_parallel_degree;
//                   DeepSpeed a comment (deepspeed.moe.layer.MoE in the model code)
//     DeepSpeed     train_batch_size B, train_micro_batch_size_per_gpu b,
//                   gradient_accumulation_steps m, zero_optimization.stage, AutoTP's
//                   tensor_parallel.autotp_size; pipeline stages and recomputation are set in
//                   the model code (PipelineModule), not in the JSON
//
// Every emitted layout is chosen, priced and memory-checked as the framework runs a pipeline
// (runtime_of: --runtime megatron). Every string written into the text — names, notes — goes
// through core/text.hpp's escape_text, so it stays inside its comment line.
//
// A layout the framework cannot run as priced — with no more memory and no more
// data-parallel traffic than the planner counted (ATP's 2D mesh, a 2D GeMM algorithm, a ZeRO
// stage or schedule it lacks, …; `inexpressible` says why) — is emitted as one comment line
// saying so, and the configuration of the best layout it can run: the planner's own search
// restricted to those layouts (`best_expressible`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "layout/plan.hpp"
#include "layout/vocabulary.hpp"
#include "plan/layout_search.hpp"
#include "plan/model_spec.hpp"
#include "plan/planner.hpp"

namespace meshtp::plan {

enum class Framework { kMegatron, kTorchtitan, kDeepSpeed };

}  // namespace meshtp::plan

namespace meshtp::layout {
// parse<plan::Framework>("x") throws "unknown framework 'x' (valid: megatron, torchtitan,
// deepspeed)"; name() and fmt print the names.
template <>
struct Names<plan::Framework> {
  static constexpr std::string_view what = "framework";
  static constexpr auto names =
      std::to_array<std::string_view>({"megatron", "torchtitan", "deepspeed"});
};
}  // namespace meshtp::layout

namespace meshtp::plan {

// "Megatron-LM core_v0.15.0", "torchtitan v0.2.2", "DeepSpeed v0.16.4": the release whose
// spelling the output follows.
std::string_view framework_release(Framework f);

// Why `f` cannot run `plan` as the planner priced it, one clause naming the value ("ATP's 2D
// tensor parallelism on the 2x4 mesh: Megatron-LM's is 1D"), or nullopt when it can.
// `precision`: the model's (torchtitan's mixed precision needs FSDP beside TP or PP).
std::optional<std::string> inexpressible(Framework f, const layout::Plan& plan,
                                         Precision precision);
// The same knowing the model: a mixture of experts adds its rules (Megatron-LM: sequence
// parallelism with tp > 1, no expert parallelism in fp16, MoE biases only at etp 1;
// torchtitan: etp 1 or tp, ep inside dp_shard·cp·tp).
std::optional<std::string> inexpressible(Framework f, const layout::Plan& plan,
                                         const ModelSpec& model);

// The runtime whose pricing matches how `f` runs a pipeline: every framework keeps the
// in-flight microbatches' activations (layout::megatron_layers), none re-runs a stage's
// forward as meshtp does; DeepSpeed's pipeline engine is priced as it runs
// (layout::Runtime::kDeepSpeed: its blocking point-to-point, its flush). `plan --emit`
// chooses, prices and memory-checks with it.
constexpr layout::Runtime runtime_of(Framework f) {
  return f == Framework::kDeepSpeed ? layout::Runtime::kDeepSpeed : layout::Runtime::kMegatron;
}

// The fastest feasible layout `f` can run, its provenance's predicted_step_s set, or nullopt
// when none fits. 3D: the search of `request` restricted to those layouts (strategies atp
// and tp1d, one chunk: the request's own strategies and chunks are not used), priced with
// runtime_of(f).
std::optional<layout::Plan> best_expressible(Framework f, LayoutRequest request);
// 2D: the planner's table on the same strategies (one replica on every device, no pipeline)
// with the model's recomputation, or when `f` cannot run that, the fastest of the others.
std::optional<layout::Plan> best_expressible(Framework f, PlanRequest request);
// The 2D table's row `c` as a layout: to_plan with the model's recomputation.
layout::Plan layout_of(const Candidate& c, const ModelSpec& model);

struct EmitRequest {
  layout::Plan plan;     // the planner's layout; provenance's predicted_step_s is printed
  ModelSpec model;       // what it was planned for: batch is the global batch of a step
  std::string topology;  // named in the header
  // What it was priced as: runtime_of(f) (unset: that), or emit refuses.
  std::optional<layout::Runtime> runtime{};
  // The best layout `f` can run (best_expressible), emitted instead when `f` cannot run
  // `plan`; unset there, emit throws saying why.
  std::optional<layout::Plan> fallback{};
  // More comment lines about `plan` ("does not fit: …"), after the line saying it cannot run
  // when the fallback is emitted.
  std::vector<std::string> notes{};
};

// The framework's configuration text for r.plan, or for r.fallback when f cannot run r.plan
// (a first comment line says so). Throws meshtp::Error when neither can run, or when the
// layout does not split the model (batch by dp·m, layers by pp·v).
std::string emit(Framework f, const EmitRequest& r);

}  // namespace meshtp::plan
