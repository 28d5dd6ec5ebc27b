// Named presets and the NAME|FILE resolution rule of `--topology` and `--model`.
//
//   load_topology("pcie-8xa100")        a shipped preset (topologies/pcie-8xa100.json)
//   load_topology("nvlink-network-64")  ATP IC5 for any N ≥ 1, built in code (it has a
//                                        parameter, so there is no file for it)
//   load_topology("my-cluster.json")    a file: anything ending in ".json" or containing '/'
//                                        is a path; otherwise a name that is not a preset is
//                                        tried as a path before giving up
//
// Unknown names throw meshtp::Error listing every valid preset; malformed files throw with
// the file, line and column (core/json_util.hpp).
#pragma once

#include <string>
#include <vector>

#include "plan/model_spec.hpp"
#include "plan/planner.hpp"
#include "plan/topology.hpp"

namespace meshtp::plan {

// Valid --topology names; the parametric one appears as "nvlink-network-N".
std::vector<std::string> topology_preset_names();
std::vector<std::string> model_preset_names();

Topology load_topology(const std::string& name_or_file);
ModelSpec load_model(const std::string& name_or_file);

// ATP IC5: N GPUs on one NVLink-Network switch (H100-class: 900 GB/s NVLink per GPU in the
// papers' bidirectional convention, 80 GiB, 600 TFLOP/s effective). One level, so
// B1' = B2' = GroupBW for every mesh — the premise of ATP Fig. 12.
Topology nvlink_network_topology(int devices);

// Text → value, for callers that hold JSON text (tests, a calibration file just written).
Topology parse_topology(const std::string& text, const std::string& source);
ModelSpec parse_model(const std::string& text, const std::string& source);

// What `meshtp plan` is asked, as its flags (and the Python module's arguments) spell it.
struct PlanQuery {
  std::string topology;            // NAME|FILE, as load_topology takes it
  std::string model;               // NAME|FILE, as load_model takes it
  ShapeOverrides shape;            // --batch, --seq, …
  int devices = 0;                 // 0: the topology's
  std::string strategies = "all";  // --strategies: names joined by commas, or "all"
  std::string chunks = "1,2,4";    // --chunks
};
// The request: topology and model loaded, the shape applied and the model validated,
// strategies and chunks parsed. Throws naming the value (an unknown preset lists them all).
PlanRequest plan_request(const PlanQuery& query);

}  // namespace meshtp::plan
