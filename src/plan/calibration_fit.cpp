#include "plan/calibration_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "core/error.hpp"
#include "core/stats.hpp"
#include "plan/mesh_links.hpp"

namespace meshtp::plan {
namespace {

std::string describe(const CollectiveSeries& s) {
  return fmt::format("{} on groups of {} ranks (stride {})", name(s.collective), s.size, s.stride);
}

// x = n·bytes_per_step: the bytes one rank moves through its ring link over the whole
// collective.
double ring_bytes(const CollectiveSeries& s, std::int64_t bytes) {
  return ring_steps(s.collective, s.size) *
         bytes_per_step(s.collective, s.size, static_cast<double>(bytes));
}

void check_series(const CollectiveSeries& s) {
  const std::string what = describe(s);
  MESHTP_CHECK(s.size >= 2,
               "calibration fit: {}: a group needs at least 2 ranks to "
               "communicate",
               what);
  MESHTP_CHECK(s.stride >= 1, "calibration fit: {}: stride={} must be at least 1", what, s.stride);
  std::set<std::int64_t> sizes;
  for (std::size_t i = 0; i < s.samples.size(); ++i) {
    const TimingSample& t = s.samples[i];
    MESHTP_CHECK(t.bytes > 0,
                 "calibration fit: {}: sample {} has bytes={}, which must be "
                 "positive",
                 what, i, t.bytes);
    MESHTP_CHECK(std::isfinite(t.seconds) && t.seconds > 0,
                 "calibration fit: {}: sample {} "
                 "({} bytes) has time {} s, which must be positive and finite",
                 what, i, t.bytes, t.seconds);
    sizes.insert(t.bytes);
  }
  MESHTP_CHECK(sizes.size() >= 2,
               "calibration fit: {}: needs at least 2 distinct message "
               "sizes to fit T_launch + (P-1)(L_sync + bytes/BW), got {} ({})",
               what, sizes.size(),
               sizes.empty() ? std::string("no samples") : fmt::format("{} bytes", *sizes.begin()));
}

}  // namespace

std::vector<MeasuredTime> measured_times(const CollectiveSeries& s) {
  std::map<std::int64_t, std::vector<double>> by_size;
  for (const TimingSample& t : s.samples) by_size[t.bytes].push_back(t.seconds);
  std::vector<MeasuredTime> out;
  for (const auto& [bytes, seconds] : by_size) {
    out.push_back({.bytes = bytes, .us = median(seconds) / kUs});
  }
  return out;
}

std::optional<CollectiveFit>& fit_slot(GroupCalibration& group, CollectiveKind c) {
  switch (c) {
    case CollectiveKind::kAllReduce:
      return group.all_reduce;
    case CollectiveKind::kAllGather:
      return group.all_gather;
    case CollectiveKind::kReduceScatter:
      return group.reduce_scatter;
    default:
      fail("calibration fit: {} is not a calibrated collective", c);
  }
}

const std::optional<CollectiveFit>& fit_slot(const GroupCalibration& group, CollectiveKind c) {
  return fit_slot(const_cast<GroupCalibration&>(group), c);
}

int ring_steps(CollectiveKind c, int p) {
  if (c == CollectiveKind::kSendRecv) return 1;
  return c == CollectiveKind::kAllReduce ? 2 * (p - 1) : p - 1;
}

double bytes_per_step(CollectiveKind c, int p, double bytes) {
  return c == CollectiveKind::kSendRecv ? bytes : bytes / p;
}

double bus_factor(CollectiveKind c, int p) {
  if (p <= 1) return 0.0;
  switch (c) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (p - 1) / p;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return static_cast<double>(p - 1) / p;
    default:
      return 1.0;  // broadcast, send/recv
  }
}

StepOverheadFit fit_step_overhead(std::span<const StepSample> samples) {
  std::set<std::int64_t> steps;
  for (const StepSample& s : samples) {
    MESHTP_CHECK(std::isfinite(s.measured_s) && s.measured_s > 0 && std::isfinite(s.predicted_s) &&
                     s.predicted_s > 0,
                 "step overhead fit: S={}: measured {} s and predicted {} s must be positive",
                 s.params.slices, s.measured_s, s.predicted_s);
    MESHTP_CHECK(s.steps >= 1, "step overhead fit: S={}: {} steps", s.params.slices, s.steps);
    steps.insert(s.steps);
  }
  MESHTP_CHECK(steps.size() >= 2,
               "step overhead fit: {} distinct step count(s); the fit needs at least 2",
               steps.size());
  // Ordinary least squares of r = measured − predicted on x = steps.
  const double n = static_cast<double>(samples.size());
  double mean_x = 0, mean_r = 0;
  for (const StepSample& s : samples) {
    mean_x += static_cast<double>(s.steps) / n;
    mean_r += (s.measured_s - s.predicted_s) / n;
  }
  double sxx = 0, sxr = 0, srr = 0;
  for (const StepSample& s : samples) {
    const double dx = static_cast<double>(s.steps) - mean_x;
    const double dr = s.measured_s - s.predicted_s - mean_r;
    sxx += dx * dx;
    sxr += dx * dr;
    srr += dr * dr;
  }
  StepOverheadFit fit;
  fit.step_s = std::max(0.0, sxr / sxx);
  fit.intercept_s = mean_r - fit.step_s * mean_x;
  double residual = 0;
  for (const StepSample& s : samples) {
    const double e = s.measured_s - s.predicted_s -
                     (fit.intercept_s + fit.step_s * static_cast<double>(s.steps));
    residual += e * e;
  }
  fit.r_squared = srr > 0 ? 1 - residual / srr : 1;
  return fit;
}

double dim_sharing(double both_s, double dim0_s, double dim1_s) {
  for (const double t : {both_s, dim0_s, dim1_s}) {
    MESHTP_CHECK(std::isfinite(t) && t > 0,
                 "dim sharing: times {} s (both), {} s and {} s (each alone) must be positive",
                 both_s, dim0_s, dim1_s);
  }
  const double slower = std::max(dim0_s, dim1_s), faster = std::min(dim0_s, dim1_s);
  return std::clamp((both_s - slower) / faster, 0.0, 1.0);
}

double round4(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::abs(x))));
  return std::round(x * scale) / scale;
}

void round_fits(std::vector<GroupCalibration>& groups) {
  for (GroupCalibration& g : groups) {
    for (auto* f : {&g.all_reduce, &g.all_gather, &g.reduce_scatter}) {
      if (!*f) continue;
      (*f)->t_launch_us = round4((*f)->t_launch_us);
      (*f)->l_sync_us = round4((*f)->l_sync_us);
      (*f)->bw_gbps = round4((*f)->bw_gbps);
      for (MeasuredTime& m : (*f)->measured) m.us = round4(m.us);
    }
  }
}

LineFit fit_ring_line(const CollectiveSeries& s) {
  check_series(s);
  // Weighted least squares, wᵢ = 1/Tᵢ², centred for accuracy:
  //   slope = Σw(x−x̄)(T−T̄) / Σw(x−x̄)²,   intercept = T̄ − slope·x̄   (x̄, T̄ weighted means)
  double sw = 0, swx = 0, swt = 0;
  for (const TimingSample& t : s.samples) {
    const double w = 1.0 / (t.seconds * t.seconds);
    sw += w;
    swx += w * ring_bytes(s, t.bytes);
    swt += w * t.seconds;
  }
  const double xbar = swx / sw, tbar = swt / sw;
  double sxx = 0, sxt = 0;
  for (const TimingSample& t : s.samples) {
    const double w = 1.0 / (t.seconds * t.seconds);
    const double dx = ring_bytes(s, t.bytes) - xbar;
    sxx += w * dx * dx;
    sxt += w * dx * (t.seconds - tbar);
  }
  LineFit fit;
  fit.seconds_per_byte = sxt / sxx;
  fit.intercept_s = tbar - fit.seconds_per_byte * xbar;
  if (fit.intercept_s < 0) {
    // Through the origin: slope = Σw·x·T / Σw·x².
    double num = 0, den = 0;
    for (const TimingSample& t : s.samples) {
      const double w = 1.0 / (t.seconds * t.seconds);
      const double x = ring_bytes(s, t.bytes);
      num += w * x * t.seconds;
      den += w * x * x;
    }
    fit = {.intercept_s = 0, .seconds_per_byte = num / den, .through_origin = true};
  }
  MESHTP_CHECK(fit.seconds_per_byte > 0 && std::isfinite(fit.seconds_per_byte),
               "calibration fit: {}: the time does not grow with the message size (slope {} "
               "s/byte), so there is no bandwidth to fit; measure larger --sizes",
               describe(s), fit.seconds_per_byte);
  return fit;
}

double fitted_time(const CollectiveFit& fit, CollectiveKind c, int p, double bytes) {
  const RingParams ring{.t_launch_s = fit.t_launch_us * kUs,
                        .l_sync_s = fit.l_sync_us * kUs,
                        .bw_bytes_per_s = fit.bw_gbps * kGB};
  if (c == CollectiveKind::kAllReduce) return ring_all_reduce_time(ring, p, bytes);
  // send/recv: one step of bytes, the time of a 2-rank ring's all_gather of that shard.
  if (c == CollectiveKind::kSendRecv) return ring_collective_time(ring, 2, bytes);
  return ring_collective_time(ring, p, bytes / p);
}

CalibrationFit fit_calibration(std::span<const CollectiveSeries> series) {
  MESHTP_CHECK(!series.empty(), "calibration fit: no measurements to fit");
  // Stage 1.
  std::vector<LineFit> lines;
  std::set<std::tuple<int, int, CollectiveKind>> seen;
  for (const CollectiveSeries& s : series) {
    MESHTP_CHECK(seen.insert({s.size, s.stride, s.collective}).second,
                 "calibration fit: {} appears twice", describe(s));
    lines.push_back(fit_ring_line(s));
  }

  // Stage 2, per collective: a shared t_launch when the step counts differ.
  std::map<CollectiveKind, double> t_launch;
  std::map<CollectiveKind, bool> identified;
  for (const CollectiveKind c : kFitCollectives) {
    std::vector<double> n, a;
    for (std::size_t i = 0; i < series.size(); ++i) {
      if (series[i].collective != c) continue;
      n.push_back(ring_steps(c, series[i].size));
      a.push_back(lines[i].intercept_s);
    }
    if (n.empty()) continue;
    const double groups = static_cast<double>(n.size());
    const double nbar = std::accumulate(n.begin(), n.end(), 0.0) / groups;
    const double abar = std::accumulate(a.begin(), a.end(), 0.0) / groups;
    double snn = 0, sna = 0;
    for (std::size_t i = 0; i < n.size(); ++i) {
      snn += (n[i] - nbar) * (n[i] - nbar);
      sna += (n[i] - nbar) * (a[i] - abar);
    }
    identified[c] = snn > 0;
    double t = 0;
    if (snn > 0) {
      t = abar - sna / snn * nbar;
      t = std::clamp(t, 0.0, *std::min_element(a.begin(), a.end()));
    }
    t_launch[c] = t;
  }

  CalibrationFit out;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const CollectiveSeries& s = series[i];
    const int n = ring_steps(s.collective, s.size);
    const double t = t_launch[s.collective];
    const CollectiveFit fit{.t_launch_us = t / kUs,
                            .l_sync_us = (lines[i].intercept_s - t) / n / kUs,
                            .bw_gbps = 1.0 / lines[i].seconds_per_byte / kGB,
                            .measured = measured_times(s)};
    auto group = std::find_if(out.groups.begin(), out.groups.end(), [&](const auto& g) {
      return g.size == s.size && g.stride == s.stride;
    });
    if (group == out.groups.end()) {
      GroupCalibration g;
      g.size = s.size;
      g.stride = s.stride;
      out.groups.push_back(g);
      group = std::prev(out.groups.end());
    }
    fit_slot(*group, s.collective) = fit;

    FitQuality q;
    q.size = s.size;
    q.stride = s.stride;
    q.collective = s.collective;
    q.samples = static_cast<int>(s.samples.size());
    q.through_origin = lines[i].through_origin;
    q.split_identified = identified[s.collective];
    double mean = 0;
    for (const TimingSample& m : s.samples) mean += m.seconds;
    mean /= static_cast<double>(s.samples.size());
    double ss_res = 0, ss_tot = 0;
    for (const TimingSample& m : s.samples) {
      const double predicted = fitted_time(fit, s.collective, s.size, static_cast<double>(m.bytes));
      ss_res += (predicted - m.seconds) * (predicted - m.seconds);
      ss_tot += (m.seconds - mean) * (m.seconds - mean);
      q.max_rel_residual =
          std::max(q.max_rel_residual, std::abs(predicted - m.seconds) / m.seconds);
    }
    q.r_squared = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    out.quality.push_back(q);
  }
  return out;
}

}  // namespace meshtp::plan
