// Candidate: one point of the search space, priced. A plan is a ranked list of these.
//
//   strategy   atp        ATP 2D TP on mesh (d1, d2), both dims > 1, with c chunks
//              megatron   the same model on a mesh with a dim of size 1 (ATP (N,1) is
//                         Megatron-LM's 1D TP), labelled so
//              tp1d       MeshSlice's 1D TP baseline (Megatron + sequence parallelism,
//                         blocking reduce-scatter/all-gather) on mesh (N, 1)
//              meshslice, collective, wang, summa, cannon
//                         2D GeMM algorithms for the four FC layers on mesh (Nr, Nc) = (d1, d2),
//                         per layer dataflow (largest matrix stationary) and tuned knob
//   valid      the model shards evenly and the algorithm applies (else `reason` says why)
//   feasible   valid and the per-rank memory fits the device (else `reason` says why);
//              infeasible candidates stay in the list
#pragma once

#include <array>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "layout/plan.hpp"
#include "plan/fc_layers.hpp"
#include "plan/gemm2d_cost.hpp"
#include "plan/memory.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::plan {

using layout::Strategy;

// "atp,meshslice" → {kAtp, kMeshSlice}; "all" or "" → every strategy.
std::vector<Strategy> parse_strategies(const std::string& text);

// The tuned choice for one FC layer (2D algorithms and 1D TP).
struct FcChoice {
  Linear layer = Linear::kQkv;
  Stationary stationary = Stationary::kOutput;
  Dataflow forward = Dataflow::kOS;  // the forward GeMM's dataflow
  Gemm2dParams params;
  double time_s = 0;  // one layer's fwd + bwd of this FC layer, as the algorithm overlaps it
  // The same passes' communication and local GeMMs as if nothing overlapped: comm_s +
  // compute_s is the layer's time on a machine that cannot overlap a collective with a GeMM
  // (MeshSlice §5.3's TPUv4 slice).
  double comm_s = 0, compute_s = 0;
};

struct Candidate {
  Strategy strategy = Strategy::kAtp;
  std::array<int, 2> mesh{1, 1};
  int chunks = 1;            // atp, megatron
  std::vector<FcChoice> fc;  // 2D algorithms, tp1d
  bool valid = false;
  bool feasible = false;
  std::string reason;  // why not valid / not feasible
  double t_comm_s = 0, t_compute_s = 0, t_step_s = 0;  // meaningful when valid
  double t_elementwise_s = 0;  // the elementwise ops' part of t_compute_s (elementwise.hpp)
  double tflops_per_rank = 0;  // layer FLOPs (ATP §5, Table 2) / N / t_step
  MemoryEstimate memory;
  std::array<std::optional<double>, 2> link_gbps;       // B1', B2'; nullopt for size 1
  std::array<std::optional<double>, 2> allreduce_gbps;  // B1, B2 (Eq. 4)
  std::array<std::optional<BandwidthSource>, 2> bandwidth_source;

  // The knobs in one short string: "chunks=2", "S=4,4,2,8", "Kp=16,…", "wang=h,v,h,h".
  std::string knobs() const;
  // Throws meshtp::Error when the record is inconsistent (mesh sizes < 1, feasible but not
  // valid, negative or non-finite times, a reason missing, …).
  void validate() const;
};

// The planner's name for `strategy` on `mesh`: ATP on a mesh with a dim of size 1 is
// Megatron's (the runtime runs both alike; the planner prices and labels them apart).
Strategy candidate_strategy(Strategy strategy, std::array<int, 2> mesh);

// The layout the runtime runs for a valid candidate: one replica (dp = 1), the candidate's
// mesh, strategy and chunks, and per linear the planner's stationary operand and knob
// (MeshSlice's S; SUMMA's Kp as panels per lcm(d1, d2)); provenance holds the predicted
// times. The one mapping from the planner's output to the runtime's input.
layout::Plan to_plan(const Candidate& c);

std::ostream& operator<<(std::ostream& os, const Candidate& c);
nlohmann::json to_json(const Candidate& c);

}  // namespace meshtp::plan
