#include "topo/nvidia_smi.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/parse.hpp"
#include "core/text.hpp"

namespace meshtp::topo {
namespace {

// The line without terminal escapes (ESC [ … m; also their text when the ESC byte was lost
// in a copy) and without a trailing '\r'.
std::string clean(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const bool esc = line[i] == '\x1b';
    const std::size_t open = esc ? i + 1 : i;
    if ((esc || line[i] == '[') && open < line.size() && line[open] == '[') {
      std::size_t j = open + 1;
      while (j < line.size() &&
             (std::isdigit(static_cast<unsigned char>(line[j])) || line[j] == ';')) {
        ++j;
      }
      if (j < line.size() && line[j] == 'm' && (esc || j > open + 1)) {
        i = j;
        continue;
      }
    }
    if (line[i] != '\r') out += line[i];
  }
  return out;
}

std::optional<SmiEntry> entry_of(std::string_view t) {
  static const std::map<std::string_view, SmiLink> kKinds{
      {"PIX", SmiLink::kPix},   {"PXB", SmiLink::kPxb}, {"PHB", SmiLink::kPhb},
      {"NODE", SmiLink::kNode}, {"SYS", SmiLink::kSys}, {"SOC", SmiLink::kSys}};
  if (const auto it = kKinds.find(t); it != kKinds.end()) return SmiEntry{it->second, 0};
  if (t.size() > 2 && t.substr(0, 2) == "NV") {
    int k = 0;
    const auto [end, ec] = std::from_chars(t.data() + 2, t.data() + t.size(), k);
    if (ec == std::errc() && end == t.data() + t.size() && k >= 1 && k <= 64) {
      return SmiEntry{SmiLink::kNvlink, k};
    }
  }
  return std::nullopt;
}

std::string gpu_name(int i) { return fmt::format("GPU{}", i); }

// "0-3", "0,2" for messages.
std::string describe_block(const std::vector<int>& gpus) {
  const bool consecutive = gpus.back() - gpus.front() + 1 == static_cast<int>(gpus.size());
  if (consecutive && gpus.size() > 2) return fmt::format("{}-{}", gpus.front(), gpus.back());
  return fmt::format("{}", fmt::join(gpus, ","));
}

// The name of a level's members: the kind that joined them into blocks.
const char* member_name(std::optional<SmiLink> joined_by) {
  if (!joined_by) return "gpu";
  switch (*joined_by) {
    case SmiLink::kNvlink:
      return "nvlink";
    case SmiLink::kPix:
      return "pcie-switch";
    case SmiLink::kPxb:
      return "pcie-tree";
    case SmiLink::kPhb:
      return "cpu";
    case SmiLink::kNode:
      return "numa";
    case SmiLink::kSys:
      return "node";
  }
  return "gpu";
}

double latency_us(SmiLink link) {
  switch (link) {
    case SmiLink::kNvlink:
      return 3;
    case SmiLink::kPix:
    case SmiLink::kPxb:
      return 6;
    case SmiLink::kPhb:
    case SmiLink::kNode:
      return 8;
    case SmiLink::kSys:
      return 10;
  }
  return 10;
}

// Blocks (components) of the GPUs joined by `link` or closer.
std::vector<std::vector<int>> blocks_of(const SmiMatrix& m, SmiLink link) {
  const int n = m.gpus();
  std::vector<int> parent(static_cast<std::size_t>(n));
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[static_cast<std::size_t>(x)] != x) x = parent[static_cast<std::size_t>(x)];
    return x;
  };
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (m.entries[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)].link <= link) {
        parent[static_cast<std::size_t>(find(b))] = find(a);
      }
    }
  }
  std::map<int, std::vector<int>> by_root;
  for (int g = 0; g < n; ++g) by_root[find(g)].push_back(g);
  std::vector<std::vector<int>> blocks;
  for (auto& [root, gpus] : by_root) blocks.push_back(std::move(gpus));
  std::sort(blocks.begin(), blocks.end());
  return blocks;
}

}  // namespace

const char* name(SmiLink link) {
  switch (link) {
    case SmiLink::kNvlink:
      return "NV";
    case SmiLink::kPix:
      return "PIX";
    case SmiLink::kPxb:
      return "PXB";
    case SmiLink::kPhb:
      return "PHB";
    case SmiLink::kNode:
      return "NODE";
    case SmiLink::kSys:
      return "SYS";
  }
  return "?";
}

namespace {

// The datasheet rows: dense fp16/bf16 tensor-core TFLOP/s (the datasheets print twice this
// "with sparsity" for A100 and later), memory bandwidth GB/s, SMs, memory GB.
struct DatasheetRow {
  std::string_view model, variant;
  bool (*matches)(std::string_view upper_name);
  double peak_tflops, memory_gbps;
  int units;
  double memory_gib;  // where the name gives none
  std::string_view datasheet;
};

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

constexpr std::string_view kV100 =
    "NVIDIA Tesla V100 GPU datasheet (2020): SXM2 125 TFLOPS tensor, PCIe 112, 900 GB/s HBM2; "
    "80 SMs (NVIDIA Tesla V100 GPU Architecture whitepaper, 2017)";
constexpr std::string_view kA100 =
    "NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOPS bf16/fp16 dense (624 with "
    "sparsity); HBM2e 2039 GB/s (80GB SXM), 1935 GB/s (80GB PCIe), 1555 GB/s (40GB); 108 SMs "
    "(NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020)";
constexpr std::string_view kH100 =
    "NVIDIA H100 Tensor Core GPU datasheet (2023): SXM 1979 TFLOPS bf16 with sparsity (989.4 "
    "dense), 3.35 TB/s, PCIe 1513 (756.5 dense), 2 TB/s; 132 / 114 SMs (NVIDIA H100 Tensor Core "
    "GPU Architecture whitepaper, 2022)";
constexpr std::string_view kH200 =
    "NVIDIA H200 Tensor Core GPU datasheet (2024): SXM 1979 TFLOPS bf16 with sparsity (989.4 "
    "dense), 141 GB HBM3e at 4.8 TB/s; 132 SMs (the H100 SXM's die)";
constexpr std::string_view kB200 =
    "NVIDIA HGX B200 datasheet (2024): 36 PFLOPS fp16/bf16 with sparsity per 8 GPUs (2250 dense "
    "each), 64 TB/s HBM3e per 8 GPUs (8000 each), 1.44 TB per 8 GPUs (180 GB each); SMs not "
    "given";

const DatasheetRow kDatasheets[] = {
    {"V100", "V100-PCIE", [](std::string_view n) { return has(n, "PCIE"); }, 112, 900, 80, 16,
     kV100},
    {"V100", "V100-SXM2", [](std::string_view) { return true; }, 125, 900, 80, 16, kV100},
    {"A100", "A100-PCIE-80GB", [](std::string_view n) { return has(n, "PCIE") && has(n, "80"); },
     312, 1935, 108, 80, kA100},
    {"A100", "A100-40GB", [](std::string_view n) { return has(n, "40"); }, 312, 1555, 108, 40,
     kA100},
    {"A100", "A100-SXM4-80GB", [](std::string_view) { return true; }, 312, 2039, 108, 80, kA100},
    {"H100", "H100 NVL", [](std::string_view n) { return has(n, "NVL"); }, 0, 0, 0, 0, kH100},
    {"H100", "H100 PCIe", [](std::string_view n) { return has(n, "PCIE"); }, 756.5, 2000, 114, 80,
     kH100},
    {"H100", "H100 SXM5 80GB", [](std::string_view) { return true; }, 989.4, 3350, 132, 80,
     kH100},
    {"H200", "H200 SXM", [](std::string_view) { return true; }, 989.4, 4800, 132, 141, kH200},
    {"B200", "B200", [](std::string_view) { return true; }, 2250, 8000, 0, 180, kB200},
};

void fill_datasheet(SmiGpu& g, std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const DatasheetRow& row : kDatasheets) {
    if (row.model != g.model || !row.matches(upper)) continue;
    if (row.peak_tflops <= 0) return;  // a form factor without a row: no datasheet values
    g.peak_tflops = row.peak_tflops;
    g.memory_gbps = row.memory_gbps;
    g.units = row.units;
    g.variant = std::string(row.variant);
    g.datasheet = std::string(row.datasheet);
    if (g.memory_gib <= 0) g.memory_gib = row.memory_gib;
    return;
  }
}

}  // namespace

std::optional<SmiGpu> gpu_named(std::string_view name) {
  static const std::pair<std::string_view, int> kLinks[] = {
      {"V100", 6}, {"A100", 12}, {"H100", 18}, {"H200", 18}, {"B200", 18}};
  for (const auto& [model, links] : kLinks) {
    if (name.find(model) == std::string_view::npos) continue;
    SmiGpu g;
    g.model = std::string(model);
    g.nvlinks = links;
    // "80GB", "80 GB", "-80GB": the digits before the first "GB".
    const std::size_t gb = name.find("GB");
    if (gb != std::string_view::npos) {
      std::size_t start = gb;
      while (start > 0 && name[start - 1] == ' ') --start;
      std::size_t digits = start;
      while (digits > 0 && std::isdigit(static_cast<unsigned char>(name[digits - 1]))) --digits;
      int gib = 0;
      if (digits < start &&
          std::from_chars(name.data() + digits, name.data() + start, gib).ec == std::errc() &&
          gib >= 1 && gib <= 4096) {
        g.memory_gib = gib;
      }
    }
    fill_datasheet(g, name);
    return g;
  }
  return std::nullopt;
}

std::optional<DatasheetDevice> device_from_datasheet(const SmiGpu& gpu) {
  if (gpu.peak_tflops <= 0 || gpu.memory_gib <= 0) return std::nullopt;
  return DatasheetDevice{.memory_gib = gpu.memory_gib,
                         .tflops = std::round(kDatasheetShare * gpu.peak_tflops * 10) / 10,
                         .elementwise_gbps = std::round(kDatasheetShare * gpu.memory_gbps),
                         .peak_tflops = gpu.peak_tflops,
                         .memory_gbps = gpu.memory_gbps,
                         .units = gpu.units};
}

SmiMatrix parse_nvidia_smi_topo(std::string_view text, const std::string& source) {
  SmiMatrix m;
  m.source = source;
  std::vector<std::string> columns;  // device columns, GPUs first
  int gpus = 0;
  std::map<std::string, int> row_line;  // column name → its row's line
  std::vector<std::vector<std::string>> gpu_rows;
  int number = 0;
  std::size_t pos = 0;
  bool header = false;
  while (pos <= text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string line = clean(text.substr(pos, end - pos));
    pos = end + 1;
    ++number;
    const std::vector<std::string_view> words = split_words(line);
    const std::vector<std::string> t(words.begin(), words.end());  // rows outlive the line
    const std::string where = fmt::format("'{}' line {}", source, number);
    // Every word goes into messages and the topology's JSON: UTF-8 text only.
    MESHTP_CHECK(valid_utf8(line), "{}: the line is not UTF-8 text: \"{}\"", where,
                 escape_text(line));
    if (m.gpu.empty() && t.size() >= 3 && t[0] == "GPU" && t[1].size() > 1 &&
        t[1].back() == ':' && gpu_named(line)) {
      // "GPU 0: NVIDIA A100-SXM4-80GB (UUID: …)"
      std::string name = line.substr(line.find(':') + 1);
      name = name.substr(0, name.find(" (UUID"));
      const std::size_t first = name.find_first_not_of(" \t");
      const std::size_t last = name.find_last_not_of(" \t");
      m.gpu = first == std::string::npos ? "" : name.substr(first, last - first + 1);
    }
    if (!header) {
      if (t.empty() || t[0] != "GPU0") continue;  // before the matrix: prompts, comments
      header = true;
      m.header_line = number;
      for (const std::string& c : t) {
        if (c == "CPU" || c == "NUMA") break;  // "CPU Affinity", "NUMA Affinity", …
        MESHTP_CHECK(std::find(columns.begin(), columns.end(), c) == columns.end(),
                     "{}: column '{}' appears twice", where, c);
        columns.push_back(c);
      }
      while (gpus < static_cast<int>(columns.size()) &&
             columns[static_cast<std::size_t>(gpus)] == gpu_name(gpus)) {
        ++gpus;
      }
      for (std::size_t i = static_cast<std::size_t>(gpus); i < columns.size(); ++i) {
        MESHTP_CHECK(columns[i].rfind("GPU", 0) != 0,
                     "{}: column '{}' after {}: the GPU columns must be GPU0, GPU1, … in order",
                     where, columns[i], gpu_name(gpus - 1));
        m.nics.push_back(columns[i]);
      }
      gpu_rows.resize(static_cast<std::size_t>(gpus));
      m.row_lines.resize(static_cast<std::size_t>(gpus));
      continue;
    }
    if (t.empty()) break;  // the matrix ends at the first blank line; the legends follow
    const auto col = std::find(columns.begin(), columns.end(), t[0]);
    MESHTP_CHECK(col != columns.end(), "{}: row '{}' names no column of the header on line {} ({})",
                 where, t[0], m.header_line, fmt::join(columns, " "));
    const auto [seen, inserted] = row_line.emplace(t[0], number);
    MESHTP_CHECK(inserted, "{}: a second row for {} (the first is on line {})", where, t[0],
                 seen->second);
    MESHTP_CHECK(t.size() > columns.size(),
                 "{}: row {} has {} entries but the header on line {} has {} device columns", where,
                 t[0], t.size() - 1, m.header_line, columns.size());
    const auto self = static_cast<std::size_t>(col - columns.begin());
    for (std::size_t j = 0; j < columns.size(); ++j) {
      const std::string& e = t[j + 1];
      if (j == self) {
        MESHTP_CHECK(e == "X", "{}: {} against itself is '{}', expected X", where, t[0], e);
        continue;
      }
      MESHTP_CHECK(e != "X", "{}: {} to {} is X (self) off the diagonal", where, t[0], columns[j]);
      MESHTP_CHECK(entry_of(e),
                   "{}: {} to {}: unknown entry '{}' (expected X, NV<n>, PIX, PXB, PHB, NODE or "
                   "SYS)",
                   where, t[0], columns[j], e);
    }
    if (self < static_cast<std::size_t>(gpus)) {
      gpu_rows[self] = t;
      m.row_lines[self] = number;
    }
  }
  MESHTP_CHECK(header, "'{}' has no nvidia-smi topo -m header line (one starting with GPU0)",
               source);
  for (int i = 0; i < gpus; ++i) {
    MESHTP_CHECK(m.row_lines[static_cast<std::size_t>(i)] > 0,
                 "'{}': the matrix (header on line {}) has no row for {}", source, m.header_line,
                 gpu_name(i));
  }
  m.entries.assign(static_cast<std::size_t>(gpus),
                   std::vector<SmiEntry>(static_cast<std::size_t>(gpus)));
  for (int i = 0; i < gpus; ++i) {
    for (int j = 0; j < gpus; ++j) {
      if (i == j) continue;
      const std::string& e = gpu_rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j) + 1];
      const std::string& back =
          gpu_rows[static_cast<std::size_t>(j)][static_cast<std::size_t>(i) + 1];
      MESHTP_CHECK(e == back,
                   "'{}' line {}: {} to {} is '{}', but line {} has {} to {} as '{}': the "
                   "matrix must be symmetric",
                   source, m.row_lines[static_cast<std::size_t>(j)], gpu_name(j), gpu_name(i), back,
                   m.row_lines[static_cast<std::size_t>(i)], gpu_name(i), gpu_name(j), e);
      m.entries[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = *entry_of(e);
    }
  }
  return m;
}

std::vector<SmiLevel> smi_levels(const SmiMatrix& m, const SmiLevelOptions& o) {
  MESHTP_CHECK(o.nvlink_gbps > 0 && o.pcie_gbps > 0,
               "NVLink {} GB/s and PCIe {} GB/s must be positive", o.nvlink_gbps, o.pcie_gbps);
  const int n = m.gpus();
  if (n == 1) {
    return {{.level = {.name = "gpu",
                       .members = 1,
                       .group_gbps = o.pcie_gbps,
                       .p2p_gbps = {},
                       .p2p_uniform_gbps = 0,
                       .latency_us = latency_us(SmiLink::kPix)},
             .link = SmiLink::kPix,
             .nvswitch = false,
             .evidence = "one GPU: no communication inside the node"}};
  }
  std::set<SmiLink> kinds;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a != b)
        kinds.insert(m.entries[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)].link);
    }
  }
  // Nested partitions, innermost first: singletons, then one per kind that changes them.
  std::vector<std::vector<std::vector<int>>> partitions;
  std::vector<SmiLink> joined_by;  // the kind that made partitions[i + 1]
  std::vector<std::vector<int>> current;
  for (int g = 0; g < n; ++g) current.push_back({g});
  partitions.push_back(current);
  std::string uneven;  // a kind whose blocks differ in size: priced as the next kind
  for (const SmiLink k : kinds) {
    std::vector<std::vector<int>> blocks = blocks_of(m, k);
    if (blocks.size() == partitions.back().size()) continue;  // nothing new joined
    const std::size_t size = blocks.front().size();
    bool all_consecutive = true, one_size = true;
    for (const std::vector<int>& b : blocks) {
      all_consecutive &= b.back() - b.front() + 1 == static_cast<int>(b.size());
      one_size &= b.size() == size;
    }
    // Blocks of several sizes (5 GPUs: a PIX pair beside three; or PIX pairs and a lone GPU
    // inside a PXB block) nest into no level of one member count: the GPUs they join are
    // priced as joined by the next kind out (slower, never faster than the hardware), and
    // the evidence says so. A kind that leaves all GPUs apart but joined some is skipped.
    if (all_consecutive && !one_size && k != SmiLink::kNvlink && k != *kinds.rbegin()) {
      std::vector<std::string> all;
      for (const auto& x : blocks) all.push_back(fmt::format("{{{}}}", describe_block(x)));
      uneven += fmt::format("{}{} blocks {} differ in size, priced as the next kind out",
                            uneven.empty() ? "" : "; ", name(k), fmt::join(all, " "));
      continue;
    }
    for (const std::vector<int>& b : blocks) {
      const bool consecutive = b.back() - b.front() + 1 == static_cast<int>(b.size());
      if (!consecutive || b.size() != size) {
        std::vector<std::string> all;
        for (const auto& x : blocks) all.push_back(fmt::format("{{{}}}", describe_block(x)));
        fail(
            "'{}': the GPUs joined by {} or closer form the blocks {}: levels need blocks of "
            "consecutive GPUs, all of one size (renumber with CUDA_VISIBLE_DEVICES, or write "
            "the topology by hand: topologies/README.md)",
            m.source, name(k), fmt::join(all, " "));
      }
    }
    partitions.push_back(std::move(blocks));
    joined_by.push_back(k);
  }

  std::vector<SmiLevel> levels;  // innermost first, reversed at the end
  for (std::size_t j = 0; j < joined_by.size(); ++j) {
    const SmiLink link = joined_by[j];
    const int inner = static_cast<int>(partitions[j].front().size());
    const int members = static_cast<int>(partitions[j + 1].front().size()) / inner;
    SmiLevel l;
    l.link = link;
    l.level.name = member_name(j == 0 ? std::nullopt : std::optional(joined_by[j - 1]));
    l.level.members = members;
    l.level.latency_us = latency_us(link);
    if (link != SmiLink::kNvlink) {
      l.level.group_gbps = o.pcie_gbps;
      l.evidence = fmt::format("{} between {}: PCIe, {} GB/s (nominal)", name(link),
                               inner == 1 ? fmt::format("{} GPUs", members)
                                          : fmt::format("{} blocks of {} GPUs", members, inner),
                               o.pcie_gbps);
      if (!uneven.empty()) {
        l.evidence += " (" + uneven + ")";
        uneven.clear();
      }
      levels.push_back(std::move(l));
      continue;
    }
    // NVLink: the innermost level (NV is the closest kind), members single GPUs. Every block
    // must have the first block's pattern of link counts.
    const std::vector<int>& first = partitions[1].front();
    std::vector<std::vector<int>> k(static_cast<std::size_t>(members),
                                    std::vector<int>(static_cast<std::size_t>(members), 0));
    for (int a = 0; a < members; ++a) {
      for (int b = 0; b < members; ++b) {
        if (a == b) continue;
        const SmiEntry& e = m.entries[static_cast<std::size_t>(first[static_cast<std::size_t>(a)])]
                                     [static_cast<std::size_t>(first[static_cast<std::size_t>(b)])];
        k[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] =
            e.link == SmiLink::kNvlink ? e.nvlinks : 0;
      }
    }
    for (const std::vector<int>& block : partitions[1]) {
      for (int a = 0; a < members; ++a) {
        for (int b = 0; b < members; ++b) {
          if (a == b) continue;
          const SmiEntry& e =
              m.entries[static_cast<std::size_t>(block[static_cast<std::size_t>(a)])]
                       [static_cast<std::size_t>(block[static_cast<std::size_t>(b)])];
          const int links = e.link == SmiLink::kNvlink ? e.nvlinks : 0;
          MESHTP_CHECK(
              links == k[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)],
              "'{}' line {}: GPU{} to GPU{} has {} NVLinks, but GPU{} to GPU{} has {}: "
              "the NVLink blocks {{{}}} and {{{}}} differ, and a level has one pattern",
              m.source, m.row_lines[static_cast<std::size_t>(block[static_cast<std::size_t>(a)])],
              block[static_cast<std::size_t>(a)], block[static_cast<std::size_t>(b)], links,
              first[static_cast<std::size_t>(a)], first[static_cast<std::size_t>(b)],
              k[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)], describe_block(block),
              describe_block(first));
        }
      }
    }
    int uniform = k[0][1];
    bool all_equal = true;
    for (int a = 0; a < members; ++a) {
      for (int b = 0; b < members; ++b) {
        if (a != b && k[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)] != uniform) {
          all_equal = false;
        }
      }
    }
    const int gpu_links = o.gpu_nvlinks > 0 ? o.gpu_nvlinks : kMaxNvlinksPerGpu;
    if (all_equal && (members - 1) * uniform > gpu_links) {
      l.nvswitch = true;
      const double line_rate = uniform * o.nvlink_gbps;
      l.level.group_gbps = line_rate * kNvswitchMeasuredFraction;
      l.evidence = fmt::format(
          "NV{} between every pair of {} GPUs: {} × {} = {} links per GPU if direct, more than "
          "{}, so each GPU's {} links go into an NVSwitch; {} × {} = {} GB/s line rate, priced "
          "at {:.4g} GB/s as NCCL measures it (the dgx-a100 presets' convention: 200 of NV12's "
          "600)",
          uniform, members, members - 1, uniform, (members - 1) * uniform,
          o.gpu_model.empty()
              ? fmt::format("any GPU has (at most {}, H100)", kMaxNvlinksPerGpu)
              : fmt::format("an {} has ({})", o.gpu_model, gpu_links),
          uniform, uniform, o.nvlink_gbps, line_rate, l.level.group_gbps);
    } else {
      double least = 0;
      for (int a = 0; a < members; ++a) {
        const auto& row = k[static_cast<std::size_t>(a)];
        const double total = std::accumulate(row.begin(), row.end(), 0) * o.nvlink_gbps;
        least = a == 0 ? total : std::min(least, total);
      }
      l.level.group_gbps = least;
      if (all_equal) {
        l.level.p2p_uniform_gbps = uniform * o.nvlink_gbps;
      } else {
        for (const auto& row : k) {
          std::vector<double> r;
          for (const int links : row) r.push_back(links * o.nvlink_gbps);
          l.level.p2p_gbps.push_back(std::move(r));
        }
      }
      l.evidence = fmt::format(
          "direct NVLinks between {} GPUs{}: p2p = links × {} GB/s, group {} GB/s (the least "
          "GPU's total)",
          members, all_equal ? fmt::format(" (NV{} every pair)", uniform) : std::string(),
          o.nvlink_gbps, least);
    }
    levels.push_back(std::move(l));
  }
  std::reverse(levels.begin(), levels.end());
  return levels;
}

}  // namespace meshtp::topo
