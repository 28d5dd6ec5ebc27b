// The fit of nccl-tests logs and the topology it goes into (nccl_tests.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "plan/nccl_tests.hpp"

namespace meshtp::plan {
namespace {

CollectiveSeries series_of(const NcclTestsLog& log, std::int64_t min_bytes) {
  CollectiveSeries s{.size = log.ranks, .stride = 1, .collective = log.collective, .samples = {}};
  std::set<std::int64_t> sizes;
  for (const NcclTestsRow& r : log.rows) {
    if (r.bytes < min_bytes) continue;
    s.samples.push_back({r.bytes, r.time_us * 1e-6});
    sizes.insert(r.bytes);
  }
  MESHTP_CHECK(sizes.size() >= 2,
               "'{}': {} distinct size(s) of at least {} bytes (--min-bytes), the fit needs 2: "
               "lower --min-bytes or log larger sizes (-e)",
               log.source, sizes.size(), min_bytes);
  return s;
}

}  // namespace

const NcclTestsPoint& NcclTestsLogFit::largest() const {
  MESHTP_CHECK(!points.empty(), "'{}': no rows", source);
  const NcclTestsPoint* largest = &points.front();
  for (const NcclTestsPoint& p : points) {
    if (p.row.bytes >= largest->row.bytes) largest = &p;  // ties: the later one
  }
  return *largest;
}

NcclTestsFit fit_nccl_tests(std::span<const NcclTestsLog> logs, std::int64_t min_bytes) {
  MESHTP_CHECK(!logs.empty(), "no nccl-tests logs to fit");
  MESHTP_CHECK(min_bytes >= 1, "--min-bytes={} must be at least 1", min_bytes);
  std::map<std::tuple<int, CollectiveKind>, std::string> seen;
  // The launch cost is shared only among logs of one host count, one GPU per host apart
  // (nccl_tests.hpp).
  std::map<std::pair<std::size_t, bool>, std::vector<CollectiveSeries>> by_hosts;
  for (const NcclTestsLog& log : logs) {
    const auto [it, inserted] = seen.emplace(std::tuple{log.ranks, log.collective}, log.source);
    MESHTP_CHECK(inserted, "'{}' and '{}' both time {} on {} ranks: give one", it->second,
                 log.source, name(log.collective), log.ranks);
    if (log.collective != CollectiveKind::kSendRecv) {
      by_hosts[{log.hosts.size(), log.hosts.size() > 1 && log.ranks_per_host == 1}].push_back(
          series_of(log, min_bytes));
    }
  }
  NcclTestsFit out;
  out.host_counts = static_cast<int>(by_hosts.size());
  for (const auto& [hosts, collectives] : by_hosts) {
    const CalibrationFit part = fit_calibration(collectives);
    for (const GroupCalibration& g : part.groups) {
      auto same = std::find_if(
          out.calibration.groups.begin(), out.calibration.groups.end(),
          [&](const GroupCalibration& x) { return x.size == g.size && x.stride == g.stride; });
      if (same == out.calibration.groups.end()) {
        out.calibration.groups.push_back(g);
        continue;
      }
      for (const CollectiveKind c : kFitCollectives) {
        if (fit_slot(g, c)) fit_slot(*same, c) = fit_slot(g, c);
      }
    }
    out.calibration.quality.insert(out.calibration.quality.end(), part.quality.begin(),
                                   part.quality.end());
  }
  for (const NcclTestsLog& log : logs) {
    NcclTestsLogFit l{.source = log.source,
                      .collective = log.collective,
                      .size = log.ranks,
                      .stride = 1,
                      .fit = {},
                      .points = {}};
    if (log.collective == CollectiveKind::kSendRecv) {
      // One ring step: the whole intercept is the step's latency (calibration_fit.hpp).
      const LineFit line = fit_ring_line(series_of(log, min_bytes));
      l.fit = {.t_launch_us = 0,
               .l_sync_us = line.intercept_s / kUs,
               .bw_gbps = 1.0 / line.seconds_per_byte / kGB};
    } else {
      GroupCalibration& g = *std::find_if(
          out.calibration.groups.begin(), out.calibration.groups.end(),
          [&](const GroupCalibration& x) { return x.size == log.ranks && x.stride == 1; });
      std::optional<CollectiveFit>& fit = fit_slot(g, log.collective);
      // The line is fitted above --min-bytes; the planner prices every row's time (NCCL's
      // protocol switches below it included) and the line beyond the logged sizes.
      fit->measured = measured_times(series_of(log, 1));
      l.fit = *fit;
    }
    const double f = bus_factor(log.collective, log.ranks);
    for (const NcclTestsRow& r : log.rows) {
      const double bytes = static_cast<double>(r.bytes);
      const double t = fitted_time(l.fit, log.collective, log.ranks, bytes);
      l.points.push_back({.row = r,
                          .fitted_busbw_gbps = bytes / t / kGB * f,
                          .fitted = r.bytes >= min_bytes,
                          .error = r.time_us * 1e-6 / t - 1});
    }
    out.logs.push_back(std::move(l));
  }
  return out;
}

Topology calibrated_from_nccl_tests(const Topology& base, std::span<const NcclTestsLog> logs,
                                    const NcclTestsFit& fit, const std::string& name,
                                    const std::string& source) {
  const int n = base.device_count();
  for (const NcclTestsLog& log : logs) {
    MESHTP_CHECK(n % log.ranks == 0,
                 "'{}' times {} ranks, which do not divide the {} devices of topology '{}': no "
                 "mesh of it has a group of {}",
                 log.source, log.ranks, n, base.name, log.ranks);
    if (log.hosts.size() < 2 || log.ranks_per_host == 1) continue;
    std::vector<int> blocks;
    for (int j = 0; j < static_cast<int>(base.levels.size()); ++j) {
      const int d = base.devices_per_member(j);
      if (d > 1) blocks.push_back(d);
    }
    MESHTP_CHECK(std::find(blocks.begin(), blocks.end(), log.ranks_per_host) != blocks.end(),
                 "'{}' spans {} hosts of {} ranks each, but topology '{}' has no level whose "
                 "members are {} devices (its blocks: {}): meshtp numbers ranks node by node, "
                 "so a host must be one such block",
                 log.source, log.hosts.size(), log.ranks_per_host, base.name, log.ranks_per_host,
                 blocks.empty() ? std::string("none") : fmt::format("{}", fmt::join(blocks, ", ")));
  }
  Topology t = base;
  t.name = name.empty() ? base.name + "-nccl" : name;
  std::vector<GroupCalibration> fitted = fit.calibration.groups;
  // One GPU per host: the ranks are one device of each node, a node's devices apart in
  // meshtp's numbering (the outermost level's members are the nodes; a topology of one
  // level, as topo from-nvidia-smi writes for one box, is one node, and a log across hosts
  // cannot be any of its groups).
  for (const NcclTestsLog& log : logs) {
    if (log.hosts.size() < 2 || log.ranks_per_host != 1) continue;
    const int node = base.levels.size() > 1 ? base.devices_per_member(0) : n;
    MESHTP_CHECK(log.ranks * node <= n,
                 "'{}' spans {} hosts of one GPU each, but topology '{}' has {} nodes of {} "
                 "devices ({})",
                 log.source, log.hosts.size(), base.name, n / node, node,
                 base.levels.size() > 1 ? "its outermost level"
                                        : "one level: one node; topo from-nvidia-smi --nodes N "
                                          "describes N of them");
    for (GroupCalibration& g : fitted) {
      if (g.size == log.ranks && g.stride == 1) g.stride = node;
    }
  }
  round_fits(fitted);
  std::vector<GroupCalibration>& groups = t.calibration.groups;
  for (const GroupCalibration& g : fitted) {
    auto same = std::find_if(groups.begin(), groups.end(), [&](const GroupCalibration& x) {
      return x.size == g.size && x.stride == g.stride;
    });
    if (same == groups.end()) {
      groups.push_back(g);
      continue;
    }
    // The collectives the logs time replace the base's; the others stay.
    if (g.all_reduce) same->all_reduce = g.all_reduce;
    if (g.all_gather) same->all_gather = g.all_gather;
    if (g.reduce_scatter) same->reduce_scatter = g.reduce_scatter;
  }
  t.calibration.source = base.calibration.source.empty()
                             ? source
                             : fmt::format("{}; before: {}", source, base.calibration.source);
  t.validate();
  return t;
}

}  // namespace meshtp::plan
