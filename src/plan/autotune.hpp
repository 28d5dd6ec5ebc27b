// MeshSlice LLM autotuner, phase 2 (MeshSlice §3.2.2): for one mesh shape, tune each FC
// layer independently. The dataflow is fixed by phase 1 (the larger activation stays put —
// the runtime keeps X or Y, never W; fc_layers.hpp); what is searched, exhaustively, is the
// algorithm's own knob:
//
//   meshslice  slice count S: every divisor of the local sliced extents of all three GeMMs
//   summa      panel count Kp: multiples of lcm(Nr, Nc) dividing all three sliced dims
//   wang       nothing: the row (horizontal) direction is decomposed, as in the runtime
//   collective, cannon: nothing to tune
//
// The objective is the layer's training time: forward + backward-data + backward-weight
// (the forward counted twice under full recomputation). `sweep` keeps every value tried,
// so `--explain` can show the curve (MeshSlice Fig. 14).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/fc_layers.hpp"
#include "plan/gemm2d_cost.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::plan {

struct FcPassCost {
  Pass pass = Pass::kForward;
  Gemm2dShape shape;             // the canonical GeMM (2D algorithms)
  std::optional<Tp1dPass> tp1d;  // the 1D TP collective (1D TP only)
  PipelineEstimate estimate;
  double weight = 1;  // times this pass runs per step (forward: 2 under full recomputation)
};

// One knob value tried: the layer's time as the algorithm overlaps it (what is minimised),
// and as if nothing overlapped, comm_s + compute_s (a machine that cannot overlap a
// collective with a GeMM: MeshSlice §5.3's TPUv4 slice).
struct KnobPoint {
  int knob = 0;
  double total_s = 0;
  double serial_s = 0;
};
struct FcTuning {
  FcShape fc;
  Stationary stationary = Stationary::kOutput;
  Gemm2dParams params;
  std::array<FcPassCost, 3> passes;
  double total_s = 0, comm_s = 0, compute_s = 0;  // weighted over the passes
  double workspace_bytes = 0;                     // peak transient buffers of one pass
  std::vector<KnobPoint> sweep;                   // every knob value tried, in order
  std::optional<std::string> invalid_reason;      // set: nothing valid to run
};

// 2D algorithms. `forward_weight` is 2 under full recomputation, else 1.
// `step_overhead_s`: gemm2d_estimate's, per local GeMM call. `stationary`: the operand kept
// (unset: X or Y, as above; kWeight prices MeshSlice's default dataflow).
FcTuning tune_fc(Algorithm algorithm, const FcShape& fc, const MeshLinks& links,
                 const GemmModel& gemm, int element_bytes, double forward_weight,
                 double step_overhead_s = 0, std::optional<Stationary> stationary = std::nullopt);

// 1D TP on mesh (N, 1): blocking collectives on mesh dim 0.
FcTuning tp1d_fc(const FcShape& fc, const MeshLinks& links, const GemmModel& gemm,
                 int element_bytes, double forward_weight);

}  // namespace meshtp::plan
