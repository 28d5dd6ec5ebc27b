// A Topology as a graph, for the two consumers of one description: the SimGrid platform
// (topo/simgrid.hpp) and the graph-form link model (topo/rings.hpp).
//
//   graph form          the generator's graph, ranks placed by its placement rule
//   hierarchical levels topo::levels_graph, ranks row-major (rank r on device r, as ATP)
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plan/topology.hpp"
#include "topo/graph.hpp"
#include "topo/rings.hpp"
#include "topo/simgrid.hpp"

namespace meshtp::plan {

topo::Graph topology_graph(const Topology& topology);
// The same, shared: a graph form's graph as built when its file was validated.
std::shared_ptr<const topo::Graph> shared_topology_graph(const Topology& topology);

// Device of each row-major rank of `shape` (its product must equal the device count).
std::vector<int> topology_placement(const Topology& topology, const topo::Graph& graph,
                                    const std::vector<int>& shape);

// Both dims of mesh (d1, d2) priced on the graph, whatever the topology's form.
std::array<topo::DimRings, 2> graph_rings(const Topology& topology, const topo::Graph& graph,
                                          int d1, int d2);

// DIR/platform.xml + DIR/hostfile for the topology; ranks placed for `mesh` (row-major
// ranks 0..N−1 on devices 0..N−1 when there is no mesh). Throws when the mesh does not match
// the device count, naming both.
topo::PlatformFiles write_platform(const Topology& topology,
                                   const std::optional<std::array<int, 2>>& mesh,
                                   const std::string& dir);

}  // namespace meshtp::plan
