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
//   meshtp topo from-nvidia-smi FILE --out TOPOLOGY.json [--name N] [--nodes N --node-gbps G]
//          [--nvlink-gbps 50] [--pcie-gbps 24] [--memory-gib G] [--tflops T] [--json]
//       a topology from `nvidia-smi topo -m`: the node's levels (topo/nvidia_smi.hpp: how the
//       matrix nests into levels, and the nominal bandwidths), under an optional node level
//       of N nodes at G GB/s per node; the device numbers are nvswitch-8xa100's unless given
//       (the matrix names no GPU).
//
// Pure computation; rank 0 prints and writes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/layout_flags.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "core/parse.hpp"
#include "plan/mesh_links.hpp"
#include "plan/presets.hpp"
#include "plan/report.hpp"
#include "plan/topology_graph.hpp"
#include "topo/nvidia_smi.hpp"

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

// nvidia-smi topo -m names no GPU: the device block (memory, FLOP rate, elementwise rate,
// launch cost) is this preset's unless --memory-gib / --tflops say otherwise.
constexpr const char* kDevicePreset = "nvswitch-8xa100";
// The node level's per-step latency: ib-2x8xa100's (nominal).
constexpr double kNodeLatencyUs = 8;

struct FromSmiArgs {
  std::string file;
  std::string out;
  std::string name;
  int nodes = 1;
  double node_gbps = 0;
  topo::SmiLevelOptions links;
  double memory_gib = 0;  // when given; else kDevicePreset's
  double tflops = 0;
  const CLI::Option* memory_option = nullptr;
  const CLI::Option* tflops_option = nullptr;
  bool json = false;
};

void run_topo_from_nvidia_smi(const FromSmiArgs& a) {
  // Paths go into the topology's JSON and --json: UTF-8 text, checked before any work.
  check_name("--out", a.out);
  check_name("the matrix file", a.file);
  MESHTP_CHECK(a.nodes >= 1, "--nodes={} must be at least 1", a.nodes);
  MESHTP_CHECK(a.nodes == 1 || a.node_gbps > 0,
               "--nodes {} needs --node-gbps G (what one node can send to the others, GB/s per "
               "direction, e.g. 25 for one 200 Gb/s HDR NIC)",
               a.nodes);
  MESHTP_CHECK(a.nodes > 1 || a.node_gbps == 0, "--node-gbps needs --nodes N (N ≥ 2)");
  const bool memory_given = a.memory_option->count() > 0;
  const bool tflops_given = a.tflops_option->count() > 0;
  MESHTP_CHECK(!memory_given || (std::isfinite(a.memory_gib) && a.memory_gib > 0),
               "--memory-gib={} must be positive", a.memory_gib);
  MESHTP_CHECK(!tflops_given || (std::isfinite(a.tflops) && a.tflops > 0),
               "--tflops={} must be positive", a.tflops);
  MESHTP_CHECK(std::isfinite(a.links.nvlink_gbps) && std::isfinite(a.links.pcie_gbps) &&
                   std::isfinite(a.node_gbps),
               "--nvlink-gbps, --pcie-gbps and --node-gbps must be finite");
  // The name goes into the topology JSON and, through plan --emit, into configurations.
  const std::string topology_name =
      a.name.empty() ? std::filesystem::path(a.out).stem().string() : a.name;
  check_name(a.name.empty() ? "the name from --out's file stem" : "--name", topology_name);
  check_output_path(a.out);
  const topo::SmiMatrix matrix = topo::parse_nvidia_smi_topo(read_file(a.file), a.file);
  // A GPU the file names sets its link count and, unless --memory-gib says, its memory.
  const std::optional<topo::SmiGpu> named = topo::gpu_named(matrix.gpu);
  topo::SmiLevelOptions links = a.links;
  if (named) {
    links.gpu_nvlinks = named->nvlinks;
    links.gpu_model = named->model;
  }
  const std::vector<topo::SmiLevel> node = topo::smi_levels(matrix, links);

  const plan::Topology device = plan::load_topology(kDevicePreset);
  // The GPU's datasheet (topo/nvidia_smi.hpp) where the file names one with a row; the flags
  // override each value.
  const std::optional<topo::DatasheetDevice> sheet =
      named ? topo::device_from_datasheet(*named) : std::nullopt;
  const bool named_memory = !memory_given && named && named->memory_gib > 0;
  const bool named_tflops = !tflops_given && sheet.has_value();
  const bool preset_device = !memory_given && !tflops_given && !named_memory && !sheet;
  plan::Topology t;
  t.name = topology_name;
  t.memory_gib = memory_given ? a.memory_gib : named_memory ? named->memory_gib : device.memory_gib;
  t.tflops = tflops_given ? a.tflops : named_tflops ? sheet->tflops : device.tflops;
  t.elementwise_gbps = sheet ? std::optional<double>(sheet->elementwise_gbps) : device.elementwise_gbps;
  t.launch_us = device.launch_us;
  t.description = fmt::format(
      "from nvidia-smi topo -m '{}' (meshtp topo from-nvidia-smi): {} GPUs per node{}; NVLink "
      "{} GB/s per link, PCIe {} GB/s and the latencies nominal, not measured; device: {} GiB "
      "({}), {} TFLOP/s ({}), elementwise {} GB/s ({}), launch cost {}'s",
      escape_text(a.file), matrix.gpus(),
      a.nodes > 1 ? fmt::format(", {} nodes at {} GB/s each", a.nodes, a.node_gbps) : "",
      a.links.nvlink_gbps, a.links.pcie_gbps, t.memory_gib,
      memory_given   ? std::string("given")
      : named_memory ? fmt::format("the file's GPU, {}", escape_text(matrix.gpu))
                     : std::string(kDevicePreset),
      t.tflops,
      tflops_given   ? std::string("given")
      : named_tflops ? fmt::format("{} of the {} peak {} TFLOP/s, {}", topo::kDatasheetShare,
                                   named->variant, named->peak_tflops, named->datasheet)
                     : std::string(kDevicePreset),
      *t.elementwise_gbps,
      sheet ? fmt::format("{} of its {} GB/s", topo::kDatasheetShare, named->memory_gbps)
            : std::string(kDevicePreset),
      kDevicePreset);
  if (a.nodes > 1) {
    t.levels.push_back({.name = "node",
                        .members = a.nodes,
                        .group_gbps = a.node_gbps,
                        .p2p_gbps = {},
                        .p2p_uniform_gbps = 0,
                        .latency_us = kNodeLatencyUs});
  }
  for (const topo::SmiLevel& l : node) t.levels.push_back(l.level);
  t.validate();
  const std::string text = plan::to_json(t).dump(2) + "\n";
  plan::parse_topology(text, a.out);  // what `meshtp plan --topology` will read
  if (root()) write_file_atomically(a.out, text);

  if (a.json) {
    nlohmann::json levels = nlohmann::json::array();
    for (const topo::SmiLevel& l : node) {
      levels.push_back({{"name", l.level.name},
                        {"link", topo::name(l.link)},
                        {"nvswitch", l.nvswitch},
                        {"evidence", l.evidence}});
    }
    out() << nlohmann::json{{"out", a.out},
                            {"gpus", matrix.gpus()},
                            {"nics", matrix.nics},
                            {"node_levels", std::move(levels)},
                            {"topology", plan::to_json(t)}}
                 .dump()
          << '\n';
    return;
  }
  out() << fmt::format("{}: {} GPUs{}\n", a.file, matrix.gpus(),
                       matrix.nics.empty()
                           ? std::string()
                           : fmt::format(", {} other device column(s) ignored ({})",
                                         matrix.nics.size(), fmt::join(matrix.nics, " ")));
  out() << "levels, outermost first:\n";
  if (a.nodes > 1) {
    out() << fmt::format(
        "  {:<12} {:>3} members  group {:>7.4g} GB/s  latency {:>3} us  "
        "--nodes, --node-gbps\n",
        "node", a.nodes, a.node_gbps, kNodeLatencyUs);
  }
  for (const topo::SmiLevel& l : node) {
    out() << fmt::format("  {:<12} {:>3} members  group {:>7.4g} GB/s  latency {:>3} us  {}\n",
                         l.level.name, l.level.members, l.level.group_gbps, l.level.latency_us,
                         l.evidence);
  }
  out() << fmt::format(
      "wrote {}: topology '{}', {} devices ({} GiB, {} TFLOP/s each{})\nnext: meshtp topo show {} "
      "--mesh d1xd2  |  meshtp calibrate --from-nccl-tests LOG… --base {} --out …\n",
      a.out, t.name, t.device_count(), t.memory_gib, t.tflops,
      preset_device ? fmt::format(": {}'s device, not read from the matrix", kDevicePreset)
      : named_tflops ? fmt::format(": the {} datasheet's", named->variant)
                     : "",
      a.out, a.out);
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

  auto smi_args = std::make_shared<FromSmiArgs>();
  CLI::App* smi = topo->add_subcommand(
      "from-nvidia-smi",
      "Write a topology of one node's levels (NV#, PIX, PXB, PHB, NODE, SYS) read from "
      "`nvidia-smi topo -m`");
  smi->add_option("file", smi_args->file, "The saved output of nvidia-smi topo -m")->required();
  smi->add_option("--out", smi_args->out, "Topology JSON file to write (atomically)")->required();
  smi->add_option("--name", smi_args->name, "Topology name (default: --out's file stem)");
  smi->add_option("--nodes", smi_args->nodes, "Nodes like this one (default 1)");
  smi->add_option("--node-gbps", smi_args->node_gbps,
                  "With --nodes: what one node sends to the others, GB/s per direction");
  smi->add_option("--nvlink-gbps", smi_args->links.nvlink_gbps,
                  "GB/s per NVLink, both directions (default 50: NVLink 2-4)");
  smi->add_option("--pcie-gbps", smi_args->links.pcie_gbps,
                  "GB/s of a PCIe level, per direction (default 24: PCIe 4.0 x16, nominal)");
  smi_args->memory_option =
      smi->add_option("--memory-gib", smi_args->memory_gib,
                      fmt::format("Device memory, GiB (default: {}'s)", kDevicePreset));
  smi_args->tflops_option =
      smi->add_option("--tflops", smi_args->tflops,
                      fmt::format("Device dense GeMM TFLOP/s (default: {}'s)", kDevicePreset));
  smi->add_flag("--json", smi_args->json, "Print one JSON object: levels with evidence, topology");
  smi->callback([smi_args] { run_topo_from_nvidia_smi(*smi_args); });
}

}  // namespace meshtp::cli
