// The "graph" object of a topology file: which generator, its parameters, and where the
// logical mesh's ranks go. Kept as the validated JSON so a file round-trips unchanged;
// build_graph() turns it into a Graph. topologies/README.md documents every field.
//
//   {"generator": "torus",     "dims": [4, 4], "link_gbps": 25, "latency_us": 1}
//   {"generator": "tpuv4",     "dims": [4, 8, 8], "link_gbps": 50, "latency_us": 1,
//    "placement": "fold"}
//   {"generator": "switch",    "devices": 8, "link_gbps": 300, "latency_us": 1.5}
//   {"generator": "fat-tree",  "down": [4, 4], "up": [1, 2], "link_gbps": [25, 50]}
//   {"generator": "dragonfly", "groups": 4, "routers": 2, "devices": 2,
//    "device_gbps": 25, "local_gbps": 25, "global_gbps": 12.5}
//   {"generator": "links",     "devices": 3, "routers": ["sw"],
//    "links": [{"from": "dev0", "to": "sw", "gbps": 10}, …],
//    "routes": [{"from": "dev0", "to": "dev2", "links": ["l0", "l2"]}]}
//
// placement: "row-major" (rank r on device r; the default), "fold" (torus and tpuv4 only:
// each mesh dim a ring folded onto the torus, topo/torus.hpp; the tpuv4 default), or an
// explicit array whose entry r is rank r's device.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "topo/graph.hpp"

namespace meshtp::topo {

enum class PlacementKind { kRowMajor, kFold, kExplicit };
const char* name(PlacementKind k);

struct GraphSpec {
  nlohmann::json json;  // the validated "graph" object, as written
  int devices = 0;
  PlacementKind placement = PlacementKind::kRowMajor;
  std::vector<int> explicit_placement;  // kExplicit: device of each rank
  // The graph `json` builds, as validated (graph_spec_from_json): the planner prices on it
  // instead of building 100,000 devices' graph a second time. Not part of the value.
  std::shared_ptr<const Graph> built;
  friend bool operator==(const GraphSpec& a, const GraphSpec& b) { return a.json == b.json; }
};

// Parses and validates (builds the graph once: an unknown generator or field, a zero or
// negative bandwidth, a disconnected graph, a bad placement all throw, naming `where` and
// the value).
GraphSpec graph_spec_from_json(const nlohmann::json& j, std::string_view where);
Graph build_graph(const GraphSpec& spec);

// Device of every row-major rank of mesh `shape` (its product must be the device count).
std::vector<int> place_mesh(const GraphSpec& spec, const Graph& graph,
                            const std::vector<int>& shape);
// Throws unless `placement` puts each of `devices` ranks on its own device in range, naming
// the two ranks that share a device.
void check_placement(const std::vector<int>& placement, int devices);

}  // namespace meshtp::topo
