#include "plan/topology_graph.hpp"

#include <cstdint>

#include "core/error.hpp"
#include "topo/levels.hpp"
#include "topo/spec.hpp"

namespace meshtp::plan {

topo::Graph topology_graph(const Topology& topology) {
  return topology.graph ? topo::build_graph(*topology.graph) : topo::levels_graph(topology.levels);
}

std::shared_ptr<const topo::Graph> shared_topology_graph(const Topology& topology) {
  if (topology.graph && topology.graph->built) return topology.graph->built;
  return std::make_shared<const topo::Graph>(topology_graph(topology));
}

std::vector<int> topology_placement(const Topology& topology, const topo::Graph& graph,
                                    const std::vector<int>& shape) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  MESHTP_CHECK(n == topology.device_count(), "mesh of {} ranks does not match topology '{}' "
               "with {} devices", n, topology.name, topology.device_count());
  if (topology.graph) return topo::place_mesh(*topology.graph, graph, shape);
  std::vector<int> identity(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) identity[static_cast<std::size_t>(r)] = r;
  return identity;
}

std::array<topo::DimRings, 2> graph_rings(const Topology& topology, const topo::Graph& graph,
                                          int d1, int d2) {
  const std::vector<int> shape{d1, d2};
  const std::vector<int> placement = topology_placement(topology, graph, shape);
  return {topo::ring_dim(graph, placement, shape, 0), topo::ring_dim(graph, placement, shape, 1)};
}

topo::PlatformFiles write_platform(const Topology& topology,
                                   const std::optional<std::array<int, 2>>& mesh,
                                   const std::string& dir) {
  const topo::Graph graph = topology_graph(topology);
  graph.validate();
  const int n = topology.device_count();
  // Without a mesh the hostfile is the identity: rank r on device r.
  std::vector<int> placement(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) placement[static_cast<std::size_t>(r)] = r;
  if (mesh) {
    const auto [d1, d2] = *mesh;
    MESHTP_CHECK(d1 >= 1 && d2 >= 1 && static_cast<std::int64_t>(d1) * d2 == n, "mesh {}x{} has "
                 "{} ranks but topology '{}' has {} devices", d1, d2,
                 static_cast<std::int64_t>(d1) * d2, topology.name, n);
    placement = topology_placement(topology, graph, {d1, d2});
  }
  const topo::HostSpec host{
      .tflops = topology.effective_tflops(),
      .memory_gib = topology.memory_gib,
      .elementwise_gbps = topology.effective_elementwise_gbps(),
      .launch_us = topology.launch_us,
      .step_overhead_us = topology.calibration.step_overhead_us.value_or(0),
      .gemm = topology.calibration.gemm_tflops ? std::nullopt : topology.gemm};
  return topo::write_simgrid_platform(graph, placement, host, dir);
}

}  // namespace meshtp::plan
