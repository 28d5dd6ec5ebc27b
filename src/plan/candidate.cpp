#include "plan/candidate.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <ostream>

#include "core/error.hpp"

namespace meshtp::plan {

std::vector<Strategy> parse_strategies(const std::string& text) {
  constexpr auto kAll = layout::all<Strategy>();
  if (text.empty() || text == "all") return {kAll.begin(), kAll.end()};
  std::vector<Strategy> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    const Strategy s = layout::parse_strategy(item);
    bool seen = false;
    for (const Strategy o : out) seen = seen || o == s;
    if (!seen) out.push_back(s);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
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
      case Strategy::kMeshSlice:
      case Strategy::kSumma:
        values += fmt::format("{}", f.params.slices);
        break;
      case Strategy::kWang:
        values += f.params.wang_decomposed == Direction::kVertical ? "v" : "h";
        break;
      default: values += name(f.forward); break;
    }
  }
  switch (strategy) {
    case Strategy::kMeshSlice:
    case Strategy::kSumma:
      return "S=" + values;
    case Strategy::kWang: return "split=" + values;
    default: return "df=" + values;
  }
}

Strategy candidate_strategy(Strategy strategy, std::array<int, 2> mesh) {
  const bool one_dim = mesh[0] == 1 || mesh[1] == 1;
  return strategy == Strategy::kAtp && one_dim ? Strategy::kMegatron : strategy;
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

layout::Plan to_plan(const Candidate& c) {
  MESHTP_CHECK(c.valid, "candidate {} {}x{} is not valid: {}", c.strategy, c.mesh[0], c.mesh[1],
               c.reason);
  layout::Plan p{.mesh = c.mesh,
                 .strategy = c.strategy,
                 .chunks = c.chunks,
                 .sequence_parallel = c.strategy == Strategy::kTp1d,
                 .provenance = layout::Provenance{.predicted_step_s = c.t_step_s,
                                                  .predicted_comm_s = c.t_comm_s}};
  if (!is_gemm2d(c.strategy)) return p;
  for (const FcChoice& f : c.fc) {
    p.linears[static_cast<std::size_t>(f.layer)] = {
        .algorithm = layout::algorithm_of(c.strategy),
        .stationary = f.stationary,
        // The plan file holds S; the autotuner's other choices (Wang's direction, SUMMA's
        // packets) stay the planner's.
        .gemm2d = {.slices = c.strategy == Strategy::kMeshSlice || c.strategy == Strategy::kSumma
                                 ? f.params.slices
                                 : 1}};
  }
  return p;
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
  if (c.valid) j["plan"] = layout::to_json(to_plan(c));
  if (c.valid) {
    j["memory"] = to_json(c.memory);
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
                        {"time_s", f.time_s},
                        {"comm_s", f.comm_s},
                        {"compute_s", f.compute_s}};
      if (c.strategy == Strategy::kMeshSlice || c.strategy == Strategy::kSumma) {
        fj["slices"] = f.params.slices;
      }
      if (c.strategy == Strategy::kWang) fj["decomposed"] = name(f.params.wang_decomposed);
      fc.push_back(std::move(fj));
    }
    j["fc"] = std::move(fc);
  }
  return j;
}

}  // namespace meshtp::plan
