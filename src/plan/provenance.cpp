#include "plan/provenance.hpp"

namespace meshtp::plan {

layout::Provenance provenance_of(const Topology& topology, const ModelSpec& model,
                                 double predicted_step_s, double predicted_comm_s) {
  return {.topology = topology.name,
          .model = model.name,
          .shape = static_cast<const layout::ModelShape&>(model),
          .predicted_step_s = predicted_step_s,
          .predicted_comm_s = predicted_comm_s};
}

void add_provenance(nlohmann::json& row, const layout::Provenance& made_for) {
  if (!row.is_object() || !row.contains("plan") || !row["plan"].is_object()) return;
  nlohmann::json& plan = row["plan"];
  layout::Provenance p = made_for;
  const auto number = [](const nlohmann::json& j, const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  const nlohmann::json had = plan.value("provenance", nlohmann::json::object());
  p.predicted_step_s = number(had, "predicted_step_s");
  p.predicted_comm_s = number(had, "predicted_comm_s");
  if (p.predicted_step_s == 0) p.predicted_step_s = number(row, "t_step_s");
  if (p.predicted_comm_s == 0) p.predicted_comm_s = number(row, "t_comm_s");
  plan["provenance"] = layout::to_json(layout::Plan{.provenance = p})["provenance"];
}

}  // namespace meshtp::plan
