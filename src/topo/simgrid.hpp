// SimGrid platform (DTD 4.1) and hostfile for a topology graph: the simulator's view of the
// same links and routes the planner prices (topo/rings.hpp).
//
//   DIR/platform.xml   one zone. A torus becomes a TORUS <cluster> (SimGrid routes it in
//                      dimension order exactly as topo/torus.cpp does), a star of uniform
//                      links a plain <cluster> (device i's private link UP, device j's
//                      DOWN); both scale to thousands of hosts. Every other graph becomes a
//                      Full zone: one
//                      <host> per device (speed = the device's FLOP rate), one <link> per
//                      graph link (bandwidth in B/s, latency in s, sharing_policy SPLITDUPLEX,
//                      SHARED or FATPIPE) and one <route> per ordered pair of devices listing
//                      the graph's route (direction UP = link a→b, DOWN = b→a, for
//                      split-duplex links). Routers are not hosts; they exist only as the
//                      links between them. The device's memory and elementwise rate and the
//                      launch cost of one collective call are zone properties
//                      (meshtp_memory_gib, meshtp_elementwise_gbps, meshtp_launch_us).
//   DIR/hostfile       line r = the host of rank r (the placement), for `smpirun -hostfile`.
//
// What the simulation then charges (for the planner and SimGrid to agree, run SimGrid with
// --cfg=network/model:CM02 --cfg=network/TCP-gamma:0 --cfg=network/crosstraffic:0, i.e. no
// latency or bandwidth correction factors, no TCP window bound and no reverse ACK traffic,
// so a flow of s bytes alone on a route takes Σ latency + s / min bandwidth).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/gemm_model.hpp"
#include "topo/graph.hpp"

namespace meshtp::topo {

struct HostSpec {
  double tflops = 0;            // host speed
  double memory_gib = 0;        // a property
  double elementwise_gbps = 0;  // a property
  // A property: T_launch of one collective call, the topology's launch_us — the number the
  // planner's ring model adds to every collective (plan/mesh_links.hpp); the simulated
  // device's communication engines wait it before each collective (comm/smpi_device.hpp).
  double launch_us = 0;
  // A property: the runtime's host time per 2D GeMM step (the topology's
  // calibration.step_overhead_us), charged by the simulated device once per step
  // (core/simulation.hpp charge_step_overhead) as plan::gemm2d_estimate prices it.
  double step_overhead_us = 0;
  // A property when set: the device's GeMM time by shape (core/gemm_model.hpp), charged by the
  // simulated device for every local GeMM (comm/smpi_device.cpp) as the planner prices it.
  std::optional<GemmModel> gemm = std::nullopt;
};

// How the platform describes the graph.
enum class ClusterKind { kNone, kTorus, kStar };  // Full zone, TORUS cluster, flat cluster
const char* name(ClusterKind k);
ClusterKind cluster_kind(const Graph& graph);

struct PlatformFiles {
  std::string platform;  // DIR/platform.xml
  std::string hostfile;  // DIR/hostfile
  int hosts = 0;
  ClusterKind cluster = ClusterKind::kNone;
};

std::string simgrid_platform_xml(const Graph& graph, const HostSpec& host);
std::string simgrid_hostfile(const Graph& graph, const std::vector<int>& placement);

// Writes both files atomically (DIR is created if missing). Throws meshtp::Error naming the
// path on an I/O failure and on a placement that is not one rank per device.
PlatformFiles write_simgrid_platform(const Graph& graph, const std::vector<int>& placement,
                                     const HostSpec& host, const std::string& dir);

// SimGrid's name for the link a hop crosses in the written platform: a torus cluster's
// "torus_link_from_<netpoint of link.a>_to_<link.b>_UP|DOWN", a star cluster's
// "star_link_<device>_UP|DOWN", a Full zone's "<name>_UP|DOWN" (split-duplex) or "<name>".
// `netpoint` is SimGrid's number for device link.a (torus only). For tests that compare
// SimGrid's routes with ours.
std::string simgrid_link_name(const Graph& graph, const Hop& hop, long netpoint);

}  // namespace meshtp::topo
