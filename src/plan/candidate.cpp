#include "plan/candidate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ostream>

#include "core/error.hpp"

namespace meshtp::plan {

const char* name(Strategy s) {
  switch (s) {
    case Strategy::kAtp: return "atp";
    case Strategy::kMegatron: return "megatron";
    case Strategy::kTp1d: return "tp1d";
    case Strategy::kMeshSlice: return "meshslice";
    case Strategy::kCollective: return "collective";
    case Strategy::kWang: return "wang";
    case Strategy::kSumma: return "summa";
    case Strategy::kCannon: return "cannon";
  }
  return "?";
}

Strategy parse_strategy(const std::string& text) {
  for (const Strategy s : kAllStrategies) {
    if (text == name(s)) return s;
  }
  std::string names;
  for (const Strategy s : kAllStrategies) names += (names.empty() ? "" : ", ") +
                                                   std::string(name(s));
  fail("unknown strategy '{}'; valid: {} (or all)", text, names);
}

std::vector<Strategy> parse_strategies(const std::string& text) {
  if (text.empty() || text == "all") return {kAllStrategies.begin(), kAllStrategies.end()};
  std::vector<Strategy> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    const Strategy s = parse_strategy(item);
    bool seen = false;
    for (const Strategy o : out) seen = seen || o == s;
    if (!seen) out.push_back(s);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

bool is_gemm2d(Strategy s) {
  return s == Strategy::kMeshSlice || s == Strategy::kCollective || s == Strategy::kWang ||
         s == Strategy::kSumma || s == Strategy::kCannon;
}

Gemm2dAlgorithm gemm2d_algorithm(Strategy s) {
  switch (s) {
    case Strategy::kMeshSlice: return Gemm2dAlgorithm::kMeshSlice;
    case Strategy::kCollective: return Gemm2dAlgorithm::kCollective;
    case Strategy::kWang: return Gemm2dAlgorithm::kWang;
    case Strategy::kSumma: return Gemm2dAlgorithm::kSumma;
    case Strategy::kCannon: return Gemm2dAlgorithm::kCannon;
    default: fail("strategy {} is not a 2D GeMM algorithm", name(s));
  }
}

std::string Candidate::knobs() const {
  if (strategy == Strategy::kAtp || strategy == Strategy::kMegatron) {
    return fmt::format("chunks={}", chunks);
  }
  if (fc.empty()) return "";
  std::string values;
  for (const FcChoice& f : fc) {
    if (!values.empty()) values += ',';
    switch (strategy) {
      case Strategy::kMeshSlice: values += fmt::format("{}", f.params.slices); break;
      case Strategy::kSumma: values += fmt::format("{}", f.params.panels); break;
      case Strategy::kWang:
        values += f.params.wang_decomposed == Direction::kVertical ? "v" : "h";
        break;
      default: values += name(f.forward); break;
    }
  }
  switch (strategy) {
    case Strategy::kMeshSlice: return "S=" + values;
    case Strategy::kSumma: return "Kp=" + values;
    case Strategy::kWang: return "split=" + values;
    default: return "df=" + values;
  }
}

void Candidate::validate() const {
  const std::string where = fmt::format("candidate {} {}x{}", name(strategy), mesh[0], mesh[1]);
  MESHTP_CHECK(mesh[0] >= 1 && mesh[1] >= 1, "{}: mesh sizes must be positive", where);
  MESHTP_CHECK(chunks >= 1, "{}: chunks={} must be positive", where, chunks);
  const bool one_dim = mesh[0] == 1 || mesh[1] == 1;
  MESHTP_CHECK(strategy != Strategy::kAtp || !one_dim,
               "{}: a mesh with a dim of size 1 is labelled megatron, not atp", where);
  MESHTP_CHECK(strategy != Strategy::kMegatron || one_dim,
               "{}: megatron needs a mesh dim of size 1", where);
  MESHTP_CHECK(strategy != Strategy::kTp1d || mesh[1] == 1, "{}: tp1d runs on mesh (N, 1)",
               where);
  MESHTP_CHECK(!feasible || valid, "{}: feasible but not valid", where);
  MESHTP_CHECK(feasible || !reason.empty(), "{}: not feasible but no reason given", where);
  if (valid) {
    for (const double t : {t_comm_s, t_compute_s, t_step_s, t_elementwise_s}) {
      MESHTP_CHECK(std::isfinite(t) && t >= 0, "{}: time {} must be finite and >= 0", where, t);
    }
    MESHTP_CHECK(t_elementwise_s <= t_compute_s * (1 + 1e-12),
                 "{}: elementwise time {} exceeds the compute time {} it is part of", where,
                 t_elementwise_s, t_compute_s);
    MESHTP_CHECK(std::isfinite(memory.total_bytes()) && memory.total_bytes() > 0,
                 "{}: memory {} bytes must be positive", where, memory.total_bytes());
    if (is_gemm2d(strategy) || strategy == Strategy::kTp1d) {
      MESHTP_CHECK(fc.size() == 4, "{}: needs one choice per FC layer, has {}", where,
                   fc.size());
    }
  }
}

std::ostream& operator<<(std::ostream& os, const Candidate& c) {
  os << fmt::format("{} {}x{} {}", name(c.strategy), c.mesh[0], c.mesh[1], c.knobs());
  if (!c.valid) return os << " invalid: " << c.reason;
  os << fmt::format(": step {:.4g} s (comm {:.4g} s, compute {:.4g} s), {:.2f} GiB", c.t_step_s,
                    c.t_comm_s, c.t_compute_s, c.memory.total_gib());
  if (!c.feasible) os << " infeasible: " << c.reason;
  return os;
}

namespace {

template <typename T>
nlohmann::json pair_or_null(const std::array<std::optional<T>, 2>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) {
    if (v) {
      out.push_back(*v);
    } else {
      out.push_back(nullptr);
    }
  }
  return out;
}

nlohmann::json nullable(bool present, double value) {
  return present ? nlohmann::json(value) : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json to_json(const Candidate& c) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  nlohmann::json j{
      {"strategy", name(c.strategy)},
      {"mesh", {c.mesh[0], c.mesh[1]}},
      {"knobs", c.knobs()},
      {"valid", c.valid},
      {"feasible", c.feasible},
      {"reason", c.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.reason)},
      {"t_comm_s", nullable(c.valid, c.t_comm_s)},
      {"t_compute_s", nullable(c.valid, c.t_compute_s)},
      {"t_elementwise_s", nullable(c.valid, c.t_elementwise_s)},
      {"t_step_s", nullable(c.valid, c.t_step_s)},
      {"tflops_per_rank", nullable(c.valid, c.tflops_per_rank)},
      {"memory_gib", nullable(c.valid, c.memory.total_gib())},
      {"link_gbps", pair_or_null(c.link_gbps)},
      {"allreduce_gbps", pair_or_null(c.allreduce_gbps)},
  };
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : c.bandwidth_source) {
    sources.push_back(s ? nlohmann::json(name(*s)) : nlohmann::json(nullptr));
  }
  j["bandwidth_source"] = std::move(sources);
  if (c.valid) {
    j["memory"] = {{"params_gib", c.memory.params_bytes / kGiB},
                   {"grads_gib", c.memory.grads_bytes / kGiB},
                   {"optimizer_gib", c.memory.optimizer_bytes / kGiB},
                   {"activations_gib", c.memory.activations_bytes / kGiB},
                   {"buffers_gib", c.memory.workspace_bytes / kGiB}};
  }
  if (c.strategy == Strategy::kAtp || c.strategy == Strategy::kMegatron) {
    j["chunks"] = c.chunks;
  }
  if (!c.fc.empty()) {
    nlohmann::json fc = nlohmann::json::array();
    for (const FcChoice& f : c.fc) {
      nlohmann::json fj{{"layer", name(f.layer)},
                        {"stationary", name(f.stationary)},
                        {"forward_dataflow", name(f.forward)},
                        {"time_s", f.time_s}};
      if (c.strategy == Strategy::kMeshSlice) fj["slices"] = f.params.slices;
      if (c.strategy == Strategy::kSumma) fj["panels"] = f.params.panels;
      if (c.strategy == Strategy::kWang) fj["decomposed"] = name(f.params.wang_decomposed);
      fc.push_back(std::move(fj));
    }
    j["fc"] = std::move(fc);
  }
  return j;
}

}  // namespace meshtp::plan
