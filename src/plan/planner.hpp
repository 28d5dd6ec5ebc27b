// The planner: enumerate every 2D mesh of N devices × strategy × knob, price each candidate
// on the topology, rank them (ATP §3.5 "select the mesh with the smallest cost"; MeshSlice
// §3.2.2 "exhaustive search").
//
//   meshes      every (d1, d2) with d1·d2 = N, d1 descending: N=8 → 8x1, 4x2, 2x4, 1x8
//   atp         chunks ∈ request.chunks ({1, 2, 4}); labelled megatron when a dim is 1
//   tp1d        mesh (N, 1) only
//   2D GeMM     one candidate per mesh and algorithm, its knobs tuned per FC layer
//   elementwise every strategy adds its LayerNorm/GeLU/softmax/bias/residual time in its own
//               layout (elementwise.hpp): atp/megatron kAtp, tp1d kSequenceParallel, the 2D
//               GeMM algorithms kFullySharded; serial with the rest of the layer, except the
//               ATP forward's, which the chunk pipeline overlaps like the GeMMs
//   ranking     feasible first, then valid-but-infeasible, then invalid; by t_step_s
//   best        the first feasible candidate (none: nullopt)
//
// Throws meshtp::Error for bad requests (devices ≠ topology devices, an invalid topology or
// model); a model that does not shard on some mesh only marks those candidates invalid.
#pragma once

#include <array>
#include <iosfwd>
#include <optional>
#include <vector>

#include "plan/atp_cost.hpp"
#include "plan/autotune.hpp"
#include "plan/candidate.hpp"
#include "plan/elementwise.hpp"
#include "plan/mesh_links.hpp"
#include "plan/model_spec.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

struct PlanRequest {
  Topology topology;
  ModelSpec model;
  int devices = 0;
  std::vector<Strategy> strategies = parse_strategies("all");
  std::vector<int> chunks{1, 2, 4};
  // The operand every 2D GeMM linear keeps; unset: the autotuner's choice, the larger of the
  // input and the output (autotune.hpp). kWeight is MeshSlice's default dataflow, its Table 2
  // baseline ("B-stn"): priced, but the whole-model runtime keeps X or Y and refuses it.
  std::optional<layout::Stationary> stationary = std::nullopt;

  // Throws meshtp::Error naming the problem ("topology 'pcie-8xa100' has 8 devices but
  // --devices is 16"); a mixture-of-experts model is refused (the 3D search prices it).
  void validate() const;
};

struct PlanResult {
  std::vector<Candidate> candidates;  // ranked
  std::optional<std::size_t> best;    // index of the first feasible candidate
  layout::Provenance made_for;        // the topology and model (plan/provenance.hpp)
  const Candidate* best_candidate() const { return best ? &candidates[*best] : nullptr; }
};

std::ostream& operator<<(std::ostream& os, const PlanRequest& request);
// One line per candidate, then "best: …" (or "best: none").
std::ostream& operator<<(std::ostream& os, const PlanResult& result);

// Every (d1, d2) with d1·d2 = n, d1 descending.
std::vector<std::array<int, 2>> enumerate_meshes(int n);

PlanResult plan(const PlanRequest& request);
// Throws naming the model unless it is dense: the table above (and the simulator's layer and
// step predictions built on it) price dense layers; a mixture of experts is priced by the 3D
// layout search (layout_search.hpp).
void require_dense_table(const ModelSpec& model);

// The collectives of a tp1d or 2D GeMM candidate outside its linears
// (layout::elementwise_traffic), one step of `model.layers` layers: `launches` calls of each
// per pass, the forward ones twice under full recomputation.
struct ElementwiseCall {
  layout::AtpCall call;
  double count = 0;  // calls per step
};
std::vector<ElementwiseCall> elementwise_calls(const ModelSpec& model, Strategy strategy, int d1,
                                               int d2);

// The per-operator breakdown behind one candidate (`--explain`).
struct Explanation {
  Candidate candidate;
  MeshLinks links;
  std::optional<AtpEstimate> atp;  // atp, megatron
  std::vector<FcTuning> fc;        // 2D algorithms, tp1d
  double attention_s = 0;          // 2D algorithms, tp1d: attention core, one layer, all passes
  double elementwise_comm_s = 0;   // 2D algorithms, tp1d: elementwise_calls, one step
  ElementwiseLayout elementwise_layout = ElementwiseLayout::kAtp;
  ElementwiseEstimate elementwise;  // one layer, every strategy
};

// Prices one candidate. `explanation` (optional) receives the breakdown.
Candidate evaluate(const PlanRequest& request, Strategy strategy, int d1, int d2, int chunks,
                   Explanation* explanation = nullptr);
// The same with the mesh's links already at hand (mesh_links(request.topology, d1, d2)): the
// searches price every strategy and knob of a mesh on one answer.
Candidate evaluate(const PlanRequest& request, const MeshLinks& links, Strategy strategy, int d1,
                   int d2, int chunks, Explanation* explanation = nullptr);

// Re-prices `candidate` with its breakdown.
Explanation explain(const PlanRequest& request, const Candidate& candidate);

// {"candidates": [...], "best": {...} | null}; each row's "plan" carries made_for
nlohmann::json to_json(const PlanResult& result);

}  // namespace meshtp::plan
