// Plan validation: the planner's predictions next to what the runtime measured for the same
// candidates (`meshtp bench plan`). Pure: the CLI runs the candidates and fills in the
// measurements; this file lists what to replay, compares, ranks and renders.
//
// Three comparisons per candidate, each isolating one part of the model:
//
//   comm      predicted t_comm_s  vs  the *replay*: the candidate's planned collectives
//             (planned_collectives(): same kind, bytes, mesh dim and count per step) timed on
//             these ranks with every group of the dim active, median of the max over ranks.
//             Tests the calibration and the ring model. This is "the communication
//             estimate's error".
//   exposed   predicted t_step_s − t_compute_s (the communication the overlap model says is
//             not hidden)  vs  the time the real run spent blocked in communication
//             (comm::comm_ledger: blocking collectives + Request::wait; max over ranks, median
//             over steps). Adds what the replay cannot see: the runtime's own collective mix
//             (it differs from Eq. 2 in detail), overlap that does or does not happen, and
//             ranks arriving at a collective at different times (skew).
//   step      predicted t_step_s  vs  measured step (forward + backward, median of the max
//             over ranks). Ranks the candidates: predicted best = the first row (the
//             planner's order), measured best = the smallest measured step.
//
// relative error = (predicted − measured) / measured; positive: the model over-predicts.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "plan/calibration_fit.hpp"
#include "plan/candidate.hpp"
#include "plan/planner.hpp"

namespace meshtp::plan {

// `count` identical calls per step of one collective the planner charges for a candidate.
struct PlannedCollective {
  int mesh_dim = 0;
  int group_size = 1, stride = 1;  // the dim's group shape (what calibration is keyed by)
  CollectiveKind collective = CollectiveKind::kAllReduce;
  double bytes = 0;        // the user buffer (bench/collectives.hpp convention)
  double count = 0;        // calls per step: layers × passes × chunks
  double predicted_s = 0;  // one call, by the planner's ring model
};

// atp / megatron: the block's collectives (layout/atp_traffic.hpp), one call per chunk, as
// atp_cost charges them; tp1d: each FC pass's all-gather or reduce-scatter on dim 0, then the
// LayerNorm gradients' all-reduce (elementwise_calls). Σ count·predicted_s = t_comm_s. Throws
// meshtp::Error for the 2D GeMM strategies and for invalid candidates.
std::vector<PlannedCollective> planned_collectives(const PlanRequest& request,
                                                   const Candidate& candidate);

struct Measured {
  double step_s = 0;
  double wait_s = 0;         // blocked in communication during the real step
  double replay_comm_s = 0;  // Σ count × measured time of the planned collectives; 0 for the
                             // 2D GeMM strategies, whose pipelined calls are not replayed
  double forward_s = 0, backward_s = 0;
  int iterations = 0;
  double check_error = -1;  // the runtime's comparison with the serial reference; -1: not run
};

// One planned collective and its replayed time per call.
struct ReplayedCollective {
  PlannedCollective planned;
  double measured_s = 0;
};

struct ValidationRow {
  Candidate predicted;  // valid, in the planner's rank order
  Measured measured;
  std::vector<ReplayedCollective> collectives;  // optional detail behind replay_comm_s
  double predicted_exposed_s() const { return predicted.t_step_s - predicted.t_compute_s; }
  double step_rel_error() const;
  double comm_rel_error() const;     // vs the replay; NaN without one (2D GeMM)
  double exposed_rel_error() const;  // vs the in-run wait
};

struct ErrorStats {
  double mean_abs = 0, max_abs = 0;
  int count = 0;  // rows with a finite error
};

struct ValidationSummary {
  std::size_t predicted_best = 0;  // row index
  std::size_t measured_best = 0;
  bool best_agrees = false;
  // How much slower the predicted best measured than the measured best (0 when they agree):
  // the cost of trusting the planner here.
  double regret = 0;
  ErrorStats comm, exposed, step;
  // Spearman rank correlation of predicted and measured step times (1: same order); nullopt
  // with fewer than 2 rows or all times tied.
  std::optional<double> step_rank_correlation;
};

// Throws meshtp::Error when there are no rows, a prediction is not valid, or a measured time
// is not positive and finite.
ValidationSummary summarize(const std::vector<ValidationRow>& rows);

// A table: one row per candidate (predicted vs measured step, comm, exposed comm, compute),
// the summary lines, then every distinct replayed collective (group shape, kind, bytes)
// predicted vs measured per call — where the ring fit is off, by message size.
std::string format_validation(const std::vector<ValidationRow>& rows,
                              const ValidationSummary& summary);
// {"rows": [{candidate…, "measured": {…}, "…_rel_error"}], "summary": {…}}
nlohmann::json to_json(const std::vector<ValidationRow>& rows, const ValidationSummary& summary);

}  // namespace meshtp::plan
