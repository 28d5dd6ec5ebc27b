// Topology: ATP's hierarchical communication matrix (ATP §3.4), plus the device and, when
// measured, calibrated collective parameters (MeshSlice §3.2) that override the model.
//
//   levels, outermost first:  level j has R_j members; N = Π_j R_j devices.
//   A level-j member is a block of D_j = Π_{k>j} R_k consecutive ranks (a node, a switch, a
//   ring…); rank r is in member r / D_j, at index (r / D_j) mod R_j inside its parent.
//   group_gbps   what ONE member can push to the other members of its level (GB/s).
//   p2p_gbps     optional member-to-member bandwidth: one number (all pairs) or an R_j×R_j
//                matrix; 0 = no direct link. Caps the group bandwidth (ATP Fig. 7a: a GPU
//                has 600 GB/s of NVLink in total but only 200 GB/s to any one peer).
//   latency_us   per-step synchronisation latency of a ring crossing this level (L_sync).
//
// Worked example (ATP Fig. 7a, preset "nvlink-hdr-4x4"): levels
//   [ {node: R=4, group 25 GB/s (200 Gbps HDR)},  {gpu: R=4, group 600, p2p 200} ].
//
// Units: bandwidths in GB/s = 1e9 bytes/s (the papers' unit), latencies in µs, memory in
// GiB, compute in TFLOP/s (effective, dense GeMM, in the model's precision). The cost
// models convert to bytes, seconds and FLOP/s.
//
// Elementwise rate (plan/elementwise.hpp): `elementwise_gbps`, the effective memory
// bandwidth of one device for streaming ops (LayerNorm, GeLU, softmax, bias, residual),
// bytes read + written per second. Optional: a measured value (calibration) wins, then the
// device's nominal one, then kDefaultElementwiseGbps.
//
// Calibration (written by `meshtp calibrate`, read by the planner): fitted ring parameters
// per *process group shape*. A mesh dim's groups are characterised by (size, stride): mesh
// (d1, d2) has dim-0 groups (d1, stride d2) and dim-1 groups (d2, stride 1). A calibrated
// group overrides the modelled numbers for every mesh dim with that (size, stride), e.g. a
// calibration of mesh 8x1 also serves mesh 1x8. For each collective:
//   T(bytes) = t_launch + (P−1)·(l_sync + shard/bw)     all_gather, reduce_scatter
//              (shard = bytes per rank = bytes/P for reduce_scatter input)
//   T(bytes) = t_launch + 2(P−1)·(l_sync + bytes/(P·bw)) all_reduce (ring = RS + AG)
// so bw is the link bandwidth B' of ATP Eq. 3, and the all-reduce bandwidth of Eq. 4 is
// B = P/(2(P−1))·bw. A missing collective falls back to another fit of the same group.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/gemm_model.hpp"
#include "plan/bands.hpp"
#include "topo/levels.hpp"
#include "topo/spec.hpp"

namespace meshtp::plan {

// The units of topology files (GB/s, µs) in the planner's (B/s, s).
inline constexpr double kGB = 1e9;   // bytes per GB
inline constexpr double kUs = 1e-6;  // seconds per µs

// ATP's hierarchical level (topo/levels.hpp, which also builds its graph).
using topo::Level;

// One measured point of a calibrated collective: the buffer (bytes as above: all_reduce the
// whole buffer, all_gather the gathered output, reduce_scatter the input) and its time.
struct MeasuredTime {
  std::int64_t bytes = 0;
  double us = 0;
  friend bool operator==(const MeasuredTime&, const MeasuredTime&) = default;
};

// Fitted ring parameters of one collective on one group shape, and optionally the times they
// were fitted to (one per size, ascending). With them the planner prices what was measured:
// the line scaled by measured/line, interpolated in log size between the measured sizes and
// held at the nearest one beyond them (mesh_links.hpp, MeasuredCurve). A shaped or congested
// link's time is not a line in the size (docs/cluster.md), and nccl-tests report a curve.
struct CollectiveFit {
  double t_launch_us = 0;
  double l_sync_us = 0;
  double bw_gbps = 0;
  std::vector<MeasuredTime> measured = {};
  friend bool operator==(const CollectiveFit&, const CollectiveFit&) = default;
};

struct GroupCalibration {
  int size = 0;    // P: ranks per group
  int stride = 1;  // rank distance between consecutive group members
  std::optional<CollectiveFit> all_reduce, all_gather, reduce_scatter;
  friend bool operator==(const GroupCalibration&, const GroupCalibration&) = default;
};

// How much two mesh dims' collectives slow each other when they run at once (both dims of a
// 2D GeMM's step, a gather beside a reduce-scatter): measured by calibrate on each mesh whose
// dims both have more than one rank, as
//   sharing = (T_both − max(T_0, T_1)) / min(T_0, T_1)   clamped to [0, 1],
// T_d one dim's all_gather alone, T_both both dims' at once (every group active). 0: the dims
// use separate links; 1: they take turns on one (the two dims of 4 hosts × 1 rank each, which
// leave through one link per host). The planner prices two concurrent collectives a, b of
// the mesh as max(a, b) + sharing·min(a, b) (mesh_links.hpp, MeshLinks::concurrent).
struct MeshSharing {
  std::array<int, 2> mesh{1, 1};
  double sharing = 0;
  friend bool operator==(const MeshSharing&, const MeshSharing&) = default;
};

struct Calibration {
  std::string source;                 // free text: "meshtp calibrate --mesh 2x2, 2025-…"
  std::optional<double> gemm_tflops;  // measured local GeMM rate; overrides device.tflops
  // Measured streaming rate (LayerNorm + GeLU, forward + backward); overrides
  // device.elementwise_gbps.
  std::optional<double> elementwise_gbps;
  // The runtime's host time per step of a pipelined 2D GeMM beyond its priced GeMM and
  // collectives: packing a slice, issuing, testing and waiting on its collectives, ranks
  // trading cores. Fitted by calibrate to MeshSlice at several slice counts
  // (plan/calibration_fit.hpp, fit_step_overhead); charged once per local GeMM call of a 2D
  // GeMM by the planner (gemm2d_estimate) and the simulated runtime alike.
  std::optional<double> step_overhead_us = std::nullopt;
  std::vector<GroupCalibration> groups;
  std::vector<MeshSharing> meshes = {};
  bool empty() const {
    return !gemm_tflops && !elementwise_gbps && !step_overhead_us && groups.empty() &&
           meshes.empty();
  }
  // The measured sharing of mesh d1×d2's dims, if any.
  const MeshSharing* mesh_sharing(int d1, int d2) const;
  friend bool operator==(const Calibration&, const Calibration&) = default;
};

// Elementwise rate of a device whose topology gives none: conservative — a tenth of an
// A100's HBM, a few DDR channels — so the term is never silently zero.
inline constexpr double kDefaultElementwiseGbps = 100;

enum class RateSource { kCalibrated, kNominal, kDefault };
const char* name(RateSource s);

struct Topology {
  std::string name;
  std::string description;
  double memory_gib = 0;  // per device
  double tflops = 0;      // effective per device
  // Optional: GeMM time by shape (core/gemm_model.hpp, the tiled form), every number named in
  // the description; without it every GeMM runs at `tflops`.
  std::optional<GemmModel> gemm;
  std::optional<double> elementwise_gbps;  // nominal streaming bandwidth per device
  double launch_us = 0;   // T_launch of one collective call (modelled)
  // Exactly one of the two forms: ATP's hierarchical matrix (priced by ATP Eq. 3, its graph
  // built by topo::levels_graph for the simulator), or a graph generator (topo/spec.hpp;
  // priced by routing every ring hop over the graph, topo/rings.hpp).
  std::vector<Level> levels;
  std::optional<topo::GraphSpec> graph;
  // Price the hierarchical form's mesh dims on its graph too (every ring hop routed over
  // topo::levels_graph, topo/rings.hpp), as the simulator runs it: sim::simulated_topology
  // sets it. A ring sends to one neighbour per step, so a group of 4 fully connected by
  // 200 GB/s links gets 200 there, where Eq. 3 gives it the group bandwidth (600 on ATP
  // Fig. 7a's NVLink level: NCCL's several rings).
  bool rings_on_graph = false;
  // GPU-to-GPU traffic is staged through host memory (NCCL's peer-to-peer transport off,
  // NCCL_P2P_DISABLE=1: NCCL's shared-memory transport copies every hop through host
  // buffers), so both mesh dims' collectives cross one shared resource, the hosts' memory and
  // PCIe root ports: two collectives of different dims running at once take as long as one
  // after the other (mesh_links: MeshLinks::dim_sharing = 1 on a mesh whose two dims both
  // communicate, unless calibrate measured that mesh's sharing). The simulated platform has
  // no such resource (sim::simulated_topology clears it).
  bool host_staged = false;
  Calibration calibration;
  // Sourced ranges of its constants (plan/bands.hpp): what a price's band spans. Checked
  // against the constants when read.
  std::vector<ConstantRange> ranges;

  int device_count() const;
  // Devices in one member of level j: D_j = Π_{k>j} R_k.
  int devices_per_member(int level) const;
  // The calibration for groups of `size` ranks `stride` apart, if any.
  const GroupCalibration* calibrated_group(int size, int stride) const;
  double effective_tflops() const;  // calibration.gemm_tflops if measured, else tflops
  // What prices a local GeMM: a measured flat rate (calibration.gemm_tflops) wins, then the
  // device's tiled model, then the flat `tflops`.
  GemmModel gemm_model() const;
  // calibration.elementwise_gbps, else elementwise_gbps, else kDefaultElementwiseGbps.
  double effective_elementwise_gbps() const;
  RateSource elementwise_source() const;
  // calibration.step_overhead_us in seconds, else 0 (not modelled: a GPU's launches are
  // asynchronous, and no preset measured one).
  double step_overhead_s() const;

  // Throws meshtp::Error naming the offending field and value (a zero or negative
  // bandwidth, a p2p matrix of the wrong size, …).
  void validate() const;
  friend bool operator==(const Topology&, const Topology&) = default;
};

std::ostream& operator<<(std::ostream& os, const Topology& topology);

// JSON ⇄ Topology. from_json validates; `source` names the input in error messages.
nlohmann::json to_json(const Topology& topology);
Topology topology_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace meshtp::plan
