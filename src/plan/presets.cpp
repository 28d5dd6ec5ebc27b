#include "plan/presets.hpp"

#include <fmt/format.h>

#include <charconv>
#include <filesystem>
#include <string_view>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_util.hpp"
#include "core/parse.hpp"
#include "plan/presets_embedded.hpp"

namespace meshtp::plan {

namespace {

constexpr std::string_view kNvlinkNetworkPrefix = "nvlink-network-";

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "nvlink-network-64" → 64; 0 when the name has the prefix but no valid count.
int parse_nvlink_network_devices(const std::string& name) {
  const std::string_view digits = std::string_view(name).substr(kNvlinkNetworkPrefix.size());
  int n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 1) return 0;
  return n;
}

}  // namespace

std::vector<std::string> topology_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : detail::embedded_topologies()) names.emplace_back(p.name);
  names.push_back(fmt::format("{}N", kNvlinkNetworkPrefix));
  return names;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& p : detail::embedded_models()) names.emplace_back(p.name);
  return names;
}

Topology nvlink_network_topology(int devices) {
  MESHTP_CHECK(devices >= 1 && devices <= (1 << 20),
               "nvlink-network-N: N={} must be between 1 and 2^20", devices);
  Topology t;
  t.name = fmt::format("{}{}", kNvlinkNetworkPrefix, devices);
  t.description = fmt::format(
      "ATP IC5: {} GPUs on one NVLink-Network switch (H100-class, 900 GB/s NVLink per GPU "
      "in the papers' bidirectional convention): one level, B1' = B2' = GroupBW. "
      "elementwise_gbps 2700 is nominal (~80% of H100's 3.35 TB/s HBM3), not from the paper.",
      devices);
  t.memory_gib = 80;
  t.tflops = 600;
  t.elementwise_gbps = 2700;
  t.launch_us = 10;
  Level gpu;
  gpu.name = "gpu";
  gpu.members = devices;
  gpu.group_gbps = 900;
  gpu.latency_us = 3;
  t.levels.push_back(std::move(gpu));
  t.validate();
  return t;
}

Topology parse_topology(const std::string& text, const std::string& source) {
  return topology_from_json(parse_json(text, source), source);
}

ModelSpec parse_model(const std::string& text, const std::string& source) {
  return model_from_json(parse_json(text, source), source);
}

Topology load_topology(const std::string& arg) {
  if (!looks_like_path(arg)) {
    for (const auto& p : detail::embedded_topologies()) {
      if (arg == p.name) return parse_topology(p.json, fmt::format("preset '{}'", p.name));
    }
    if (arg.starts_with(kNvlinkNetworkPrefix)) {
      const int n = parse_nvlink_network_devices(arg);
      MESHTP_CHECK(n > 0, "bad topology '{}': expected nvlink-network-N with N a positive "
                   "integer, like nvlink-network-64", arg);
      return nvlink_network_topology(n);
    }
    MESHTP_CHECK(is_regular_file(arg), "unknown topology '{}': not a preset and no such file; "
                 "presets: {}", arg, join(topology_preset_names()));
  }
  return parse_topology(read_file(arg), fmt::format("'{}'", arg));
}

ModelSpec load_model(const std::string& arg) {
  if (!looks_like_path(arg)) {
    for (const auto& p : detail::embedded_models()) {
      if (arg == p.name) return parse_model(p.json, fmt::format("preset '{}'", p.name));
    }
    MESHTP_CHECK(is_regular_file(arg), "unknown model '{}': not a preset and no such file; "
                 "presets: {}", arg, join(model_preset_names()));
  }
  return parse_model(read_file(arg), fmt::format("'{}'", arg));
}

PlanRequest plan_request(const PlanQuery& query) {
  PlanRequest request;
  request.topology = load_topology(query.topology);
  request.model = query.shape.apply(load_model(query.model));
  MESHTP_CHECK(query.devices >= 0, "--devices={} must be positive", query.devices);
  request.devices = query.devices > 0 ? query.devices : request.topology.device_count();
  request.model.validate();
  request.strategies = parse_strategies(query.strategies);
  request.chunks = parse_positive_ints(query.chunks, "--chunks");
  return request;
}

}  // namespace meshtp::plan
