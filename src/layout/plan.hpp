// layout::Plan: a training layout named completely, as data. The planner writes it
// (`meshtp plan --out plan.json`), the runtime runs it (`train/bench layer/block --plan`).
//
//   ranks = dp · pp · cp · d1 · d2, ordered [tp, cp, pp, dp] innermost first (Megatron-Core's
//                     and the Llama 3 paper's order)
//   dp                data-parallel replicas
//   cp, cp_comm       context parallelism: each of cp ranks holds s/cp tokens of every
//                     sequence; cp_comm ring | a2a | a2a+ring | all_gather
//                     (plan/context_parallel.hpp). Priced by the planner; `meshtp train`
//                     runs ring, a2a and a2a+ring on the ATP blocks
//                     (parallel/context_parallel.hpp, train/pipeline_model.hpp), not
//                     all_gather; the other commands refuse it (require_runtime)
//   ep, etp           expert parallelism over a stage's ranks (plan/moe.hpp; etp 0: d1·d2);
//                     the same ranks as attention's tp·cp·dp (folding). Planner only
//   first_stage_layers, last_stage_layers
//                     uneven pipeline stages (Megatron-LM's --decoder-first/last-pipeline-
//                     num-layers): the first / last stage's layer count, the rest split evenly
//                     over the pp − 2 (or pp − 1) others; 0: even. Planner only; with
//                     v interleaved virtual stages a stage's layers go to its v chunks as
//                     evenly as they split (the largest chunk ⌈layers/v⌉ priced)
//   pp, microbatches, schedule, virtual_stages, zero (0–3), recompute
//                     pipeline and ZeRO dimensions (train/pipeline_model.hpp, train/zero.hpp)
//   mesh {d1, d2}     the tensor-parallel mesh of one replica (mesh dims 0 and 1)
//   strategy          atp / megatron (ATP blocks, `chunks` for overlap), tp1d (Megatron with
//                     sequence parallelism on (N, 1)), or a 2D GeMM algorithm on every linear
//   linears           2D GeMM strategies: per linear (qkv, proj, mlp1, mlp2) its algorithm
//                     (unset: the strategy's), stationary operand (unset: auto, the larger
//                     activation) and slices S (MeshSlice: S slices; SUMMA: S panels per
//                     lcm(d1, d2), layout::Gemm2dParams::summa_panels)
//   progress_splits   every strategy: a GeMM that overlaps a pending collective is cut into
//                     this many panels with an MPI progress poke between them (1: none)
//   provenance        where the plan came from; the runtime ignores it
//
// JSON (every key optional, defaults as below; unknown keys and wrong types are errors):
//   {"dp": 1, "pp": 1, "cp": 1, "cp_comm": "ring", "first_stage_layers": 0,
//    "last_stage_layers": 0, "microbatches": 1, "schedule": "gpipe", "virtual_stages": 1,
//    "zero": 0, "recompute": "none", "mesh": [2, 2], "strategy": "meshslice", "chunks": 1,
//    "sequence_parallel": false, "progress_splits": 4,
//    "linears": {"qkv": {"algorithm": "meshslice", "stationary": "output", "slices": 2}, …},
//    "provenance": {"topology": "…", "model": "…", "predicted_step_s": …,
//                   "predicted_comm_s": …}}
#pragma once

#include <array>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "layout/gemm2d_traffic.hpp"
#include "layout/model_shape.hpp"
#include "layout/vocabulary.hpp"

namespace meshtp::layout {

struct LinearPlan {
  std::optional<Algorithm> algorithm{};    // unset: algorithm_of(strategy)
  std::optional<Stationary> stationary{};  // unset: auto
  // The 2D GeMM's parameters: the file's "slices" is gemm2d.slices; the other fields are the
  // planner's own (not in the file), and stay at their defaults in a plan.
  Gemm2dParams gemm2d{};
  bool operator==(const LinearPlan&) const = default;
};

struct Provenance {
  std::string topology{}, model{};
  std::optional<ModelShape> shape{};  // the model's sizes the plan was made for
  double predicted_step_s = 0, predicted_comm_s = 0;
  bool operator==(const Provenance&) const = default;
};

struct Plan {
  int dp = 1;
  int pp = 1;
  int microbatches = 1;
  Schedule schedule = Schedule::kGpipe;
  int virtual_stages = 1;
  int zero = 0;
  Recompute recompute = Recompute::kNone;
  std::array<int, 2> mesh{1, 1};
  Strategy strategy = Strategy::kAtp;
  int chunks = 1;
  bool sequence_parallel = false;
  int progress_splits = 4;
  // The attention core (model/block.hpp): unfused keeps each sequence's T×T probabilities for
  // the backward; fused (ops/flash_attention.hpp) keeps the output and one log-sum-exp per row
  // and recomputes the probabilities tile by tile, O(T) memory. ATP blocks only.
  Attention attention = Attention::kUnfused;
  std::array<LinearPlan, 4> linears{};  // indexed by Linear
  std::optional<Provenance> provenance{};
  int cp = 1;
  CpComm cp_comm = CpComm::kRing;
  int first_stage_layers = 0, last_stage_layers = 0;  // 0: even stages
  // Mixture of experts (MoE parallel folding, plan/moe.hpp): the experts of a pipeline stage's
  // tp·cp·dp ranks split over ep ranks, each expert tensor-parallel over etp (0: the
  // attention's d1·d2, Megatron-LM's default), replicated over edp = tp·cp·dp/(etp·ep).
  int ep = 1;
  int etp = 0;

  int expert_tp() const { return etp > 0 ? etp : mesh[0] * mesh[1]; }
  int ranks() const { return dp * pp * cp * mesh[0] * mesh[1]; }
  bool uneven() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  // The layers of pipeline stage `stage` of `layers` (throws naming the numbers when they do
  // not split: the middle stages' share must be a positive whole number).
  int stage_layers(int layers, int stage) const;
  // Throws naming the field when meshtp's runtime cannot run the plan (uneven stages; cp > 1
  // unless the caller runs context parallelism — `meshtp train` does, runs_cp):
  // "plan: cp=2 (ring): only `meshtp train` runs context parallelism (…)".
  void require_runtime(std::string_view where, bool runs_cp = false) const;
  // The plan as meshtp's runtime runs a model of this shape: a mixture of experts folded onto
  // the tensor-parallel × context-parallel ranks (ep = d1·cp, etp = 1; model/block.hpp) where
  // the plan leaves ep and etp unset — what the memory model must price for a run of it.
  Plan as_runtime_runs(const ModelShape& shape) const;
  const LinearPlan& linear(Linear l) const { return linears[static_cast<std::size_t>(l)]; }
  // The algorithm linear l runs (2D GeMM strategies).
  Algorithm algorithm(Linear l) const;
  // Throws meshtp::Error naming the value ("plan: zero=4 must be 0, 1, 2 or 3").
  void validate() const;
  // The one check that the layout fills the ranks it runs on; throws "the layout dp=1 × pp=1 ×
  // mesh 2x2 = 4 ranks, but there are 2 (the world): …". `where` names the ranks.
  void check_ranks(int ranks, std::string_view where = "the world") const;
  bool operator==(const Plan&) const = default;
};

// One line: "dp=1 mesh=2x2 meshslice qkv=meshslice/output/S2 …".
std::ostream& operator<<(std::ostream& os, const Plan& plan);

nlohmann::json to_json(const Plan& plan);
// Strict: `source` (a file name) is named in every error, with the offending key.
Plan plan_from_json(const nlohmann::json& j, const std::string& source);
Plan load_plan(const std::string& path);

// How a plan made for one model fits the model `name` of `shape` that is about to run it:
// kSame when its provenance names no sizes (a hand-written plan) or the same ones (a vocab of 0
// on either side, the layers alone, matches any), kBatchOnly when only the batch differs (the
// layout runs, priced for another batch), else kOther. `differences` lists them: "hidden 12288
// ≠ 64".
struct ModelFit {
  enum Kind { kSame, kBatchOnly, kOther } kind = kSame;
  std::string differences;
};
ModelFit model_fit(const Plan& plan, const ModelShape& shape);
// The one refusal of a plan made for another model (`source` names the plan: "--plan p.json"):
// throws "{source} was made for model 'a', not this one 'b' (hidden 1 ≠ 2): make a plan for
// this model with `meshtp plan --out`" for kOther; returns the warning for kBatchOnly
// ("{source} was made for another batch (batch 8 ≠ 4): its layout runs, but was priced for
// that batch"), else "".
std::string check_model_fit(const Plan& plan, const ModelShape& shape, std::string_view name,
                            std::string_view source);
void save_plan(const std::string& path, const Plan& plan);  // atomic

// A layout spelled out by its names, as the layout flags (cli/layout_flags.hpp) and the Python
// module's keywords give it; the one place that text becomes a Plan.
struct PlanSpelling {
  int dp = 1, zero = 0, pp = 1, microbatches = 1;
  std::string schedule = "gpipe";  // gpipe, 1f1b, interleaved[:V] (V default 2)
  std::string strategy = "atp";
  int chunks = 1;
  bool sequence_parallel = false;   // always on for tp1d
  std::string stationary = "auto";  // 2D GeMM strategies only, like slices
  Gemm2dParams gemm2d{};            // --slices: gemm2d.slices (every linear's)
  std::string recompute = "none";
  int progress_splits = 4;
  std::string attention = "unfused";
  int ep = 1, etp = 0;  // a mixture of experts' folding (Plan::ep, Plan::etp)
  int cp = 1;           // context parallelism (Plan::cp, Plan::cp_comm)
  std::string cp_comm = "ring";
};
// Context parallelism's all-to-all degree u of cp ranks (1 for ring and all_gather, cp for
// a2a): for a2a+ring (Megatron-Core's hierarchical a2a+p2p) the largest u < cp dividing both cp and the
// heads per tensor-parallel rank, the ring then over cp/u; 1 where none does. The planner
// prices it and the runtime's layer (parallel/context_parallel.hpp) runs it.
int cp_a2a_size(CpComm comm, int cp, int heads_per_tp_rank);

// The spelled-out layout on this tensor-parallel mesh (validated); errors name the flag
// ("--schedule 'x': …").
Plan build_plan(const PlanSpelling& spelling, std::array<int, 2> mesh);
// The same on `ranks` ranks: `mesh`, or without one (ranks/(dp·pp), 1), Megatron 1D over a
// pipeline stage's ranks; checked against the ranks (Plan::check_ranks, `where` names them).
Plan build_plan(const PlanSpelling& spelling, const std::optional<std::array<int, 2>>& mesh,
                int ranks, const std::string& where);

}  // namespace meshtp::layout
