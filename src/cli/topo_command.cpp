// meshtp topo — inspect a topology and write it for the simulator:
//
//   meshtp topo show NAME|FILE [--mesh d1xd2] [--json]
//       the topology and, for a mesh, what each mesh dim gets: the planner's link bandwidth
//       B' (ATP Eq. 3 for hierarchical levels, ring flows on the graph for graph forms) and
//       all-reduce bandwidth B (Eq. 4), and the graph's ring evidence (bottleneck link,
//       concurrent flows, hops, latency) — what a SimGrid simulation of the same rings sees.
//   meshtp topo platform NAME|FILE --out DIR [--mesh d1xd2] [--devices N]
//       DIR/platform.xml (SimGrid) + DIR/hostfile (rank r's host on line r, placed for the
//       mesh; rank r on device r without one).
//
// Pure computation; rank 0 prints.
#include <array>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/layout_flags.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"
#include "plan/report.hpp"
#include "plan/topology_graph.hpp"

namespace meshtp::cli {
namespace {

struct TopoArgs {
  std::string topology;
  std::string mesh;
  bool json = false;
  std::string out;
  int devices = 0;  // 0: the topology's
};

std::optional<std::array<int, 2>> mesh_arg(const std::string& mesh) {
  if (mesh.empty()) return std::nullopt;
  return mesh_2d("--mesh", mesh);
}

std::string rings_line(const topo::Graph& graph, const topo::DimRings& r, int dim) {
  if (r.size == 1) return fmt::format("  dim {}: size 1, no communication\n", dim);
  return fmt::format("  dim {}: {} groups of {} ranks, B'={:.4g} GB/s, L={:.3g} us, longest hop "
                     "{} link(s); bottleneck {}\n",
                     dim, r.groups, r.size, r.link_gbps, r.latency_us, r.max_hops,
                     topo::describe_bottleneck(graph, r));
}

nlohmann::json rings_json(const topo::Graph& graph, const topo::DimRings& r, int dim) {
  nlohmann::json j{{"dim", dim}, {"size", r.size}, {"stride", r.stride}, {"groups", r.groups}};
  if (r.size > 1) {
    j["link_gbps"] = r.link_gbps;
    j["latency_us"] = r.latency_us;
    j["max_hops"] = r.max_hops;
    j["flows"] = r.flows;
    j["bottleneck_link"] = graph.link(r.bottleneck_link).name;
    j["bottleneck"] = topo::describe_bottleneck(graph, r);
  }
  return j;
}

void run_topo_show(const TopoArgs& args) {
  const plan::Topology topology = plan::load_topology(args.topology);
  const std::optional<std::array<int, 2>> mesh = mesh_arg(args.mesh);
  std::optional<plan::MeshLinks> links;
  std::optional<std::array<topo::DimRings, 2>> rings;
  const topo::Graph graph = plan::topology_graph(topology);
  if (mesh) {
    links = plan::mesh_links(topology, (*mesh)[0], (*mesh)[1]);
    rings = plan::graph_rings(topology, graph, (*mesh)[0], (*mesh)[1]);
  }
  if (args.json) {
    nlohmann::json j = plan::to_json(topology);
    if (links) {
      j["mesh_links"] = plan::to_json(*links);
      j["graph_rings"] = nlohmann::json::array(
          {rings_json(graph, (*rings)[0], 0), rings_json(graph, (*rings)[1], 1)});
    }
    out() << j.dump(2) << '\n';
    return;
  }
  out() << plan::format_topology(topology, links);
  out() << fmt::format("graph: {} devices, {} routers, {} links\n", graph.devices(),
                       graph.node_count() - graph.devices(), graph.links().size());
  if (rings) {
    out() << (topology.graph ? "ring flows on the graph (what the planner uses):\n"
                             : "ring flows on the levels' graph (what a simulation sees; the "
                               "planner uses ATP Eq. 3 above):\n");
    out() << rings_line(graph, (*rings)[0], 0) << rings_line(graph, (*rings)[1], 1);
  }
}

void run_topo_platform(const TopoArgs& args) {
  const plan::Topology topology = plan::load_topology(args.topology);
  MESHTP_CHECK(args.devices >= 0, "--devices={} must be positive", args.devices);
  MESHTP_CHECK(args.devices == 0 || args.devices == topology.device_count(),
               "topology '{}' has {} devices but --devices is {}", topology.name,
               topology.device_count(), args.devices);
  const topo::PlatformFiles f = plan::write_platform(topology, mesh_arg(args.mesh), args.out);
  out() << fmt::format("wrote {} ({} hosts, {}) and {}\n", f.platform, f.hosts,
                       topo::name(f.cluster), f.hostfile);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "Inspect topology descriptions, write platforms");
  topo->require_subcommand(1);
  auto show_args = std::make_shared<TopoArgs>();
  CLI::App* show = topo->add_subcommand(
      "show", "Print a topology and, with --mesh, each mesh dim's bandwidth and ring evidence");
  show->add_option("topology", show_args->topology, "Topology preset or JSON file")->required();
  show->add_option("--mesh", show_args->mesh, "A 2D mesh d1xd2 whose dims to evaluate");
  show->add_flag("--json", show_args->json, "Print the topology (and mesh links) as JSON");
  show->callback([show_args] { run_topo_show(*show_args); });

  auto platform_args = std::make_shared<TopoArgs>();
  CLI::App* platform = topo->add_subcommand(
      "platform", "Write a SimGrid platform (DIR/platform.xml) and hostfile (DIR/hostfile)");
  platform->add_option("topology", platform_args->topology, "Topology preset or JSON file")
      ->required();
  platform->add_option("--out", platform_args->out, "Output directory (created if missing)")
      ->required();
  platform->add_option("--mesh", platform_args->mesh,
                       "Place the ranks of mesh d1xd2 (default: rank r on device r)");
  platform->add_option("--devices", platform_args->devices,
                       "Number of devices; must match the topology (default: the topology's)");
  platform->callback([platform_args] { run_topo_platform(*platform_args); });
}

}  // namespace meshtp::cli
