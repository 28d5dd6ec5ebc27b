// `nvidia-smi topo -m` → a node's levels: the three matrices of tests/topo/data/nvidia-smi
// (NVSwitch, PCIe, NVLink-bridged pairs) give the levels topo/nvidia_smi.hpp's worked
// examples name, and malformed matrices are errors naming the line and the entry.
#include "topo/nvidia_smi.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/atomic_file.hpp"
#include "error_of.hpp"

namespace meshtp::topo {
namespace {

using meshtp::test_support::error_of;

std::string data(const std::string& name) {
  return read_file(std::string(MESHTP_SOURCE_DIR) + "/tests/topo/data/nvidia-smi/" + name);
}

TEST(NvidiaSmi, DgxA100IsOneNvswitchLevel) {
  const SmiMatrix m = parse_nvidia_smi_topo(data("dgx-a100.txt"), "dgx-a100.txt");
  EXPECT_EQ(m.gpus(), 8);
  EXPECT_EQ(m.header_line, 3);  // its underline escapes dropped
  EXPECT_EQ(m.nics, (std::vector<std::string>{"NIC0", "NIC1", "NIC2", "NIC3"}));
  EXPECT_EQ(m.entries[0][7], (SmiEntry{SmiLink::kNvlink, 12}));
  const std::vector<SmiLevel> levels = smi_levels(m, {});
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_TRUE(levels[0].nvswitch);
  EXPECT_EQ(levels[0].level.name, "gpu");
  EXPECT_EQ(levels[0].level.members, 8);
  // 12 links × 50 GB/s = 600 line rate, priced as NCCL measures it: the dgx-a100 presets' 200.
  EXPECT_DOUBLE_EQ(levels[0].level.group_gbps, 200);
  EXPECT_NE(levels[0].evidence.find("priced at 200 GB/s as NCCL measures it"), std::string::npos)
      << levels[0].evidence;
  EXPECT_NE(levels[0].evidence.find("any GPU has (at most 18, H100)"), std::string::npos);
  // The GPU named (an A100): its 12 links, not 18.
  SmiLevelOptions a100;
  a100.gpu_nvlinks = 12;
  a100.gpu_model = "A100";
  EXPECT_NE(smi_levels(m, a100)[0].evidence.find("an A100 has (12)"), std::string::npos);
  EXPECT_EQ(gpu_named("NVIDIA A100-SXM4-40GB")->memory_gib, 40);
  EXPECT_EQ(gpu_named("NVIDIA H100 80GB HBM3")->nvlinks, 18);
  EXPECT_FALSE(gpu_named("NVIDIA Graphics Device").has_value());
  EXPECT_FALSE(levels[0].level.has_p2p());
  EXPECT_EQ(levels[0].level.latency_us, 3);
}

TEST(NvidiaSmi, PcieBoxNestsSwitchesInSockets) {
  const SmiMatrix m = parse_nvidia_smi_topo(data("pcie-box.txt"), "pcie-box.txt");
  const std::vector<SmiLevel> levels = smi_levels(m, {.nvlink_gbps = 50, .pcie_gbps = 24, .gpu_nvlinks = 0, .gpu_model = {}});
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0].link, SmiLink::kSys);
  EXPECT_EQ(levels[0].level.name, "cpu");  // members: the blocks PHB joined
  EXPECT_EQ(levels[0].level.members, 2);
  EXPECT_EQ(levels[0].level.latency_us, 10);
  EXPECT_EQ(levels[1].link, SmiLink::kPhb);
  EXPECT_EQ(levels[1].level.name, "pcie-switch");
  EXPECT_EQ(levels[1].level.members, 2);
  EXPECT_EQ(levels[2].link, SmiLink::kPix);
  EXPECT_EQ(levels[2].level.name, "gpu");
  EXPECT_EQ(levels[2].level.members, 2);
  for (const SmiLevel& l : levels) EXPECT_EQ(l.level.group_gbps, 24);
}

TEST(NvidiaSmi, BridgedPairsAreDirectLinks) {
  const SmiMatrix m = parse_nvidia_smi_topo(data("nvlink-pairs.txt"), "nvlink-pairs.txt");
  const std::vector<SmiLevel> levels = smi_levels(m, {});
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0].level.name, "pcie-tree");  // SYS between the PXB blocks
  EXPECT_EQ(levels[1].level.name, "nvlink");     // PXB between the NVLink pairs
  const Level& pair = levels[2].level;
  EXPECT_FALSE(levels[2].nvswitch);  // 1 × 12 links: one GPU's own
  EXPECT_EQ(pair.members, 2);
  EXPECT_EQ(pair.group_gbps, 600);
  EXPECT_EQ(pair.p2p_uniform_gbps, 600);
  // The levels build a graph (the simulator's), so they are consistent.
  EXPECT_NO_THROW(levels_graph({levels[0].level, levels[1].level, pair}));
}

// A matrix from rows of entries (GPU i's row lists GPU0…GPUn-1), no NICs.
std::string matrix(const std::vector<std::string>& rows) {
  std::string text = "\t";
  for (std::size_t i = 0; i < rows.size(); ++i) text += "GPU" + std::to_string(i) + "\t";
  text += "CPU Affinity\tNUMA Affinity\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    text += "GPU" + std::to_string(i) + "\t" + rows[i] + "\t0-15\t0\n";
  }
  return text + "\nLegend:\n\n  X    = Self\n";
}

TEST(NvidiaSmi, HgxFourGpuIsFullyConnected) {
  // NV4 between every pair of 4 (HGX A100 4-GPU): 3 × 4 = 12 links, a GPU's own, so direct:
  // p2p 200, group 600 (the nvlink-hdr-4x4 preset's GPU level).
  const SmiMatrix m = parse_nvidia_smi_topo(
      matrix({"X NV4 NV4 NV4", "NV4 X NV4 NV4", "NV4 NV4 X NV4", "NV4 NV4 NV4 X"}), "hgx");
  const std::vector<SmiLevel> levels = smi_levels(m, {});
  ASSERT_EQ(levels.size(), 1u);
  EXPECT_FALSE(levels[0].nvswitch);
  EXPECT_EQ(levels[0].level.group_gbps, 600);
  EXPECT_EQ(levels[0].level.p2p_uniform_gbps, 200);
}

TEST(NvidiaSmi, UnevenLinksGiveAMatrix) {
  // A 4-GPU ring of NV2 with NV1 diagonals (a hybrid-cube-mesh quarter): p2p per pair.
  const SmiMatrix m = parse_nvidia_smi_topo(
      matrix({"X NV2 NV1 NV2", "NV2 X NV2 NV1", "NV1 NV2 X NV2", "NV2 NV1 NV2 X"}), "ring");
  const std::vector<SmiLevel> levels = smi_levels(m, {});
  ASSERT_EQ(levels.size(), 1u);
  const Level& l = levels[0].level;
  EXPECT_EQ(l.p2p(0, 1), 100);
  EXPECT_EQ(l.p2p(0, 2), 50);
  EXPECT_EQ(l.group_gbps, 250);  // 2 + 1 + 2 links
}

std::string error(const std::string& text) {
  return error_of([&] { smi_levels(parse_nvidia_smi_topo(text, "m.txt"), {}); });
}

TEST(NvidiaSmi, MalformedMatricesNameTheLine) {
  EXPECT_NE(error("\tGPU0\tGPU1\tGPU1\n").find("'m.txt' line 1: column 'GPU1' appears twice"),
            std::string::npos);
  EXPECT_NE(error(matrix({"X PIX", "SYS X"}))
                .find("'m.txt' line 3: GPU1 to GPU0 is 'SYS', but line 2 has GPU0 to GPU1 as "
                      "'PIX': the matrix must be symmetric"),
            std::string::npos);
  EXPECT_NE(
      error(matrix({"X QPI", "QPI X"})).find("'m.txt' line 2: GPU0 to GPU1: unknown entry 'QPI'"),
      std::string::npos);
  EXPECT_NE(error(matrix({"X PIX", "PIX"})).find("'m.txt' line 3: GPU1 against itself is '0-15'"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU1\n"
                  "GPU0\t X \tPIX\n"
                  "GPU1\tPIX\n")
                .find("'m.txt' line 3: row GPU1 has 1 entries but the header on line 1 has 2 "
                      "device columns"),
            std::string::npos);
  EXPECT_NE(
      error(matrix({"PIX PIX", "PIX X"})).find("line 2: GPU0 against itself is 'PIX', expected X"),
      std::string::npos);
  EXPECT_NE(
      error(matrix({"X X", "PIX X"})).find("line 2: GPU0 to GPU1 is X (self) off the diagonal"),
      std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU1\nGPU0\t X \tPIX\n\n")
                .find("the matrix (header on line 1) has no row for GPU1"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU0\t X \tPIX\n")
                .find("line 3: a second row for GPU0 (the first is on line 2)"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\nmlx5_0\t X\n").find("line 2: row 'mlx5_0' names no column"),
            std::string::npos);
  EXPECT_NE(error("nothing here\n").find("'m.txt' has no nvidia-smi topo -m header line"),
            std::string::npos);
  EXPECT_NE(error("\tGPU0\tGPU2\n")
                .find("line 1: column 'GPU2' after GPU0: the GPU columns must be GPU0, GPU1, … in "
                      "order"),
            std::string::npos);
}

TEST(NvidiaSmi, LevelsNeedConsecutiveBlocks) {
  // GPU0 and GPU2 share a PCIe switch, GPU1 and GPU3 another: blocks {0,2} {1,3}.
  EXPECT_NE(error(matrix({"X SYS PIX SYS", "SYS X SYS PIX", "PIX SYS X SYS", "SYS PIX SYS X"}))
                .find("'m.txt': the GPUs joined by PIX or closer form the blocks {0,2} {1,3}: "
                      "levels need blocks of consecutive GPUs, all of one size"),
            std::string::npos);
  // NVLink pairs {0,1} with NV12, {2,3} with NV4: one level has one pattern.
  EXPECT_NE(error(matrix({"X NV12 SYS SYS", "NV12 X SYS SYS", "SYS SYS X NV4", "SYS SYS NV4 X"}))
                .find("GPU2 to GPU3 has 4 NVLinks, but GPU0 to GPU1 has 12"),
            std::string::npos);
}

// Device defaults from the GPU's name: each datasheet row's dense peak, bandwidth and SMs, and
// the presets' 0.8 share of them; the names the real corpus (tests/data/real) holds.
TEST(NvidiaSmi, TheGpuNameGivesItsDatasheet) {
  const auto h100 = gpu_named("NVIDIA H100 80GB HBM3");  // vllm_collect_env_h100.txt, the logs
  ASSERT_TRUE(h100.has_value());
  EXPECT_EQ(h100->peak_tflops, 989.4);
  EXPECT_EQ(h100->memory_gbps, 3350);
  EXPECT_EQ(h100->units, 132);
  EXPECT_NE(h100->datasheet.find("H100 Tensor Core GPU datasheet"), std::string::npos);
  const auto d = device_from_datasheet(*h100);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->memory_gib, 80);
  EXPECT_DOUBLE_EQ(d->tflops, 791.5);  // 0.8 × 989.4, to 0.1
  EXPECT_EQ(d->elementwise_gbps, 2680);
  // The A100 forms: the preset's device (250 TFLOP/s, 2039 GB/s) for the SXM4-80GB.
  EXPECT_DOUBLE_EQ(device_from_datasheet(*gpu_named("NVIDIA A100-SXM4-80GB"))->tflops, 249.6);
  EXPECT_EQ(gpu_named("NVIDIA A100-SXM4-80GB")->memory_gbps, 2039);
  EXPECT_EQ(gpu_named("NVIDIA A100-SXM4-40GB")->memory_gbps, 1555);
  EXPECT_EQ(gpu_named("NVIDIA A100 80GB PCIe")->memory_gbps, 1935);
  EXPECT_EQ(gpu_named("NVIDIA H100 PCIe")->peak_tflops, 756.5);
  const auto v100 = gpu_named("Tesla V100-SXM2-16GB");  // all_reduce_perf_v100_*.log
  EXPECT_EQ(v100->peak_tflops, 125);
  EXPECT_EQ(v100->memory_gib, 16);
  EXPECT_EQ(gpu_named("NVIDIA H200")->memory_gib, 141);  // the datasheet's, the name has none
  // No row: the name's links still, but no datasheet device.
  EXPECT_EQ(gpu_named("NVIDIA H100 NVL")->nvlinks, 18);
  EXPECT_FALSE(device_from_datasheet(*gpu_named("NVIDIA H100 NVL")).has_value());
  EXPECT_FALSE(gpu_named("NVIDIA GeForce RTX 4090").has_value());
}

}  // namespace
}  // namespace meshtp::topo
