// The "graph" object of topology files: every generator parses, bad input names the value.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/json_util.hpp"
#include "topo/simgrid.hpp"
#include "topo/spec.hpp"

namespace meshtp::topo {
namespace {

GraphSpec spec(const std::string& text) { return graph_spec_from_json(parse_json(text, "t"), "g"); }

std::string error_of(const std::string& text) {
  try {
    spec(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Spec, EveryGeneratorParses) {
  EXPECT_EQ(spec(R"({"generator": "torus", "dims": [4, 4], "link_gbps": 25})").devices, 16);
  const GraphSpec tpu = spec(R"({"generator": "tpuv4", "dims": [4, 8, 8], "link_gbps": 50})");
  EXPECT_EQ(tpu.devices, 256);
  EXPECT_EQ(tpu.placement, PlacementKind::kFold);  // the tpuv4 default
  EXPECT_EQ(spec(R"({"generator": "switch", "devices": 8, "link_gbps": 300})").devices, 8);
  EXPECT_EQ(spec(R"({"generator": "fat-tree", "down": [4, 4], "up": [1, 2],
                     "link_gbps": [25, 50]})").devices, 16);
  EXPECT_EQ(spec(R"({"generator": "fat-tree", "down": [2, 2], "up": [1, 2],
                     "link_gbps": 10})").devices, 4);
  EXPECT_EQ(spec(R"({"generator": "dragonfly", "groups": 3, "routers": 2, "devices": 2,
                     "device_gbps": 25, "local_gbps": 25, "global_gbps": 10})").devices, 12);
  const GraphSpec links = spec(R"({"generator": "links", "devices": 3, "routers": ["sw"],
      "links": [{"name": "a", "from": "dev0", "to": "sw", "gbps": 10},
                {"name": "b", "from": "dev1", "to": "sw", "gbps": 10},
                {"name": "c", "from": "dev2", "to": "sw", "gbps": 10, "sharing": "shared"},
                {"name": "d", "from": "dev0", "to": "dev2", "gbps": 1}],
      "routes": [{"from": "dev0", "to": "dev2", "links": ["a", "c"]}],
      "placement": [2, 0, 1]})");
  EXPECT_EQ(links.placement, PlacementKind::kExplicit);
  const Graph g = build_graph(links);
  // The explicit route wins over the shorter direct link d.
  EXPECT_EQ(g.route(0, 2).size(), 2u);
  EXPECT_EQ(g.route(2, 0).size(), 1u);
  EXPECT_EQ(place_mesh(links, g, {3, 1}), (std::vector<int>{2, 0, 1}));
}

TEST(Spec, BadInputNamesTheValue) {
  EXPECT_NE(error_of(R"({"generator": "hypercube"})").find("unknown generator 'hypercube'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "torus", "dims": [4], "link_gbps": 1, "wrap": true})")
                .find("unknown field 'wrap'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "torus", "dims": [4], "link_gbps": 0})")
                .find("bandwidth link_gbps=0 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "switch", "devices": 4, "link_gbps": -2})")
                .find("bandwidth link_gbps=-2 must be positive"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "links", "devices": 3,
                         "links": [{"from": "dev0", "to": "dev1", "gbps": 1}]})")
                .find("disconnected graph: device 'dev2' cannot be reached"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "links", "devices": 2,
                         "links": [{"from": "dev0", "to": "dev1", "gbps": 1, "sharing": "half"}]})")
                .find("unknown sharing 'half'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "torus", "dims": [4], "link_gbps": 1,
                         "placement": [0, 1, 1, 3]})")
                .find("placement: ranks 1 and 2 are both placed on device 1"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "torus", "dims": [4], "link_gbps": 1,
                         "placement": [0, 1, 2]})")
                .find("placement lists 3 ranks but there are 4 devices"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"generator": "switch", "devices": 4, "link_gbps": 1,
                         "placement": "fold"})")
                .find("placement 'fold' needs a torus or tpuv4 generator"),
            std::string::npos);
}

TEST(Spec, MeshMustMatchTheDevices) {
  const GraphSpec s = spec(R"({"generator": "torus", "dims": [4, 4], "link_gbps": 25})");
  try {
    place_mesh(s, build_graph(s), {4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mesh of 8 ranks does not match the 16 devices"),
              std::string::npos);
  }
}

TEST(Platform, FullZoneListsHostsLinksAndRoutes) {
  const GraphSpec s = spec(R"({"generator": "links", "devices": 2, "routers": ["sw"],
      "links": [{"name": "up0", "from": "dev0", "to": "sw", "gbps": 25, "latency_us": 2},
                {"name": "up1", "from": "dev1", "to": "sw", "gbps": 25, "sharing": "fatpipe"}]})");
  const Graph g = build_graph(s);
  const std::string xml =
      simgrid_platform_xml(g, {.tflops = 250, .memory_gib = 80, .launch_us = 12.5});
  EXPECT_NE(xml.find("<platform version=\"4.1\">"), std::string::npos);
  // The launch cost the planner charges per collective, for the simulated engines.
  EXPECT_NE(xml.find("<prop id=\"meshtp_launch_us\" value=\"12.5\"/>"), std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<zone id=\"meshtp\" routing=\"Full\">"), std::string::npos);
  EXPECT_NE(xml.find("<host id=\"dev0\" speed=\"250000000000000f\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<link id=\"up0\" bandwidth=\"25000000000Bps\" latency=\"2e-06s\" "
                     "sharing_policy=\"SPLITDUPLEX\"/>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("sharing_policy=\"FATPIPE\""), std::string::npos);
  EXPECT_NE(xml.find("<route src=\"dev0\" dst=\"dev1\" symmetrical=\"NO\"><link_ctn id=\"up0\" "
                     "direction=\"UP\"/><link_ctn id=\"up1\"/></route>"),
            std::string::npos)
      << xml;
  EXPECT_EQ(simgrid_hostfile(g, {1, 0}), "dev1\ndev0\n");
}

TEST(Platform, TorusBecomesATorusCluster) {
  const GraphSpec s = spec(R"({"generator": "torus", "dims": [4, 2], "link_gbps": 25,
                               "latency_us": 1})");
  const std::string xml = simgrid_platform_xml(build_graph(s), {.tflops = 1});
  EXPECT_NE(xml.find("radical=\"0-7\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("topology=\"TORUS\" topo_parameters=\"4,2\""), std::string::npos) << xml;
}

TEST(Platform, UniformStarBecomesAFlatCluster) {
  const GraphSpec s = spec(R"({"generator": "switch", "devices": 8, "link_gbps": 300})");
  const Graph g = build_graph(s);
  EXPECT_EQ(cluster_kind(g), ClusterKind::kStar);
  const std::string xml = simgrid_platform_xml(g, {.tflops = 1, .launch_us = 10});
  EXPECT_NE(xml.find("<cluster id=\"star\" prefix=\"dev\" suffix=\"\" radical=\"0-7\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<prop id=\"meshtp_launch_us\" value=\"10\"/>"), std::string::npos) << xml;
  EXPECT_THROW(simgrid_platform_xml(g, {.tflops = 1, .launch_us = -1}), Error);
  // The runtime's step cost the simulated device charges per 2D GeMM step (0 unless set).
  EXPECT_NE(xml.find("<prop id=\"meshtp_step_overhead_us\" value=\"0\"/>"), std::string::npos)
      << xml;
  EXPECT_NE(simgrid_platform_xml(g, {.tflops = 1, .step_overhead_us = 42.5})
                .find("<prop id=\"meshtp_step_overhead_us\" value=\"42.5\"/>"),
            std::string::npos);
  EXPECT_THROW(simgrid_platform_xml(g, {.tflops = 1, .step_overhead_us = -1}), Error);
  EXPECT_EQ(xml.find("topology="), std::string::npos);
  EXPECT_EQ(simgrid_link_name(g, g.route(2, 5)[1], -1), "star_link_5_DOWN");
}

}  // namespace
}  // namespace meshtp::topo
