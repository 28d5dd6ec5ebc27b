#include "plan/topology.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <ostream>

#include "core/error.hpp"
#include "core/json_util.hpp"
#include "core/text.hpp"

namespace meshtp::plan {

int Topology::device_count() const {
  if (graph) return graph->devices;
  std::int64_t n = 1;
  for (const Level& level : levels) n *= level.members;
  return static_cast<int>(n);
}

int Topology::devices_per_member(int level) const {
  int d = 1;
  for (std::size_t k = static_cast<std::size_t>(level) + 1; k < levels.size(); ++k) {
    d *= levels[k].members;
  }
  return d;
}

const GroupCalibration* Topology::calibrated_group(int size, int stride) const {
  for (const GroupCalibration& g : calibration.groups) {
    if (g.size == size && g.stride == stride) return &g;
  }
  return nullptr;
}

double Topology::effective_tflops() const {
  return calibration.gemm_tflops ? *calibration.gemm_tflops : tflops;
}

GemmModel Topology::gemm_model() const {
  if (calibration.gemm_tflops || !gemm) return GemmModel(effective_tflops() * 1e12);
  return *gemm;
}

const char* name(RateSource s) {
  switch (s) {
    case RateSource::kCalibrated: return "calibrated";
    case RateSource::kNominal: return "nominal";
    case RateSource::kDefault: return "default";
  }
  return "?";
}

RateSource Topology::elementwise_source() const {
  if (calibration.elementwise_gbps) return RateSource::kCalibrated;
  return elementwise_gbps ? RateSource::kNominal : RateSource::kDefault;
}

double Topology::effective_elementwise_gbps() const {
  if (calibration.elementwise_gbps) return *calibration.elementwise_gbps;
  return elementwise_gbps.value_or(kDefaultElementwiseGbps);
}

const MeshSharing* Calibration::mesh_sharing(int d1, int d2) const {
  for (const MeshSharing& m : meshes) {
    if (m.mesh[0] == d1 && m.mesh[1] == d2) return &m;
  }
  return nullptr;
}

double Topology::step_overhead_s() const { return calibration.step_overhead_us.value_or(0) * kUs; }

namespace {

void check_positive(double value, std::string_view field, std::string_view where) {
  MESHTP_CHECK(std::isfinite(value) && value > 0, "{}: {}={} must be positive", where, field,
               value);
}

void check_fit(const CollectiveFit& fit, std::string_view where) {
  MESHTP_CHECK(fit.t_launch_us >= 0, "{}: t_launch_us={} must not be negative", where,
               fit.t_launch_us);
  MESHTP_CHECK(fit.l_sync_us >= 0, "{}: l_sync_us={} must not be negative", where,
               fit.l_sync_us);
  check_positive(fit.bw_gbps, "bw_gbps", where);
  for (std::size_t i = 0; i < fit.measured.size(); ++i) {
    const MeasuredTime& m = fit.measured[i];
    MESHTP_CHECK(m.bytes > 0, "{}: measured[{}] has bytes={}, which must be positive", where, i,
                 m.bytes);
    // A collective takes at least a hundredth of a µs and less than 10^10 µs (about 3 hours,
    // the bounds nccl-tests logs are held to): 1e300 µs would be priced as "ok".
    MESHTP_CHECK(std::isfinite(m.us) && m.us >= 0.01 && m.us <= 1e10,
                 "{}: measured[{}] ({} bytes) has {} us, outside 0.01 to 1e10 us", where, i,
                 m.bytes, m.us);
    MESHTP_CHECK(i == 0 || m.bytes > fit.measured[i - 1].bytes,
                 "{}: measured[{}] has bytes={} after {}: sizes must ascend, each once", where, i,
                 m.bytes, fit.measured[i - 1].bytes);
  }
}

}  // namespace

void Topology::validate() const {
  const std::string where = fmt::format("topology '{}'", name);
  MESHTP_CHECK(levels.empty() != !graph.has_value(), "{}: needs either 'levels' (a "
               "hierarchical matrix) or 'graph' (a generator), not {}", where,
               graph ? "both" : "neither");
  check_positive(memory_gib, "memory_gib", where);
  check_positive(tflops, "tflops", where);
  if (elementwise_gbps) check_positive(*elementwise_gbps, "elementwise_gbps", where);
  MESHTP_CHECK(launch_us >= 0, "{}: launch_us={} must not be negative", where, launch_us);
  std::int64_t n = graph ? graph->devices : 1;
  for (std::size_t j = 0; j < levels.size(); ++j) {
    const Level& level = levels[j];
    const std::string lw = fmt::format("{}, level {} '{}'", where, j, level.name);
    MESHTP_CHECK(level.members >= 1, "{}: members={} must be at least 1", lw, level.members);
    n *= level.members;
    MESHTP_CHECK(n <= (1 << 20),
                 "{}: {} devices through level {} '{}' (members={}), more "
                 "than 2^20",
                 where, n, j, level.name, level.members);
    check_positive(level.group_gbps, "group_gbps", lw);
    MESHTP_CHECK(level.latency_us >= 0, "{}: latency_us={} must not be negative", lw,
                 level.latency_us);
    MESHTP_CHECK(level.p2p_uniform_gbps >= 0, "{}: p2p_gbps={} must be positive", lw,
                 level.p2p_uniform_gbps);
    if (!level.p2p_gbps.empty()) {
      const auto r = static_cast<std::size_t>(level.members);
      MESHTP_CHECK(level.p2p_gbps.size() == r, "{}: p2p_gbps has {} rows, expected {}", lw,
                   level.p2p_gbps.size(), r);
      for (std::size_t a = 0; a < r; ++a) {
        MESHTP_CHECK(level.p2p_gbps[a].size() == r, "{}: p2p_gbps row {} has {} entries, "
                     "expected {}", lw, a, level.p2p_gbps[a].size(), r);
        for (std::size_t b = 0; b < r; ++b) {
          const double v = level.p2p_gbps[a][b];
          MESHTP_CHECK(std::isfinite(v) && v >= 0, "{}: p2p_gbps[{}][{}]={} must not be "
                       "negative", lw, a, b, v);
        }
      }
    }
  }
  if (gemm) gemm->validate((where + ", device gemm").c_str());
  if (calibration.gemm_tflops) check_positive(*calibration.gemm_tflops, "gemm_tflops", where);
  if (calibration.elementwise_gbps) {
    check_positive(*calibration.elementwise_gbps, "calibration elementwise_gbps", where);
  }
  for (const MeshSharing& m : calibration.meshes) {
    MESHTP_CHECK(
        m.mesh[0] >= 2 && m.mesh[1] >= 2 && static_cast<std::int64_t>(m.mesh[0]) * m.mesh[1] == n,
        "{}: calibration mesh {}x{}: both dims need at least 2 ranks and the mesh {} "
        "devices",
        where, m.mesh[0], m.mesh[1], n);
    MESHTP_CHECK(std::isfinite(m.sharing) && m.sharing >= 0 && m.sharing <= 1,
                 "{}: calibration mesh {}x{}: sharing={} must be in [0, 1]", where, m.mesh[0],
                 m.mesh[1], m.sharing);
  }
  if (calibration.step_overhead_us) {
    const double v = *calibration.step_overhead_us;
    MESHTP_CHECK(std::isfinite(v) && v >= 0 && v <= 1e6,
                 "{}: calibration step_overhead_us={} must be in [0, 1e6]", where, v);
  }
  for (const GroupCalibration& g : calibration.groups) {
    const std::string gw =
        fmt::format("{}, calibration group (size {}, stride {})", where, g.size, g.stride);
    MESHTP_CHECK(g.size >= 2, "{}: size must be at least 2", gw);
    MESHTP_CHECK(g.stride >= 1 && static_cast<std::int64_t>(g.size) * g.stride <= n,
                 "{}: a group of {} ranks {} apart does not fit {} devices", gw, g.size,
                 g.stride, n);
    MESHTP_CHECK(g.all_reduce || g.all_gather || g.reduce_scatter,
                 "{}: needs at least one of all_reduce, all_gather, reduce_scatter", gw);
    if (g.all_reduce) check_fit(*g.all_reduce, gw + ", all_reduce");
    if (g.all_gather) check_fit(*g.all_gather, gw + ", all_gather");
    if (g.reduce_scatter) check_fit(*g.reduce_scatter, gw + ", reduce_scatter");
  }
}

std::ostream& operator<<(std::ostream& os, const Topology& t) {
  os << fmt::format("topology {} ({} devices, {} GiB, {} TFLOP/s, {} GB/s elementwise each):",
                    t.name, t.device_count(), t.memory_gib, t.effective_tflops(),
                    t.effective_elementwise_gbps());
  if (t.graph) os << " graph " << t.graph->json.value("generator", "?");
  for (const Level& level : t.levels) {
    os << fmt::format(" [{}×{} group {} GB/s", level.members, level.name, level.group_gbps);
    if (level.p2p_uniform_gbps > 0) os << fmt::format(" p2p {} GB/s", level.p2p_uniform_gbps);
    if (!level.p2p_gbps.empty()) os << " p2p matrix";
    os << fmt::format(" {} us]", level.latency_us);
  }
  if (!t.calibration.groups.empty()) {
    os << fmt::format(" + {} calibrated group(s)", t.calibration.groups.size());
  }
  if (t.calibration.step_overhead_us) {
    os << fmt::format(" + {} us per 2D GeMM step", *t.calibration.step_overhead_us);
  }
  return os;
}

// ---- JSON ----------------------------------------------------------------------------------

namespace {

nlohmann::json fit_to_json(const CollectiveFit& f) {
  nlohmann::json j{
      {"t_launch_us", f.t_launch_us}, {"l_sync_us", f.l_sync_us}, {"bw_gbps", f.bw_gbps}};
  if (!f.measured.empty()) {
    nlohmann::json points = nlohmann::json::array();
    for (const MeasuredTime& m : f.measured) points.push_back({m.bytes, m.us});
    j["measured"] = std::move(points);  // [[bytes, us], …]
  }
  return j;
}

std::vector<MeasuredTime> measured_from_json(const nlohmann::json& j, const std::string& where) {
  MESHTP_CHECK(j.is_array(), "{}: measured must be an array of [bytes, us] pairs, got {}", where,
               j.dump());
  std::vector<MeasuredTime> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& p = j[i];
    MESHTP_CHECK(p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number(),
                 "{}: measured[{}] must be a pair [bytes, us] (an integer and a number), got {}",
                 where, i, p.dump());
    out.push_back({.bytes = p[0].get<std::int64_t>(), .us = p[1].get<double>()});
  }
  return out;
}

std::optional<CollectiveFit> fit_from_json(const nlohmann::json& obj, const char* key,
                                           const std::string& where) {
  if (!obj.contains(key)) return std::nullopt;
  const std::string fw = where + ", " + key;
  const nlohmann::json& f = obj.at(key);
  check_fields(f, {"t_launch_us", "l_sync_us", "bw_gbps", "measured"}, fw);
  return CollectiveFit{.t_launch_us = read_optional_number(f, "t_launch_us", fw).value_or(0),
                       .l_sync_us = read_optional_number(f, "l_sync_us", fw).value_or(0),
                       .bw_gbps = read_number(f, "bw_gbps", fw),
                       .measured = f.contains("measured") ? measured_from_json(f.at("measured"), fw)
                                                          : std::vector<MeasuredTime>{}};
}

int read_int_in_range(const nlohmann::json& obj, std::string_view key, std::string_view where) {
  const std::int64_t v = read_integer(obj, key, where);
  MESHTP_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), "{}: {}={} is out of range",
               where, key, v);
  return static_cast<int>(v);
}

}  // namespace

nlohmann::json to_json(const Topology& t) {
  nlohmann::json levels = nlohmann::json::array();
  for (const Level& level : t.levels) {
    nlohmann::json l{{"name", level.name},
                     {"members", level.members},
                     {"group_gbps", level.group_gbps},
                     {"latency_us", level.latency_us}};
    if (level.p2p_uniform_gbps > 0) l["p2p_gbps"] = level.p2p_uniform_gbps;
    if (!level.p2p_gbps.empty()) l["p2p_gbps"] = level.p2p_gbps;
    levels.push_back(std::move(l));
  }
  nlohmann::json device{{"memory_gib", t.memory_gib}, {"tflops", t.tflops}};
  if (t.elementwise_gbps) device["elementwise_gbps"] = *t.elementwise_gbps;
  if (t.gemm) {
    const GemmModel& g = *t.gemm;
    device["gemm"] = {
        {"peak_tflops", g.peak_tflops}, {"efficiency", g.efficiency},   {"units", g.units},
        {"tile", {g.tile_m, g.tile_n}}, {"split_k_min", g.split_k_min}, {"kernel_us", g.kernel_us},
        {"memory_gbps", g.memory_gbps}};
    if (g.attention_tflops > 0) device["gemm"]["attention_tflops"] = g.attention_tflops;
  }
  nlohmann::json j{{"name", t.name},
                   {"description", t.description},
                   {"device", std::move(device)},
                   {"launch_us", t.launch_us}};
  if (t.host_staged) j["host_staged"] = true;
  if (t.graph) {
    j["graph"] = t.graph->json;
  } else {
    j["levels"] = std::move(levels);
  }
  if (!t.calibration.empty()) {
    nlohmann::json groups = nlohmann::json::array();
    for (const GroupCalibration& g : t.calibration.groups) {
      nlohmann::json gj{{"size", g.size}, {"stride", g.stride}};
      if (g.all_reduce) gj["all_reduce"] = fit_to_json(*g.all_reduce);
      if (g.all_gather) gj["all_gather"] = fit_to_json(*g.all_gather);
      if (g.reduce_scatter) gj["reduce_scatter"] = fit_to_json(*g.reduce_scatter);
      groups.push_back(std::move(gj));
    }
    nlohmann::json c{{"source", t.calibration.source}, {"groups", std::move(groups)}};
    if (t.calibration.gemm_tflops) c["gemm_tflops"] = *t.calibration.gemm_tflops;
    if (t.calibration.elementwise_gbps) {
      c["elementwise_gbps"] = *t.calibration.elementwise_gbps;
    }
    if (t.calibration.step_overhead_us) {
      c["step_overhead_us"] = *t.calibration.step_overhead_us;
    }
    if (!t.calibration.meshes.empty()) {
      nlohmann::json meshes = nlohmann::json::array();
      for (const MeshSharing& m : t.calibration.meshes) {
        meshes.push_back({{"mesh", m.mesh}, {"sharing", m.sharing}});
      }
      c["meshes"] = std::move(meshes);
    }
    j["calibration"] = std::move(c);
  }
  if (!t.ranges.empty()) j["ranges"] = to_json(t.ranges);
  return j;
}

Topology topology_from_json(const nlohmann::json& j, const std::string& source) {
  const std::string where = "topology " + source;
  check_fields(j, {"name", "description", "device", "launch_us", "host_staged", "levels", "graph",
                   "calibration", "ranges"},
               where);
  Topology t;
  t.name = read_string(j, "name", where);
  check_name(where + ": name", t.name);
  t.description = read_optional_string(j, "description", where, "");
  const nlohmann::json& device = require_field(j, "device", where);
  const std::string dw = where + ", device";
  check_fields(device, {"memory_gib", "tflops", "elementwise_gbps", "gemm"}, dw);
  t.memory_gib = read_number(device, "memory_gib", dw);
  t.tflops = read_number(device, "tflops", dw);
  t.elementwise_gbps = read_optional_number(device, "elementwise_gbps", dw);
  if (device.contains("gemm")) {
    const std::string gw = dw + ", gemm";
    const nlohmann::json& g = device.at("gemm");
    check_fields(
        g,
        {"peak_tflops", "efficiency", "units", "tile", "split_k_min", "kernel_us", "memory_gbps",
         "attention_tflops"},
        gw);
    GemmModel m(read_number(g, "peak_tflops", gw), read_number(g, "efficiency", gw),
                read_int_in_range(g, "units", gw),
                read_optional_number(g, "kernel_us", gw).value_or(0),
                read_optional_number(g, "memory_gbps", gw).value_or(0));
    MESHTP_CHECK(m.units >= 1, "{}: units={} must be at least 1", gw, m.units);
    if (g.contains("tile")) {
      const nlohmann::json& tile = g.at("tile");
      MESHTP_CHECK(tile.is_array() && tile.size() == 2 && tile[0].is_number_integer() &&
                       tile[1].is_number_integer(),
                   "{}: 'tile' must be two integers [tile_m, tile_n], got {}", gw, tile.dump());
      m.tile_m = tile[0].get<int>();
      m.tile_n = tile[1].get<int>();
    }
    if (g.contains("split_k_min")) m.split_k_min = read_int_in_range(g, "split_k_min", gw);
    m.attention_tflops = read_optional_number(g, "attention_tflops", gw).value_or(0);
    t.gemm = m;
  }
  t.launch_us = read_optional_number(j, "launch_us", where).value_or(0);
  if (j.contains("host_staged")) {
    const nlohmann::json& hs = j.at("host_staged");
    MESHTP_CHECK(hs.is_boolean(), "{}: 'host_staged' must be true or false, got {}", where,
                 hs.dump());
    t.host_staged = hs.get<bool>();
  }

  MESHTP_CHECK(j.contains("levels") != j.contains("graph"), "{}: needs either 'levels' (a "
               "hierarchical matrix) or 'graph' (a generator), not {}", where,
               j.contains("graph") ? "both" : "neither");
  if (j.contains("graph")) t.graph = topo::graph_spec_from_json(j.at("graph"), where + ", graph");
  const nlohmann::json& levels = j.contains("levels") ? j.at("levels") : nlohmann::json::array();
  MESHTP_CHECK(levels.is_array() && (t.graph || !levels.empty()), "{}: 'levels' must be a "
               "non-empty array", where);
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const std::string lw = fmt::format("{}, level {}", where, i);
    const nlohmann::json& lj = levels[i];
    check_fields(lj, {"name", "members", "group_gbps", "p2p_gbps", "latency_us"}, lw);
    Level level;
    level.name = read_optional_string(lj, "name", lw, fmt::format("level{}", i));
    check_name(lw + ": name", level.name);
    level.members = read_int_in_range(lj, "members", lw);
    level.group_gbps = read_number(lj, "group_gbps", lw);
    level.latency_us = read_optional_number(lj, "latency_us", lw).value_or(0);
    if (lj.contains("p2p_gbps")) {
      const nlohmann::json& p = lj.at("p2p_gbps");
      if (p.is_number()) {
        level.p2p_uniform_gbps = read_number(lj, "p2p_gbps", lw);
        MESHTP_CHECK(level.p2p_uniform_gbps > 0, "{}: p2p_gbps={} must be positive", lw,
                     level.p2p_uniform_gbps);
      } else {
        MESHTP_CHECK(p.is_array(), "{}: 'p2p_gbps' must be a number or a matrix, got {}", lw,
                     p.dump());
        for (const auto& row : p) {
          MESHTP_CHECK(row.is_array(), "{}: 'p2p_gbps' rows must be arrays, got {}", lw,
                       row.dump());
          std::vector<double> r;
          for (const auto& v : row) {
            MESHTP_CHECK(v.is_number(), "{}: 'p2p_gbps' entries must be numbers, got {}", lw,
                         v.dump());
            r.push_back(v.get<double>());
          }
          level.p2p_gbps.push_back(std::move(r));
        }
      }
    }
    t.levels.push_back(std::move(level));
  }

  if (j.contains("calibration")) {
    const std::string cw = where + ", calibration";
    const nlohmann::json& c = j.at("calibration");
    check_fields(
        c, {"source", "gemm_tflops", "elementwise_gbps", "step_overhead_us", "groups", "meshes"},
        cw);
    t.calibration.source = read_optional_string(c, "source", cw, "");
    t.calibration.gemm_tflops = read_optional_number(c, "gemm_tflops", cw);
    t.calibration.elementwise_gbps = read_optional_number(c, "elementwise_gbps", cw);
    t.calibration.step_overhead_us = read_optional_number(c, "step_overhead_us", cw);
    if (c.contains("meshes")) {
      const nlohmann::json& meshes = c.at("meshes");
      MESHTP_CHECK(meshes.is_array(), "{}: 'meshes' must be an array", cw);
      for (std::size_t i = 0; i < meshes.size(); ++i) {
        const std::string mw = fmt::format("{}, mesh {}", cw, i);
        const nlohmann::json& mj = meshes[i];
        check_fields(mj, {"mesh", "sharing"}, mw);
        const nlohmann::json& dims = mj.contains("mesh") ? mj.at("mesh") : nlohmann::json();
        MESHTP_CHECK(dims.is_array() && dims.size() == 2,
                     "{}: 'mesh' must be two integers [d1, d2], got {}", mw, dims.dump());
        const std::vector<int> d =
            read_int_list(mj, "mesh", mw, 1, std::numeric_limits<int>::max());
        t.calibration.meshes.push_back(
            {.mesh = {d[0], d[1]}, .sharing = read_optional_number(mj, "sharing", mw).value_or(0)});
      }
    }
    if (c.contains("groups")) {
      const nlohmann::json& groups = c.at("groups");
      MESHTP_CHECK(groups.is_array(), "{}: 'groups' must be an array", cw);
      for (std::size_t i = 0; i < groups.size(); ++i) {
        const std::string gw = fmt::format("{}, group {}", cw, i);
        const nlohmann::json& gj = groups[i];
        check_fields(gj, {"size", "stride", "all_reduce", "all_gather", "reduce_scatter"}, gw);
        GroupCalibration g;
        g.size = read_int_in_range(gj, "size", gw);
        g.stride = read_int_in_range(gj, "stride", gw);
        g.all_reduce = fit_from_json(gj, "all_reduce", gw);
        g.all_gather = fit_from_json(gj, "all_gather", gw);
        g.reduce_scatter = fit_from_json(gj, "reduce_scatter", gw);
        t.calibration.groups.push_back(std::move(g));
      }
    }
  }
  t.validate();
  if (j.contains("ranges")) {
    t.ranges = ranges_from_json(j.at("ranges"), where);
    check_ranges(t.ranges, to_json(t), where);  // to_json(t) has no ranges yet
  }
  return t;
}

}  // namespace meshtp::plan
