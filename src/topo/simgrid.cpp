#include "topo/simgrid.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string_view>
#include <system_error>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "topo/spec.hpp"

namespace meshtp::topo {
namespace {

constexpr const char* kTorusId = "torus";
constexpr const char* kStarId = "star";

const char* policy(Sharing s) {
  switch (s) {
    case Sharing::kSplitDuplex: return "SPLITDUPLEX";
    case Sharing::kShared: return "SHARED";
    case Sharing::kFatpipe: return "FATPIPE";
  }
  return "?";
}

// SimGrid parses "<number><unit>"; plain SI units keep the numbers exact.
// (fmt's "{}" is the shortest text that reads back as the same double.) A value the topology
// checks accept (finite, positive) can still overflow in the conversion — 1e300 GB/s is
// 1e309 B/s = inf — and SimGrid aborts on an infinite rate ("The Impossible Did Happen")
// only once smpirun runs: refuse it here, naming the value, before anything is written.
std::string si(double value, double scale, const char* unit, std::string_view what,
               double given, const char* given_unit) {
  const double v = value * scale;
  MESHTP_CHECK(std::isfinite(v), "{}: {}={} is {} {} in SimGrid's units, which no platform can "
               "hold (at most {:.3g} {})", what, given_unit, given, v, unit,
               std::numeric_limits<double>::max() / scale, given_unit);
  return fmt::format("{}{}", v, unit);
}
std::string bandwidth(const Link& l) {
  return si(l.gbps, 1e9, "Bps", fmt::format("link '{}': bandwidth", l.name), l.gbps, "gbps");
}
std::string latency(const Link& l) { return fmt::format("{}s", l.latency_us * 1e-6); }
std::string speed(double tflops) {
  return si(tflops, 1e12, "f", "platform: device speed", tflops, "tflops");
}

std::string props(const HostSpec& host) {
  std::string out = fmt::format(
      "    <prop id=\"meshtp_memory_gib\" value=\"{}\"/>\n"
      "    <prop id=\"meshtp_elementwise_gbps\" value=\"{}\"/>\n"
      "    <prop id=\"meshtp_launch_us\" value=\"{}\"/>\n"
      "    <prop id=\"meshtp_step_overhead_us\" value=\"{}\"/>\n",
      host.memory_gib, host.elementwise_gbps, host.launch_us, host.step_overhead_us);
  if (host.gemm) {
    // gemm_property's order (comm/smpi_device.cpp reads it back).
    const GemmModel& g = *host.gemm;
    out += fmt::format("    <prop id=\"meshtp_gemm\" value=\"{} {} {} {} {} {} {} {}\"/>\n",
                       g.peak_tflops, g.efficiency, g.units, g.tile_m, g.tile_n, g.split_k_min,
                       g.kernel_us, g.memory_gbps);
  }
  return out;
}

// XML attribute values: names come from user files.
std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

bool uniform_links(const Graph& g) {
  if (g.links().empty()) return false;
  const Link& first = g.links().front();
  for (const Link& l : g.links()) {
    if (l.gbps != first.gbps || l.latency_us != first.latency_us ||
        l.sharing != Sharing::kSplitDuplex) {
      return false;
    }
  }
  return true;
}

}  // namespace

ClusterKind cluster_kind(const Graph& g) {
  if (!uniform_links(g)) return ClusterKind::kNone;
  if (!g.torus_dims.empty()) return ClusterKind::kTorus;
  // A star SimGrid builds itself: link i joins device i to the one switch.
  if (!g.star || static_cast<int>(g.links().size()) != g.devices()) return ClusterKind::kNone;
  for (int i = 0; i < g.devices(); ++i) {
    if (g.link(i).a != i) return ClusterKind::kNone;
  }
  return ClusterKind::kStar;
}

namespace {

// The loopback carries what a host sends itself: in the simulated build, the commands between
// a device and its communication engines (comm/smpi_glue.hpp), a few bytes each.
std::string cluster_xml(const Graph& g, const HostSpec& host, ClusterKind kind) {
  const Link& l = g.links().front();
  const std::string topology =
      kind == ClusterKind::kTorus
          ? fmt::format(" topology=\"TORUS\" topo_parameters=\"{}\"", fmt::join(g.torus_dims, ","))
          : std::string();
  return fmt::format(
      "  <cluster id=\"{}\" prefix=\"dev\" suffix=\"\" radical=\"0-{}\" speed=\"{}\" bw=\"{}\" "
      "lat=\"{}\"{} sharing_policy=\"SPLITDUPLEX\" loopback_bw=\"1000GBps\" "
      "loopback_lat=\"0us\">\n{}  </cluster>\n</platform>\n",
      kind == ClusterKind::kTorus ? kTorusId : kStarId, g.devices() - 1, speed(host.tflops),
      bandwidth(l), latency(l), topology, props(host));
}

}  // namespace

std::string simgrid_platform_xml(const Graph& graph, const HostSpec& host) {
  MESHTP_CHECK(host.tflops > 0, "platform: device tflops={} must be positive", host.tflops);
  MESHTP_CHECK(host.launch_us >= 0 && std::isfinite(host.launch_us),
               "platform: launch_us={} must be a finite number >= 0", host.launch_us);
  MESHTP_CHECK(host.step_overhead_us >= 0 && std::isfinite(host.step_overhead_us),
               "platform: step_overhead_us={} must be a finite number >= 0", host.step_overhead_us);
  std::string out =
      "<?xml version='1.0'?>\n"
      "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
      "<!-- written by meshtp topo platform: one host per device, the graph's links and "
      "routes -->\n"
      "<platform version=\"4.1\">\n";
  if (const ClusterKind kind = cluster_kind(graph); kind != ClusterKind::kNone) {
    return out + cluster_xml(graph, host, kind);
  }
  out += "  <zone id=\"meshtp\" routing=\"Full\">\n" + props(host);
  for (int d = 0; d < graph.devices(); ++d) {
    out += fmt::format("    <host id=\"{}\" speed=\"{}\"/>\n", escape(graph.node_name(d)),
                       speed(host.tflops));
  }
  for (const Link& l : graph.links()) {
    out += fmt::format("    <link id=\"{}\" bandwidth=\"{}\" latency=\"{}\" "
                       "sharing_policy=\"{}\"/>\n",
                       escape(l.name), bandwidth(l), latency(l),
                       policy(l.sharing));
  }
  for (int s = 0; s < graph.devices(); ++s) {
    for (int t = 0; t < graph.devices(); ++t) {
      if (s == t) continue;
      out += fmt::format("    <route src=\"{}\" dst=\"{}\" symmetrical=\"NO\">",
                         escape(graph.node_name(s)), escape(graph.node_name(t)));
      for (const Hop& h : graph.route(s, t)) {
        const Link& l = graph.link(h.link);
        if (l.sharing == Sharing::kSplitDuplex) {
          out += fmt::format("<link_ctn id=\"{}\" direction=\"{}\"/>", escape(l.name),
                             h.forward ? "UP" : "DOWN");
        } else {
          out += fmt::format("<link_ctn id=\"{}\"/>", escape(l.name));
        }
      }
      out += "</route>\n";
    }
  }
  out += "  </zone>\n</platform>\n";
  return out;
}

std::string simgrid_hostfile(const Graph& graph, const std::vector<int>& placement) {
  check_placement(placement, graph.devices());
  std::string out;
  for (const int d : placement) out += graph.node_name(d) + "\n";
  return out;
}

PlatformFiles write_simgrid_platform(const Graph& graph, const std::vector<int>& placement,
                                     const HostSpec& host, const std::string& dir) {
  const std::string hosts = simgrid_hostfile(graph, placement);
  const std::string xml = simgrid_platform_xml(graph, host);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  MESHTP_CHECK(!ec, "cannot create directory '{}': {}", dir, ec.message());
  PlatformFiles files{.platform = (std::filesystem::path(dir) / "platform.xml").string(),
                      .hostfile = (std::filesystem::path(dir) / "hostfile").string(),
                      .hosts = graph.devices(),
                      .cluster = cluster_kind(graph)};
  // Both writers are made (each checks its path) before either file is replaced, so a
  // hostfile path that is refused (a FIFO, a read-only file) leaves platform.xml as it was.
  AtomicFileWriter platform(files.platform);
  AtomicFileWriter hostfile(files.hostfile);
  platform.write(xml);
  hostfile.write(hosts);
  platform.commit();
  hostfile.commit();
  return files;
}

std::string simgrid_link_name(const Graph& graph, const Hop& hop, long netpoint) {
  const Link& l = graph.link(hop.link);
  const char* dir = hop.forward ? "UP" : "DOWN";
  switch (cluster_kind(graph)) {
    case ClusterKind::kTorus:
      return fmt::format("{}_link_from_{}_to_{}_{}", kTorusId, netpoint, l.b, dir);
    case ClusterKind::kStar: return fmt::format("{}_link_{}_{}", kStarId, l.a, dir);
    case ClusterKind::kNone: break;
  }
  return l.sharing == Sharing::kSplitDuplex ? fmt::format("{}_{}", l.name, dir) : l.name;
}

const char* name(ClusterKind k) {
  switch (k) {
    case ClusterKind::kNone: return "Full routing";
    case ClusterKind::kTorus: return "TORUS cluster";
    case ClusterKind::kStar: return "cluster";
  }
  return "?";
}

}  // namespace meshtp::topo
