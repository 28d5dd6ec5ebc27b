// Where a plan came from: the topology and the model (name and sizes, vocab included) it was
// made for, and its predicted step. Every plan the planner hands out carries it — `plan
// --out`, `plan --3d --out`, and each row's "plan" in `plan --json`, `plan --3d --json`,
// `plan --3d --evaluate --json` and the Python module's dicts — so a plan read back (`train
// --plan`, `simulate --plan`, meshtp.evaluate(plan=…)) is checked against the model it is
// about to run by layout::model_fit, the one check.
#pragma once

#include <nlohmann/json.hpp>

#include "layout/plan.hpp"
#include "plan/model_spec.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

layout::Provenance provenance_of(const Topology& topology, const ModelSpec& model,
                                 double predicted_step_s = 0, double predicted_comm_s = 0);

// A JSON row holding a "plan" (a candidate, a layout, an evaluation): its plan's provenance
// becomes `made_for`, keeping the plan's own predictions, or the row's "t_step_s" and
// "t_comm_s" where the plan has none. A row without a plan (an invalid candidate) is left.
void add_provenance(nlohmann::json& row, const layout::Provenance& made_for);

}  // namespace meshtp::plan
