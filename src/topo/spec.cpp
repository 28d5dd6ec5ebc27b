#include "topo/spec.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.hpp"
#include "core/json_util.hpp"
#include "topo/networks.hpp"
#include "topo/torus.hpp"

namespace meshtp::topo {

const char* name(PlacementKind k) {
  switch (k) {
    case PlacementKind::kRowMajor: return "row-major";
    case PlacementKind::kFold: return "fold";
    case PlacementKind::kExplicit: return "explicit";
  }
  return "?";
}

namespace {

constexpr int kMaxCount = 1 << 20;

double read_gbps(const nlohmann::json& j, std::string_view key, std::string_view where) {
  const double v = read_number(j, key, where);
  MESHTP_CHECK(v > 0, "{}: bandwidth {}={} must be positive", where, key, v);
  return v;
}

double read_latency(const nlohmann::json& j, std::string_view where) {
  const double v = read_optional_number(j, "latency_us", where).value_or(0);
  MESHTP_CHECK(v >= 0, "{}: latency_us={} must not be negative", where, v);
  return v;
}

TorusSpec torus_spec(const nlohmann::json& j, std::string_view where) {
  check_fields(j, {"generator", "dims", "link_gbps", "latency_us", "placement"}, where);
  return TorusSpec{.dims = read_int_list(j, "dims", where, 1, kMaxCount),
                   .link_gbps = read_gbps(j, "link_gbps", where),
                   .latency_us = read_latency(j, where)};
}

Graph fat_tree_from_json(const nlohmann::json& j, std::string_view where) {
  check_fields(j, {"generator", "down", "up", "link_gbps", "latency_us", "placement"}, where);
  FatTreeSpec s{.down = read_int_list(j, "down", where, 1, kMaxCount),
                .up = read_int_list(j, "up", where, 1, kMaxCount),
                .link_gbps = {},
                .latency_us = read_latency(j, where)};
  if (require_field(j, "link_gbps", where).is_number()) {
    s.link_gbps.assign(s.down.size(), read_gbps(j, "link_gbps", where));
  } else {
    s.link_gbps = read_number_list(j, "link_gbps", where);
    for (std::size_t i = 0; i < s.link_gbps.size(); ++i) {
      MESHTP_CHECK(s.link_gbps[i] > 0, "{}: bandwidth link_gbps[{}]={} must be positive", where,
                   i, s.link_gbps[i]);
    }
  }
  return fat_tree(s);
}

Graph dragonfly_from_json(const nlohmann::json& j, std::string_view where) {
  check_fields(j, {"generator", "groups", "routers", "devices", "device_gbps", "local_gbps",
                   "global_gbps", "latency_us", "placement"}, where);
  return dragonfly(DragonflySpec{.groups = read_int(j, "groups", where, 1, kMaxCount),
                                 .routers = read_int(j, "routers", where, 1, kMaxCount),
                                 .devices = read_int(j, "devices", where, 1, kMaxCount),
                                 .device_gbps = read_gbps(j, "device_gbps", where),
                                 .local_gbps = read_gbps(j, "local_gbps", where),
                                 .global_gbps = read_gbps(j, "global_gbps", where),
                                 .latency_us = read_latency(j, where)});
}

// Explicit link lists: nodes by name ("dev<i>" or a router), optional routes by link names.
Graph links_from_json(const nlohmann::json& j, std::string_view where) {
  check_fields(j, {"generator", "devices", "routers", "links", "routes", "placement"}, where);
  Graph g(read_int(j, "devices", where, 1, kMaxCount));
  std::map<std::string, int> node;
  for (int d = 0; d < g.devices(); ++d) node[g.node_name(d)] = d;
  if (j.contains("routers")) {
    const nlohmann::json& rs = j.at("routers");
    MESHTP_CHECK(rs.is_array(), "{}: 'routers' must be an array of names, got {}", where,
                 rs.dump());
    for (const auto& r : rs) {
      MESHTP_CHECK(r.is_string(), "{}: router names must be strings, got {}", where, r.dump());
      const std::string n = r.get<std::string>();
      MESHTP_CHECK(!node.contains(n), "{}: node name '{}' is used twice", where, n);
      node[n] = g.add_router(n);
    }
  }
  auto lookup = [&](const std::string& n, std::string_view w) {
    const auto it = node.find(n);
    MESHTP_CHECK(it != node.end(), "{}: unknown node '{}' (devices are dev0..dev{}; routers "
                 "must be listed in 'routers')", w, n, g.devices() - 1);
    return it->second;
  };
  const nlohmann::json& links = require_field(j, "links", where);
  MESHTP_CHECK(links.is_array() && !links.empty(), "{}: 'links' must be a non-empty array",
               where);
  std::map<std::string, int> link_id;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const std::string lw = fmt::format("{}, link {}", where, i);
    const nlohmann::json& l = links[i];
    check_fields(l, {"name", "from", "to", "gbps", "latency_us", "sharing"}, lw);
    const std::string n = read_optional_string(l, "name", lw, fmt::format("l{}", i));
    MESHTP_CHECK(!link_id.contains(n), "{}: link name '{}' is used twice", lw, n);
    const Sharing sharing =
        parse_sharing(read_optional_string(l, "sharing", lw, "split-duplex"), lw);
    link_id[n] = g.add_link(n, lookup(read_string(l, "from", lw), lw),
                            lookup(read_string(l, "to", lw), lw), read_gbps(l, "gbps", lw),
                            read_latency(l, lw), sharing);
  }
  if (j.contains("routes")) {
    const nlohmann::json& routes = j.at("routes");
    MESHTP_CHECK(routes.is_array(), "{}: 'routes' must be an array", where);
    for (std::size_t i = 0; i < routes.size(); ++i) {
      const std::string rw = fmt::format("{}, route {}", where, i);
      const nlohmann::json& r = routes[i];
      check_fields(r, {"from", "to", "links"}, rw);
      const int src = lookup(read_string(r, "from", rw), rw);
      const int dst = lookup(read_string(r, "to", rw), rw);
      MESHTP_CHECK(src < g.devices() && dst < g.devices() && src != dst, "{}: routes join two "
                   "distinct devices", rw);
      const nlohmann::json& names = require_field(r, "links", rw);
      MESHTP_CHECK(names.is_array() && !names.empty(), "{}: 'links' must be a non-empty array "
                   "of link names", rw);
      Route route;
      int at = src;
      for (const auto& nj : names) {
        MESHTP_CHECK(nj.is_string(), "{}: link names must be strings, got {}", rw, nj.dump());
        const auto it = link_id.find(nj.get<std::string>());
        MESHTP_CHECK(it != link_id.end(), "{}: unknown link '{}'", rw, nj.get<std::string>());
        const Link& l = g.link(it->second);
        MESHTP_CHECK(l.a == at || l.b == at, "{}: link '{}' does not touch '{}', where the "
                     "route has arrived", rw, l.name, g.node_name(at));
        route.push_back(Hop{.link = it->second, .forward = l.a == at});
        at = l.a == at ? l.b : l.a;
      }
      MESHTP_CHECK(at == dst, "{}: the links end at '{}', not at '{}'", rw, g.node_name(at),
                   g.node_name(dst));
      g.set_route(src, dst, std::move(route));
    }
  }
  return g;
}

Graph parse_and_build(const nlohmann::json& j, std::string_view where) {
  MESHTP_CHECK(j.is_object(), "{}: expected a JSON object, got {}", where, j.dump());
  const std::string gen = read_string(j, "generator", where);
  const std::string gw = fmt::format("{} ({})", where, gen);
  if (gen == "torus") return torus(torus_spec(j, gw));
  if (gen == "tpuv4") return tpuv4_slice(torus_spec(j, gw));
  if (gen == "switch") {
    check_fields(j, {"generator", "devices", "link_gbps", "latency_us", "placement"}, gw);
    return single_switch(SwitchSpec{.devices = read_int(j, "devices", gw, 1, kMaxCount),
                                    .link_gbps = read_gbps(j, "link_gbps", gw),
                                    .latency_us = read_latency(j, gw)});
  }
  if (gen == "fat-tree") return fat_tree_from_json(j, gw);
  if (gen == "dragonfly") return dragonfly_from_json(j, gw);
  if (gen == "links") return links_from_json(j, gw);
  fail("{}: unknown generator '{}'; valid: torus, tpuv4, switch, fat-tree, dragonfly, links "
       "(hierarchical matrices use the top-level 'levels' field)", where, gen);
}

}  // namespace

void check_placement(const std::vector<int>& placement, int devices) {
  MESHTP_CHECK(static_cast<int>(placement.size()) == devices, "placement lists {} ranks but "
               "there are {} devices", placement.size(), devices);
  std::vector<int> owner(static_cast<std::size_t>(devices), -1);
  for (int r = 0; r < devices; ++r) {
    const int d = placement[static_cast<std::size_t>(r)];
    MESHTP_CHECK(d >= 0 && d < devices, "placement: rank {} is on device {}, outside [0, {})", r,
                 d, devices);
    MESHTP_CHECK(owner[static_cast<std::size_t>(d)] < 0, "placement: ranks {} and {} are both "
                 "placed on device {}", owner[static_cast<std::size_t>(d)], r, d);
    owner[static_cast<std::size_t>(d)] = r;
  }
}

GraphSpec graph_spec_from_json(const nlohmann::json& j, std::string_view where) {
  const auto built = std::make_shared<const Graph>(parse_and_build(j, where));
  const Graph& g = *built;
  g.validate();
  GraphSpec spec;
  spec.json = j;
  spec.built = built;
  spec.devices = g.devices();
  const std::string gen = j.at("generator").get<std::string>();
  const bool torus_like = gen == "torus" || gen == "tpuv4";
  spec.placement = gen == "tpuv4" ? PlacementKind::kFold : PlacementKind::kRowMajor;
  if (j.contains("placement")) {
    const nlohmann::json& p = j.at("placement");
    if (p.is_string()) {
      const std::string s = p.get<std::string>();
      if (s == "row-major") {
        spec.placement = PlacementKind::kRowMajor;
      } else if (s == "fold") {
        MESHTP_CHECK(torus_like, "{}: placement 'fold' needs a torus or tpuv4 generator, not "
                     "'{}'", where, gen);
        spec.placement = PlacementKind::kFold;
      } else {
        fail("{}: unknown placement '{}'; valid: row-major, fold, or an array of devices",
             where, s);
      }
    } else {
      MESHTP_CHECK(p.is_array(), "{}: placement must be 'row-major', 'fold' or an array of "
                   "devices, got {}", where, p.dump());
      spec.placement = PlacementKind::kExplicit;
      spec.explicit_placement = read_int_list(j, "placement", where, -kMaxCount, kMaxCount);
      try {
        check_placement(spec.explicit_placement, g.devices());
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
    }
  }
  return spec;
}

Graph build_graph(const GraphSpec& spec) { return parse_and_build(spec.json, "graph"); }

std::vector<int> place_mesh(const GraphSpec& spec, const Graph& graph,
                            const std::vector<int>& shape) {
  std::int64_t n = 1;
  for (const int d : shape) n *= d;
  MESHTP_CHECK(n == graph.devices(), "mesh of {} ranks does not match the {} devices", n,
               graph.devices());
  switch (spec.placement) {
    case PlacementKind::kExplicit: return spec.explicit_placement;
    case PlacementKind::kFold:
      MESHTP_CHECK(shape.size() == 2, "fold placement needs a 2D mesh, got {} dims",
                   shape.size());
      return fold_on_torus(graph, graph.torus_dims, shape[0], shape[1]);
    case PlacementKind::kRowMajor: break;
  }
  std::vector<int> identity(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) identity[static_cast<std::size_t>(r)] = r;
  return identity;
}

}  // namespace meshtp::topo
