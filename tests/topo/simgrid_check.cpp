// topo_simgrid_check TOPOLOGY MESH OUTDIR — does SimGrid see the network the planner prices?
//
//   1. writes the topology's platform + hostfile for MESH (as `meshtp topo platform` does)
//      into OUTDIR and loads it with SimGrid (a malformed platform fails here);
//   2. routes: for every ordered pair of devices (a sample of sources above 64 devices),
//      SimGrid's route lists the same links, in the same directions, with the same latency
//      as the graph's route;
//   3. ring steps: for each mesh dim, every rank sends one block to its ring successor at
//      once (one step of a ring collective, all groups together) in the simulator; the step
//      takes bytes / B' (+ the hop latency), B' the planner's ring bandwidth for that dim
//      (topo/rings.hpp), to 1e-3 relative.
// SimGrid runs with the settings topo/simgrid.hpp names: CM02, no TCP window, no cross
// traffic. Exit 0 and a summary line per dim on agreement; exit 1 naming the first mismatch.
#include <fmt/format.h>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/presets.hpp"
#include "plan/topology_graph.hpp"
#include "topo/simgrid.hpp"

namespace sg4 = simgrid::s4u;
using namespace meshtp;

namespace {

constexpr double kBytes = 1e9;  // large, so the latencies are a 1e-5 effect

struct Check {
  plan::Topology topology;
  topo::Graph graph;
  std::vector<int> shape;
  std::vector<int> placement;
  std::array<topo::DimRings, 2> rings;
};

// SimGrid's name for one hop of our route.
std::string expected_name(const Check& c, const topo::Hop& h,
                          const std::map<int, unsigned long>& netpoint_of_device) {
  const int a = c.graph.link(h.link).a;
  const auto it = netpoint_of_device.find(a);
  return topo::simgrid_link_name(c.graph, h,
                                 it == netpoint_of_device.end() ? -1 : static_cast<long>(it->second));
}

void check_routes(const Check& c, sg4::Engine& e) {
  const int n = c.graph.devices();
  std::map<int, unsigned long> netpoint;
  std::vector<sg4::Host*> host(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    host[static_cast<std::size_t>(d)] = e.host_by_name(c.graph.node_name(d));
    netpoint[d] = host[static_cast<std::size_t>(d)]->get_netpoint()->id();
  }
  const int step = n <= 64 ? 1 : n / 16;
  int checked = 0;
  for (int s = 0; s < n; s += step) {
    for (int t = 0; t < n; ++t) {
      if (s == t) continue;
      std::vector<sg4::Link*> links;
      double latency = 0;
      host[static_cast<std::size_t>(s)]->route_to(host[static_cast<std::size_t>(t)], links,
                                                  &latency);
      const topo::Route ours = c.graph.route(s, t);
      std::vector<std::string> want, got;
      for (const topo::Hop& h : ours) want.push_back(expected_name(c, h, netpoint));
      for (const sg4::Link* l : links) got.push_back(l->get_name());
      MESHTP_CHECK(want == got, "route {} -> {}: SimGrid has [{}], the graph [{}]",
                   c.graph.node_name(s), c.graph.node_name(t), fmt::join(got, ", "),
                   fmt::join(want, ", "));
      const double ours_s = c.graph.latency_us(ours) * 1e-6;
      MESHTP_CHECK(std::abs(latency - ours_s) <= 1e-12 + 1e-9 * ours_s, "route {} -> {}: "
                   "SimGrid latency {} s, the graph's {} s", c.graph.node_name(s),
                   c.graph.node_name(t), latency, ours_s);
      ++checked;
    }
  }
  fmt::print("routes: {} of {} device pairs agree ({})\n", checked, n * (n - 1),
             topo::name(topo::cluster_kind(c.graph)));
}

// Successor of each rank in its dim-`dim` ring.
std::vector<int> successors(const std::vector<int>& shape, int dim) {
  const int d1 = shape[0], d2 = shape[1];
  std::vector<int> next(static_cast<std::size_t>(d1) * d2);
  for (int i = 0; i < d1; ++i) {
    for (int j = 0; j < d2; ++j) {
      const int r = i * d2 + j;
      next[static_cast<std::size_t>(r)] =
          dim == 0 ? ((i + 1) % d1) * d2 + j : i * d2 + (j + 1) % d2;
    }
  }
  return next;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    MESHTP_CHECK(argc == 4, "usage: topo_simgrid_check TOPOLOGY MESH OUTDIR");
    Check c{.topology = plan::load_topology(argv[1]), .graph = topo::Graph(1), .shape = {},
            .placement = {}, .rings = {}};
    c.shape = parse_mesh_shape(argv[2]);
    MESHTP_CHECK(c.shape.size() == 2, "MESH must be d1xd2");
    c.graph = plan::topology_graph(c.topology);
    c.placement = plan::topology_placement(c.topology, c.graph, c.shape);
    c.rings = plan::graph_rings(c.topology, c.graph, c.shape[0], c.shape[1]);
    const topo::PlatformFiles files = plan::write_platform(
        c.topology, std::array<int, 2>{c.shape[0], c.shape[1]}, argv[3]);

    int sg_argc = 1;
    char* sg_argv[] = {argv[0], nullptr};
    sg4::Engine e(&sg_argc, sg_argv);
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/TCP-gamma:0");
    sg4::Engine::set_config("network/crosstraffic:0");
    e.load_platform(files.platform);
    check_routes(c, e);

    const int n = c.graph.devices();
    std::vector<int> dims;
    for (int dim = 0; dim < 2; ++dim) {
      if (c.shape[static_cast<std::size_t>(dim)] > 1) dims.push_back(dim);
    }
    auto barrier = sg4::Barrier::create(static_cast<unsigned>(n));
    std::vector<double> finished(dims.size(), 0);
    for (int r = 0; r < n; ++r) {
      sg4::Host* h = e.host_by_name(c.graph.node_name(c.placement[static_cast<std::size_t>(r)]));
      sg4::Actor::create(fmt::format("rank{}", r), h, [&, r] {
        for (std::size_t k = 0; k < dims.size(); ++k) {
          const int next = successors(c.shape, dims[k])[static_cast<std::size_t>(r)];
          static char payload = 0;
          sg4::CommPtr send = sg4::Mailbox::by_name(fmt::format("{}-{}", k, next))
                                  ->put_async(&payload, static_cast<uint64_t>(kBytes));
          sg4::Mailbox::by_name(fmt::format("{}-{}", k, r))->get<char>();
          send->wait();
          finished[k] = std::max(finished[k], sg4::Engine::get_clock());
          barrier->wait();
        }
      });
    }
    e.run();
    double start = 0;
    bool ok = true;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const topo::DimRings& r = c.rings[static_cast<std::size_t>(dims[k])];
      const double simulated = finished[k] - start;
      const double predicted = r.latency_us * 1e-6 + kBytes / (r.link_gbps * 1e9);
      const double error = std::abs(simulated - predicted) / predicted;
      fmt::print("dim {}: planner B'={:.6g} GB/s L={:.3g} us -> {:.6g} s; SimGrid {:.6g} s "
                 "(B'={:.6g} GB/s); error {:.2e}\n",
                 dims[k], r.link_gbps, r.latency_us, predicted, simulated,
                 kBytes / simulated / 1e9, error);
      ok = ok && error <= 1e-3;
      start = finished[k];
    }
    if (!ok) {
      fmt::print(stderr, "error: the simulated ring steps disagree with the planner\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
