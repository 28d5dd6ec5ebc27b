// meshtp topo show — a topology's hierarchical communication matrix and, for a mesh, what
// each mesh dim gets from it (ATP Eq. 3 link bandwidth B', Eq. 4 all-reduce bandwidth B):
//
//   meshtp topo show NAME|FILE [--mesh d1xd2] [--json]
//
// Pure computation; rank 0 prints.
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/parse.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"
#include "plan/report.hpp"

namespace meshtp::cli {
namespace {

struct TopoShowArgs {
  std::string topology;
  std::string mesh;
  bool json = false;
};

void run_topo_show(const TopoShowArgs& args) {
  const plan::Topology topology = plan::load_topology(args.topology);
  std::optional<plan::MeshLinks> links;
  if (!args.mesh.empty()) {
    const std::vector<int> shape = parse_mesh_shape(args.mesh);
    MESHTP_CHECK(shape.size() == 2, "--mesh {}: the planner's meshes are 2D, like 2x4",
                 args.mesh);
    links = plan::mesh_links(topology, shape[0], shape[1]);
  }
  if (args.json) {
    nlohmann::json j = plan::to_json(topology);
    if (links) j["mesh_links"] = plan::to_json(*links);
    out() << j.dump(2) << '\n';
    return;
  }
  out() << plan::format_topology(topology, links);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "Inspect topology descriptions");
  topo->require_subcommand(1);
  auto args = std::make_shared<TopoShowArgs>();
  CLI::App* show = topo->add_subcommand(
      "show", "Print a topology's levels and, with --mesh, each mesh dim's bandwidth");
  show->add_option("topology", args->topology, "Topology preset or JSON file")->required();
  show->add_option("--mesh", args->mesh, "A 2D mesh d1xd2 whose dims to evaluate");
  show->add_flag("--json", args->json, "Print the topology (and mesh links) as JSON");
  show->callback([args] { run_topo_show(*args); });
}

}  // namespace meshtp::cli
