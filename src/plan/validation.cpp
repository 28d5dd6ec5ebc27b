#include "plan/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "core/error.hpp"

namespace meshtp::plan {
namespace {

double rel_error(double predicted, double measured) { return (predicted - measured) / measured; }

std::string label(const Candidate& c) {
  std::string s = fmt::format("{} {}x{}", name(c.strategy), c.mesh[0], c.mesh[1]);
  if (c.strategy == Strategy::kAtp || c.strategy == Strategy::kMegatron) {
    s += fmt::format(" c={}", c.chunks);
  }
  return s;
}

// 1-based average ranks (ties share the mean rank).
std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return rank;
}

// Pearson correlation of the ranks.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2) return std::nullopt;
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return std::nullopt;  // every time tied: no order to compare
  return sab / std::sqrt(saa * sbb);
}

ErrorStats stats(const std::vector<double>& errors) {
  ErrorStats s;
  for (const double e : errors) {
    if (!std::isfinite(e)) continue;
    s.mean_abs += std::abs(e);
    s.max_abs = std::max(s.max_abs, std::abs(e));
    ++s.count;
  }
  if (s.count > 0) s.mean_abs /= s.count;
  return s;
}

}  // namespace

std::vector<PlannedCollective> planned_collectives(const PlanRequest& request, const Candidate& c) {
  MESHTP_CHECK(c.valid, "planned collectives: {} is not a valid candidate ({})", label(c),
               c.reason);
  const ModelSpec& m = request.model;
  const Explanation e = explain(request, c);
  const double layers = m.layers;
  std::vector<PlannedCollective> out;
  if (c.strategy == Strategy::kAtp || c.strategy == Strategy::kMegatron) {
    // Full recomputation re-runs the forward, all-reduces included (atp_cost.hpp).
    const double forward_runs = m.recompute == Recompute::kFull ? 2 : 1;
    for (const AtpOp& op : e.atp->ops) {
      for (const layout::AtpCall& call : op.calls) {
        const DimLinks& dim = e.links.dims[static_cast<std::size_t>(call.mesh_dim)];
        out.push_back({.mesh_dim = call.mesh_dim,
                       .group_size = dim.size,
                       .stride = dim.stride,
                       .collective = call.kind,
                       .bytes = call.message_bytes,
                       .count = layers * call.launches * (op.backward ? 1 : forward_runs),
                       .predicted_s = collective_time(dim, call.kind, call.message_bytes)});
      }
    }
    return out;
  }
  MESHTP_CHECK(c.strategy == Strategy::kTp1d,
               "planned collectives: {} is a 2D GeMM strategy; "
               "only atp, megatron and tp1d list their collectives",
               label(c));
  const DimLinks& dim = e.links.dims[0];
  for (const FcTuning& t : e.fc) {
    for (const FcPassCost& pass : t.passes) {
      if (!pass.tp1d || pass.tp1d->kind == CollectiveKind::kNone) continue;
      const bool scatter = pass.tp1d->kind == CollectiveKind::kReduceScatter;
      PlannedCollective p;
      p.mesh_dim = 0;
      p.group_size = dim.size;
      p.stride = dim.stride;
      p.collective = scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllGather;
      p.bytes = pass.tp1d->shard_bytes * dim.size;  // gathered output / scattered input
      p.count = layers * pass.weight;
      p.predicted_s = collective_time(dim, p.collective, p.bytes);
      out.push_back(p);
    }
  }
  for (const ElementwiseCall& x : elementwise_calls(m, c.strategy, c.mesh[0], c.mesh[1])) {
    const DimLinks& d = e.links.dims[static_cast<std::size_t>(x.call.mesh_dim)];
    out.push_back({.mesh_dim = x.call.mesh_dim,
                   .group_size = d.size,
                   .stride = d.stride,
                   .collective = x.call.kind,
                   .bytes = x.call.message_bytes,
                   .count = x.count,
                   .predicted_s = collective_time(d, x.call.kind, x.call.message_bytes)});
  }
  return out;
}

double ValidationRow::step_rel_error() const {
  return rel_error(predicted.t_step_s, measured.step_s);
}

double ValidationRow::comm_rel_error() const {
  if (layout::is_gemm2d(predicted.strategy)) return std::nan("");
  return rel_error(predicted.t_comm_s, measured.replay_comm_s);
}

double ValidationRow::exposed_rel_error() const {
  return rel_error(predicted_exposed_s(), measured.wait_s);
}

ValidationSummary summarize(const std::vector<ValidationRow>& rows) {
  MESHTP_CHECK(!rows.empty(), "plan validation: no candidate was run");
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  for (const ValidationRow& r : rows) {
    MESHTP_CHECK(r.predicted.valid, "plan validation: {} is not a valid candidate ({})",
                 label(r.predicted), r.predicted.reason);
    MESHTP_CHECK(positive(r.measured.step_s) && positive(r.measured.wait_s) &&
                     (positive(r.measured.replay_comm_s) || layout::is_gemm2d(r.predicted.strategy)),
                 "plan validation: {}: measured step {} s, wait {} s and replayed comm {} s "
                 "must be positive",
                 label(r.predicted), r.measured.step_s, r.measured.wait_s,
                 r.measured.replay_comm_s);
  }
  ValidationSummary s;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].measured.step_s < rows[s.measured_best].measured.step_s) s.measured_best = i;
  }
  s.best_agrees = s.predicted_best == s.measured_best;
  s.regret = rows[s.predicted_best].measured.step_s / rows[s.measured_best].measured.step_s - 1;
  std::vector<double> comm, exposed, step, predicted, measured;
  for (const ValidationRow& r : rows) {
    comm.push_back(r.comm_rel_error());
    exposed.push_back(r.exposed_rel_error());
    step.push_back(r.step_rel_error());
    predicted.push_back(r.predicted.t_step_s);
    measured.push_back(r.measured.step_s);
  }
  s.comm = stats(comm);
  s.exposed = stats(exposed);
  s.step = stats(step);
  s.step_rank_correlation = spearman(predicted, measured);
  return s;
}

std::string format_validation(const std::vector<ValidationRow>& rows, const ValidationSummary& s) {
  std::string out = fmt::format("{:>3} {:<18} | {:^24} | {:^24} | {:^24} | {:^15} | {:>6}\n", "",
                                "", "step ms", "comm ms", "exposed comm ms", "compute ms", "");
  out += fmt::format(
      "{:>3} {:<18} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>7} {:>7} "
      "| {:>6}\n",
      "#", "candidate", "pred", "meas", "err", "pred", "replay", "err", "pred", "wait", "err",
      "pred", "meas", "check");
  auto pct = [](double e) {
    return std::isfinite(e) ? fmt::format("{:+.0f}%", 100 * e) : std::string("-");
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ValidationRow& r = rows[i];
    const Measured& m = r.measured;
    out += fmt::format(
        "{:>3} {:<18} | {:>8.2f} {:>8.2f} {:>6} | {:>8.2f} {:>8} {:>6} | {:>8.2f} {:>8.2f} "
        "{:>6} | {:>7.1f} {:>7.1f} | {:>6}{}\n",
        i + 1, label(r.predicted), r.predicted.t_step_s * 1e3, m.step_s * 1e3,
        pct(r.step_rel_error()), r.predicted.t_comm_s * 1e3,
        std::isfinite(r.comm_rel_error()) ? fmt::format("{:.2f}", m.replay_comm_s * 1e3) : "-",
        pct(r.comm_rel_error()), r.predicted_exposed_s() * 1e3, m.wait_s * 1e3,
        pct(r.exposed_rel_error()), r.predicted.t_compute_s * 1e3, (m.step_s - m.wait_s) * 1e3,
        m.check_error < 0 ? std::string("-") : fmt::format("{:.0e}", m.check_error),
        i == s.measured_best ? "  <- measured best" : "");
  }
  // Compute far above its price is runtime work the planner's GeMM rate does not see (on the
  // emulated cluster MeshSlice's 128 slices measured 10x theirs: docs/cluster.md).
  for (const ValidationRow& r : rows) {
    const double predicted = r.predicted.t_compute_s;
    const double measured = r.measured.step_s - r.measured.wait_s;
    if (measured > 3 * predicted && measured - predicted > 0.1 * r.measured.step_s) {
      out += fmt::format(
          "note: {}: compute measured {:.1f} ms, {:.1f}x the {:.1f} ms predicted: per-slice or "
          "per-chunk work in the runtime (copies, MPI calls, progress pokes) that the planner's "
          "GeMM rate does not price\n",
          label(r.predicted), measured * 1e3, measured / predicted, predicted * 1e3);
    }
  }
  auto line = [](const char* what, const ErrorStats& e) {
    if (e.count == 0) return fmt::format("{}: - (no candidate to compare)\n", what);
    return fmt::format("{}: mean |error| {:.1f}%, max {:.1f}%\n", what, 100 * e.mean_abs,
                       100 * e.max_abs);
  };
  out += line("communication estimate vs replayed collectives", s.comm);
  out += line("exposed communication vs time blocked in the real step", s.exposed);
  out += line("step time", s.step);
  out += fmt::format(
      "step-time rank correlation (Spearman): {}\n",
      s.step_rank_correlation ? fmt::format("{:.2f}", *s.step_rank_correlation) : std::string("-"));
  out +=
      fmt::format("predicted best: {}; measured best: {}; {}\n",
                  label(rows[s.predicted_best].predicted), label(rows[s.measured_best].predicted),
                  s.best_agrees ? "AGREE"
                                : fmt::format("DISAGREE (the predicted best measured {:.1f}% "
                                              "slower)",
                                              100 * s.regret));
  // Distinct replayed collectives, ordered by group shape, kind and size.
  std::map<std::tuple<int, int, CollectiveKind, double>, std::pair<double, double>> calls;
  for (const ValidationRow& r : rows) {
    for (const ReplayedCollective& c : r.collectives) {
      const PlannedCollective& p = c.planned;
      calls.emplace(std::make_tuple(p.group_size, p.stride, p.collective, p.bytes),
                    std::make_pair(p.predicted_s, c.measured_s));
    }
  }
  if (!calls.empty()) {
    out += fmt::format(
        "replayed collectives, one call:\n{:>5} {:>6} {:<15} {:>10} {:>10} "
        "{:>10} {:>6}\n",
        "ranks", "stride", "collective", "bytes", "pred us", "meas us", "err");
    for (const auto& [key, times] : calls) {
      const auto& [p, stride, collective, bytes] = key;
      out += fmt::format("{:>5} {:>6} {:<15} {:>10.0f} {:>10.1f} {:>10.1f} {:>+5.0f}%\n", p, stride,
                         name(collective), bytes, times.first * 1e6, times.second * 1e6,
                         100 * rel_error(times.first, times.second));
    }
  }
  return out;
}

nlohmann::json to_json(const std::vector<ValidationRow>& rows, const ValidationSummary& s) {
  nlohmann::json out_rows = nlohmann::json::array();
  for (const ValidationRow& r : rows) {
    nlohmann::json j = to_json(r.predicted);
    j["t_exposed_comm_s"] = r.predicted_exposed_s();
    j["measured"] = {
        {"step_s", r.measured.step_s},         {"replay_comm_s", r.measured.replay_comm_s},
        {"wait_s", r.measured.wait_s},         {"compute_s", r.measured.step_s - r.measured.wait_s},
        {"forward_s", r.measured.forward_s},   {"backward_s", r.measured.backward_s},
        {"iterations", r.measured.iterations}, {"check_error", r.measured.check_error}};
    nlohmann::json calls = nlohmann::json::array();
    for (const ReplayedCollective& c : r.collectives) {
      calls.push_back({{"mesh_dim", c.planned.mesh_dim},
                       {"group_size", c.planned.group_size},
                       {"stride", c.planned.stride},
                       {"collective", name(c.planned.collective)},
                       {"bytes", c.planned.bytes},
                       {"count", c.planned.count},
                       {"predicted_s", c.planned.predicted_s},
                       {"measured_s", c.measured_s}});
    }
    j["collectives"] = std::move(calls);
    j["step_rel_error"] = r.step_rel_error();
    const double comm = r.comm_rel_error();
    j["comm_rel_error"] = std::isfinite(comm) ? nlohmann::json(comm) : nlohmann::json(nullptr);
    j["exposed_rel_error"] = r.exposed_rel_error();
    out_rows.push_back(std::move(j));
  }
  auto stats_json = [](const ErrorStats& e) {
    return nlohmann::json{{"mean_abs_rel_error", e.mean_abs}, {"max_abs_rel_error", e.max_abs}};
  };
  return {
      {"rows", std::move(out_rows)},
      {"summary",
       {{"predicted_best", label(rows[s.predicted_best].predicted)},
        {"measured_best", label(rows[s.measured_best].predicted)},
        {"best_agrees", s.best_agrees},
        {"regret", s.regret},
        {"comm", stats_json(s.comm)},
        {"exposed_comm", stats_json(s.exposed)},
        {"step", stats_json(s.step)},
        {"step_rank_correlation", s.step_rank_correlation ? nlohmann::json(*s.step_rank_correlation)
                                                          : nlohmann::json(nullptr)}}}};
}

}  // namespace meshtp::plan
