// `nvidia-smi topo -m` → one node's hierarchical levels (levels.hpp), for
// `meshtp topo from-nvidia-smi FILE`.
//
// The input is the matrix nvidia-smi prints (NICs and the affinity columns after the GPUs):
//
//           GPU0   GPU1   GPU2   GPU3   NIC0   CPU Affinity   NUMA Affinity   GPU NUMA ID
//   GPU0     X     NV12   SYS    SYS    PIX    0-47           0               N/A
//   …
//   Legend:
//     X    = Self
//     SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
//     NODE = … PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
//     PHB  = … PCIe as well as a PCIe Host Bridge (typically the CPU)
//     PXB  = … multiple PCIe bridges (without traversing the PCIe Host Bridge)
//     PIX  = … at most a single PCIe bridge
//     NV#  = … a bonded set of # NVLinks
//
// Read: the header line (the first whose first field is GPU0; the terminal's underline
// escapes around it, `ESC[4m … ESC[0m`, are dropped), then one row per column up to the first
// blank line; everything after it (the legends) and before the header is ignored. Columns
// after the device columns start at "CPU Affinity" / "NUMA Affinity". Entries: X, NV<n>,
// PIX, PXB, PHB, NODE, SYS (and SOC, older drivers' name for SYS). NIC rows and columns are
// checked and then ignored: NCCL's inter-node traffic is the job of a node level (`--nodes`).
// Errors name the line and the field: a row with fewer entries than columns or an unknown
// entry, a missing or repeated GPU row, X off the diagonal or not on it, an asymmetric
// entry, GPU columns out of order, no header.
//
// The levels. Order the connections closest first — NV# < PIX < PXB < PHB < NODE < SYS — and,
// for each kind present, join the GPUs connected by it or anything closer (single linkage):
// each kind splits the node into blocks, every block of one kind inside one of the next. A
// level's members are the blocks of the kind below it (single GPUs for the innermost), its
// parent the block of its own kind. The levels need each kind's blocks to be consecutive
// GPUs, all of one size (level j has R_j members in every parent); otherwise an error names
// the kind and the blocks. Worked examples:
//   DGX A100, NV12 between every pair of 8:  one level [gpu: 8].
//   8 GPUs, pairs on NVLink bridges (NV12), pairs under PCIe switches (PIX) two by two,
//   sockets (SYS): NV blocks {0,1},{2,3},…; PIX {0-3},{4-7}; SYS {0-7} →
//   [pcie-switch: 2, nvlink: 2, gpu: 2].
//   PCIe box, PIX pairs, sockets of 4 (PHB inside a socket, SYS across):
//   [cpu: 2, pcie-switch: 2, gpu: 2].
//
// Bandwidths (GB/s, the presets' convention: NVLink aggregate over both directions, PCIe and
// networks per direction; topologies/README.md):
//   NVLink level (always the innermost, its members single GPUs): NV<k> is k links of
//     `nvlink_gbps` each (50: NVLink 2, 3 and 4 carry 25 GB/s per direction per link — V100
//     6 links 300 GB/s, A100 12 links 600 GB/s, H100 18 links 900 GB/s: the V100, A100 and
//     H100 whitepapers in docs/references.md). When every pair of the R GPUs shows the same
//     NV<k> and (R−1)·k exceeds the links any GPU has (kMaxNvlinksPerGpu = 18, H100), the
//     links are a GPU's ports into an NVSwitch, not one set per peer: group = k·nvlink_gbps,
//     no p2p cap (DGX A100: 12 × 50 = 600). Otherwise they are direct links: p2p(a, b) =
//     k_ab·nvlink_gbps (0 without NVLink: relayed, levels.hpp), group = the least of the GPUs'
//     Σ_b p2p(a, b) (HGX A100 4-GPU, NV4 between every pair: p2p 200, group 600 — the
//     nvlink-hdr-4x4 preset's GPU level).
//   Every PCIe kind: group = `pcie_gbps` (24, the dual-nvlink-8xa100 preset's nominal PCIe 4.0
//     x16 figure, below the link's 16 GT/s × 16 lanes × 128/130 ÷ 8 = 31.5 GB/s per direction
//     of signalling). The matrix says nothing of PCIe
//     generations, switches' uplinks or the CPU interconnect; calibrate for real numbers
//     (`meshtp calibrate --from-nccl-tests --base` the file this writes).
//   Latency per step: NVLink 3 µs, PIX/PXB 6, PHB/NODE 8, SYS 10 (the presets' modelled
//     values: nvswitch-8xa100, pcie-8xa100, dual-nvlink-8xa100) — nominal too.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topo/levels.hpp"

namespace meshtp::topo {

// nvidia-smi's connection kinds, closest first.
enum class SmiLink { kNvlink, kPix, kPxb, kPhb, kNode, kSys };
const char* name(SmiLink link);  // "NV", "PIX", …

struct SmiEntry {
  SmiLink link = SmiLink::kSys;
  int nvlinks = 0;  // k of NV<k>
  friend bool operator==(const SmiEntry&, const SmiEntry&) = default;
};

// The GPU × GPU part of the matrix.
struct SmiMatrix {
  std::string source;
  int header_line = 0;
  std::vector<int> row_lines;                  // line of GPU i's row
  std::vector<std::vector<SmiEntry>> entries;  // [i][j], i ≠ j; the diagonal is unused
  std::vector<std::string> nics;               // the other device columns, ignored
  // The GPU a line of the file names ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: …)", as
  // `nvidia-smi -L` and vLLM's collect_env print it), or empty.
  std::string gpu;
  int gpus() const { return static_cast<int>(entries.size()); }
};

// What a GPU's name says: its NVLink count and memory (from "40GB" / "80GB" / "141GB" in the
// name), for the models whose NVLink count the vendors' whitepapers give (docs/references.md:
// V100 6, A100 12, H100 and H200 18, B200 18). nullopt for others.
//
// And its datasheet: the dense fp16/bf16 tensor-core peak (no sparsity), the memory
// bandwidth and the SM count, each row naming the datasheet it is from (`datasheet`); the
// memory the datasheet gives where the name gives none. peak_tflops 0 where the name matches
// no row (an "H100 NVL", a "V100" of unknown form factor is taken as SXM2: the name says
// "SXM2" or "PCIE"). What meshtp makes of them (device_from_datasheet): the flat rate and the
// elementwise rate at kDatasheetShare of the peak and the bandwidth, the presets' convention.
struct SmiGpu {
  std::string model;  // "A100"
  int nvlinks = 0;
  double memory_gib = 0;  // 0 when neither the name nor the datasheet gives one
  double peak_tflops = 0;  // dense fp16/bf16 tensor-core peak; 0: no datasheet row
  double memory_gbps = 0;  // 0: no datasheet row
  int units = 0;           // SMs; 0: not given
  std::string variant;     // "A100-SXM4-80GB", the datasheet row's name
  std::string datasheet;   // where peak, bandwidth and SMs come from
};
std::optional<SmiGpu> gpu_named(std::string_view name);

// The presets' share of the datasheet peak and bandwidth: dgx-a100 tflops 250 of 312 and
// elementwise 1600 of 2039 GB/s, dgx-h100 800 of 989.4 and 2680 of 3350 (their descriptions).
inline constexpr double kDatasheetShare = 0.8;
struct DatasheetDevice {
  double memory_gib = 0, tflops = 0, elementwise_gbps = 0;
  double peak_tflops = 0, memory_gbps = 0;
  int units = 0;
};
// nullopt unless `gpu` has a datasheet row.
std::optional<DatasheetDevice> device_from_datasheet(const SmiGpu& gpu);

SmiMatrix parse_nvidia_smi_topo(std::string_view text, const std::string& source);

inline constexpr int kMaxNvlinksPerGpu = 18;

// NVSwitch groups are priced as NCCL measures them, not at the line rate: the dgx-a100
// presets' 200 GB/s, the all-reduce bus bandwidth NCCL measures on 8 A100 on NVSwitch
// (nccl-tests issue #149; topologies/README.md), is a third of NV12's 600 GB/s line rate.
inline constexpr double kNvswitchMeasuredFraction = 200.0 / 600.0;

struct SmiLevelOptions {
  double nvlink_gbps = 50;  // per link, both directions
  double pcie_gbps = 24;    // per direction
  // The GPU's links when its name is known (SmiGpu::nvlinks), else 0: at most 18.
  int gpu_nvlinks = 0;
  std::string gpu_model;  // for the evidence
};

// One level with how it was read, for the summary.
struct SmiLevel {
  Level level;
  SmiLink link = SmiLink::kSys;  // the connection joining its members
  bool nvswitch = false;
  std::string evidence;  // "NV12 between every pair of 8 GPUs: an NVSwitch, 12 × 50 GB/s"
};

// Outermost first, as Topology::levels. Throws naming the kind and the blocks when the
// connections do not nest into levels of consecutive GPUs (above).
std::vector<SmiLevel> smi_levels(const SmiMatrix& matrix, const SmiLevelOptions& options);

}  // namespace meshtp::topo
